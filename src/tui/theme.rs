//! Themes: a struct of named styles. The built-in themes are the files in
//! `themes/` (compiled in); a user theme file names only the styles it changes,
//! on top of its `base` (default "dark").

use std::path::{Path, PathBuf};
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

/// The built-in themes, in the order `t` cycles through them.
pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("mono", include_str!("../../themes/mono.toml")),
];

/// One style as a theme file writes it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StyleSpec {
    fg: Option<String>,
    bg: Option<String>,
    #[serde(default)]
    bold: bool,
    #[serde(default)]
    dim: bool,
    #[serde(default)]
    italic: bool,
    #[serde(default)]
    underlined: bool,
    #[serde(default)]
    reversed: bool,
}

impl StyleSpec {
    fn style(&self, field: &str) -> Result<Style, ThemeProblem> {
        let color = |c: &Option<String>| -> Result<Option<Color>, ThemeProblem> {
            c.as_deref()
                .map(|s| {
                    Color::from_str(s).map_err(|_| ThemeProblem::UnknownColour {
                        field: field.to_string(),
                        colour: s.to_string(),
                    })
                })
                .transpose()
        };
        let mut style = Style::default();
        if let Some(fg) = color(&self.fg)? {
            style = style.fg(fg);
        }
        if let Some(bg) = color(&self.bg)? {
            style = style.bg(bg);
        }
        for (on, m) in [
            (self.bold, Modifier::BOLD),
            (self.dim, Modifier::DIM),
            (self.italic, Modifier::ITALIC),
            (self.underlined, Modifier::UNDERLINED),
            (self.reversed, Modifier::REVERSED),
        ] {
            if on {
                style = style.add_modifier(m);
            }
        }
        Ok(style)
    }
}

macro_rules! theme {
    ($($field:ident),* $(,)?) => {
        /// Every style the dashboard draws with.
        #[derive(Debug, Clone, PartialEq)]
        pub struct Theme {
            pub name: String,
            $(pub $field: Style,)*
        }

        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct ThemeFile {
            #[serde(default)]
            #[allow(dead_code)]
            base: Option<String>,
            $($field: StyleSpec,)*
        }

        impl ThemeFile {
            fn build(self, name: &str) -> Result<Theme, ThemeProblem> {
                Ok(Theme {
                    name: name.to_string(),
                    $($field: self.$field.style(stringify!($field))?,)*
                })
            }
        }
    };
}

theme!(
    text,
    dim,
    border,
    border_focus,
    title,
    header,
    header_accent,
    hint_key,
    hint_text,
    state_running,
    state_paused,
    state_stopping,
    state_finished,
    column_header,
    phase,
    row_label,
    current_row,
    value,
    baseline,
    better,
    worse,
    failed,
    failed_other,
    skipped,
    pending,
    running,
    excluded,
    selected,
    gpu_util,
    gpu_mem,
    gpu_hot,
    gpu_bar_empty,
    gpu_active,
    sparkline,
    log,
    log_failure,
    log_ready,
    log_note,
    log_match,
    alert,
    message,
    warning,
    popup,
    popup_title,
);

/// A theme the dashboard cannot use: the name or file given, and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("theme {source_name}: {problem}")]
pub struct ThemeError {
    pub source_name: String,
    #[source]
    pub problem: ThemeProblem,
}

/// What is wrong with a theme.
#[derive(Debug, thiserror::Error)]
pub enum ThemeProblem {
    #[error("{0}")]
    Read(#[from] std::io::Error),
    /// Not TOML at all.
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    /// TOML, but not a theme: an unknown or a missing style.
    #[error("{}", .0.message())]
    Styles(toml::de::Error),
    #[error("{field}: unknown colour \"{colour}\"")]
    UnknownColour { field: String, colour: String },
    #[error("unknown base theme \"{0}\" (built in: {builtin})", builtin = names().join(", "))]
    UnknownBase(String),
    #[error("no such theme (built in: {builtin}; or give a path to a .toml file)", builtin = names().join(", "))]
    NoSuchTheme,
}

fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Build a theme from a file's text. A built-in file stands alone (it must name
/// every style); a user file is laid over its `base`.
fn build(text: &str, name: &str, over_base: bool) -> Result<Theme, ThemeProblem> {
    let user: toml::Table = toml::from_str(text)?;
    let mut table = toml::Table::new();
    if over_base {
        let base_name = user.get("base").and_then(|v| v.as_str()).unwrap_or("dark");
        let base = builtin_text(base_name)
            .ok_or_else(|| ThemeProblem::UnknownBase(base_name.to_string()))?;
        table = toml::from_str(base)?;
    }
    for (k, v) in user {
        table.insert(k, v);
    }
    let file: ThemeFile = toml::Value::Table(table)
        .try_into()
        .map_err(ThemeProblem::Styles)?;
    file.build(name)
}

pub fn names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

impl Theme {
    pub fn builtin(name: &str) -> Option<Theme> {
        builtin_text(name).and_then(|t| build(t, name, false).ok())
    }

    pub fn dark() -> Theme {
        Theme::builtin("dark").expect("the built-in dark theme is complete (tested)")
    }

    pub fn mono() -> Theme {
        Theme::builtin("mono").expect("the built-in mono theme is complete (tested)")
    }

    /// A theme from a file's text (a user theme over its base).
    pub fn from_text(text: &str, source: &str) -> Result<Theme, ThemeError> {
        let name = Path::new(source)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(source)
            .to_string();
        build(text, &name, true).map_err(|problem| ThemeError {
            source_name: source.to_string(),
            problem,
        })
    }

    /// `--theme NAME|PATH`: a built-in name, a theme in the user's theme folder,
    /// or a file. Without it: `mono` under `NO_COLOR`, else `dark`.
    pub fn resolve(
        arg: Option<&str>,
        user_dir: Option<&Path>,
        no_color: bool,
    ) -> Result<Theme, ThemeError> {
        let Some(arg) = arg else {
            return Ok(if no_color {
                Theme::mono()
            } else {
                Theme::dark()
            });
        };
        let err = |problem: ThemeProblem| ThemeError {
            source_name: arg.to_string(),
            problem,
        };
        let looks_like_path = arg.contains('/') || arg.ends_with(".toml");
        if !looks_like_path {
            if let Some(dir) = user_dir {
                let p = dir.join("themes").join(format!("{arg}.toml"));
                if p.exists() {
                    return read(&p);
                }
            }
            if let Some(t) = builtin_text(arg) {
                return build(t, arg, false).map_err(err);
            }
            return Err(err(ThemeProblem::NoSuchTheme));
        }
        read(Path::new(arg))
    }
}

fn read(path: &Path) -> Result<Theme, ThemeError> {
    let text = std::fs::read_to_string(path).map_err(|e| ThemeError {
        source_name: path.display().to_string(),
        problem: e.into(),
    })?;
    Theme::from_text(&text, &path.display().to_string())
}

/// Where the user's `keys.toml` and `themes/` live: `$XDG_CONFIG_HOME/sweeptop`,
/// else `~/.config/sweeptop`.
pub fn user_config_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(x).join("sweeptop"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|h| PathBuf::from(h).join(".config").join("sweeptop"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_theme_names_every_style() {
        for (name, text) in BUILTIN {
            // Built without a base: a missing entry is an error.
            let t = build(text, name, false);
            assert!(t.is_ok(), "{name}: {:?}", t.err());
        }
    }

    #[test]
    fn mono_has_no_colour() {
        let t = Theme::mono();
        let styles = [t.ok_styles(), vec![t.failed, t.alert, t.header, t.selected]].concat();
        for s in styles {
            assert_eq!(s.fg, None);
            assert_eq!(s.bg, None);
        }
    }

    #[test]
    fn a_user_theme_overrides_only_what_it_names() {
        let t = Theme::from_text(
            "base = \"light\"\nfailed = { fg = \"#ff0000\", bold = true }\n",
            "mine.toml",
        )
        .unwrap();
        let light = Theme::builtin("light").unwrap();
        assert_eq!(t.name, "mine");
        assert_eq!(
            t.failed,
            Style::default()
                .fg(Color::Rgb(255, 0, 0))
                .add_modifier(Modifier::BOLD)
        );
        assert_eq!(t.better, light.better);
        assert_eq!(t.header, light.header);
    }

    #[test]
    fn bad_theme_files_are_explained() {
        let e = Theme::from_text("faild = { fg = \"red\" }", "x.toml").unwrap_err();
        assert!(e.to_string().contains("faild"), "{e}");
        let e = Theme::from_text("failed = { fg = \"reddish\" }", "x.toml").unwrap_err();
        assert!(e.to_string().contains("unknown colour \"reddish\""), "{e}");
        let e = Theme::resolve(Some("nope"), None, false).unwrap_err();
        assert!(e.to_string().contains("built in: dark, light"), "{e}");
    }

    #[test]
    fn no_color_picks_mono_unless_a_theme_is_given() {
        assert_eq!(Theme::resolve(None, None, true).unwrap().name, "mono");
        assert_eq!(Theme::resolve(None, None, false).unwrap().name, "dark");
        assert_eq!(
            Theme::resolve(Some("light"), None, true).unwrap().name,
            "light"
        );
    }

    impl Theme {
        fn ok_styles(&self) -> Vec<Style> {
            vec![self.value, self.better, self.worse, self.baseline]
        }
    }
}
