//! What a user (a key, an attached client, a signal) can ask of a running sweep.
//! The serde form is the control protocol's; [`Command::from_str`] reads the
//! form typed on the command line (`attach --send skip-cell`).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    Pause,
    Resume,
    TogglePause,
    /// Skip the rest of a running config: the one named, or (when configs
    /// run side by side, the first that started) the one running.
    SkipConfig {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        config: Option<String>,
    },
    /// Skip the running cell of a config (the one named, or as above).
    SkipCell {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        config: Option<String>,
    },
    /// Run a cell (or every cell of a config) again at the end of the sweep.
    Retry {
        target: String,
    },
    /// Leave a config out of the rest of the sweep.
    Exclude {
        config: String,
    },
    /// Undo an exclusion (cells already skipped stay skipped; retry them).
    Include {
        config: String,
    },
    Quit,
}

/// The command-line forms, for the error message.
pub const COMMAND_FORMS: &str =
    "pause, resume, toggle-pause, skip-config[=CONFIG], skip-cell[=CONFIG], quit, retry=CELL|CONFIG, exclude=CONFIG, include=CONFIG";

impl Command {
    /// The name recorded in `Action` events.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Pause => "pause",
            Command::Resume => "resume",
            Command::TogglePause => "toggle_pause",
            Command::SkipConfig { .. } => "skip_config",
            Command::SkipCell { .. } => "skip_cell",
            Command::Retry { .. } => "retry",
            Command::Exclude { .. } => "exclude",
            Command::Include { .. } => "include",
            Command::Quit => "quit",
        }
    }

    /// The cell or config it names, if any.
    pub fn target(&self) -> Option<String> {
        match self {
            Command::Retry { target } => Some(target.clone()),
            Command::Exclude { config } | Command::Include { config } => Some(config.clone()),
            Command::SkipConfig { config } | Command::SkipCell { config } => config.clone(),
            _ => None,
        }
    }
}

/// Text that is not one of the command forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("`{0}=` names no config: {COMMAND_FORMS}")]
    NoConfig(&'static str),
    /// The text as sent, cut at 80 characters.
    #[error("unknown command `{0}`: {COMMAND_FORMS}")]
    Unknown(String),
}

impl FromStr for Command {
    type Err = CommandError;

    fn from_str(s: &str) -> Result<Command, CommandError> {
        Ok(match s {
            "pause" => Command::Pause,
            "resume" => Command::Resume,
            "toggle-pause" => Command::TogglePause,
            "skip-config" => Command::SkipConfig { config: None },
            "skip-cell" => Command::SkipCell { config: None },
            "quit" => Command::Quit,
            other if other.starts_with("skip-config=") || other.starts_with("skip-cell=") => {
                let (form, config) = other.split_once('=').unwrap_or((other, ""));
                let skip_config = form == "skip-config";
                if config.is_empty() {
                    return Err(CommandError::NoConfig(if skip_config {
                        "skip-config"
                    } else {
                        "skip-cell"
                    }));
                }
                let config = Some(config.to_string());
                if skip_config {
                    Command::SkipConfig { config }
                } else {
                    Command::SkipCell { config }
                }
            }
            other => match (
                other.strip_prefix("retry="),
                other.strip_prefix("exclude="),
                other.strip_prefix("include="),
            ) {
                (Some(t), _, _) if !t.is_empty() => Command::Retry {
                    target: t.to_string(),
                },
                (_, Some(c), _) if !c.is_empty() => Command::Exclude {
                    config: c.to_string(),
                },
                (_, _, Some(c)) if !c.is_empty() => Command::Include {
                    config: c.to_string(),
                },
                _ => {
                    let mut shown: String = other.chars().take(80).collect();
                    if shown.len() < other.len() {
                        shown.push('…');
                    }
                    return Err(CommandError::Unknown(shown));
                }
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_forms() {
        assert_eq!("skip-cell".parse(), Ok(Command::SkipCell { config: None }));
        assert_eq!(
            "skip-config=tp1-dflash".parse(),
            Ok(Command::SkipConfig {
                config: Some("tp1-dflash".into())
            })
        );
        assert!("skip-cell=".parse::<Command>().is_err());
        assert_eq!(
            "retry=tp1-baseline".parse(),
            Ok(Command::Retry {
                target: "tp1-baseline".into()
            })
        );
        assert!("retry=".parse::<Command>().is_err());
        let e = "jump".parse::<Command>().unwrap_err().to_string();
        assert!(
            e.contains("unknown command `jump`") && e.contains("skip-config"),
            "{e}"
        );
    }

    #[test]
    fn protocol_form() {
        let json = serde_json::to_string(&Command::Exclude { config: "c".into() }).unwrap();
        assert_eq!(json, r#"{"command":"exclude","config":"c"}"#);
        assert_eq!(Command::TogglePause.name(), "toggle_pause");
    }
}
