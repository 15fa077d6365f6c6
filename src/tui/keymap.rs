//! The keymap as data: one table of bindable actions with their default keys and
//! help text. Input, the hints bar and the help overlay all read this table, and a
//! user file (`keys.toml`) overrides it action by action.

use std::fmt;
use std::path::Path;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// What a key can ask the dashboard to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    Pause,
    SkipConfig,
    SkipCell,
    Retry,
    /// Every failed cell of the run, again.
    RetryAll,
    Exclude,
    Export,
    Quit,
    Up,
    Down,
    Left,
    Right,
    PageUp,
    PageDown,
    Top,
    Bottom,
    Details,
    Focus,
    Follow,
    Search,
    /// `?` in the log: search backward (elsewhere `?` is the help).
    SearchBack,
    Help,
    Theme,
    Value,
    Close,
    /// Leave an attached view; the sweep keeps running.
    Detach,
    /// The focused pane takes the whole screen (again: back).
    Zoom,
    /// Long log lines wrap, or are cut at the pane's edge.
    Wrap,
    /// Only configs with a failed cell.
    Failures,
    /// Only the next (previous) phase; past the last, every phase.
    NextPhase,
    PrevPhase,
    /// Sort each phase's configs by the selected column's value.
    Sort,
    /// Latency values at p50, p90 or p99.
    Percentile,
    /// A chart of the selected workload across the phase's configs.
    Chart,
}

/// One row of the table: the action, its name in `keys.toml`, what the help says,
/// its default keys, and the short label the hints bar shows (if it is shown there).
pub struct Binding {
    pub key: Key,
    pub name: &'static str,
    pub help: &'static str,
    pub defaults: &'static [&'static str],
    pub hint: Option<&'static str>,
}

/// The one table of key bindings, in the order the help lists them.
pub const BINDINGS: &[Binding] = &[
    Binding {
        key: Key::Pause,
        name: "pause",
        help: "pause after the running cell / resume",
        defaults: &["p"],
        hint: Some("pause"),
    },
    Binding {
        key: Key::SkipConfig,
        name: "skip_config",
        help: "skip the rest of the running config (the selected one when several run)",
        defaults: &["s"],
        hint: Some("skip cfg"),
    },
    Binding {
        key: Key::SkipCell,
        name: "skip_cell",
        help: "skip the running cell (the selected config's when several run)",
        defaults: &["n"],
        hint: Some("skip cell"),
    },
    Binding {
        key: Key::Retry,
        name: "retry",
        help: "retry the selected failed/skipped cell (the row label: its config); after the end asks, then runs it",
        defaults: &["r"],
        hint: Some("retry"),
    },
    Binding {
        key: Key::RetryAll,
        name: "retry_all",
        help: "retry every failed cell of the run (after the end asks, then runs them)",
        defaults: &["R"],
        hint: None,
    },
    Binding {
        key: Key::Exclude,
        name: "exclude",
        help: "exclude the selected config from the rest of the sweep",
        defaults: &["x"],
        hint: Some("exclude"),
    },
    Binding {
        key: Key::Export,
        name: "export",
        help: "export the grid (CSV + Markdown) into the run directory",
        defaults: &["e"],
        hint: Some("export"),
    },
    Binding {
        key: Key::Quit,
        name: "quit",
        help: "quit (asks first; stops the server, the sweep can be resumed)",
        defaults: &["q", "ctrl-c"],
        hint: Some("quit"),
    },
    Binding {
        key: Key::Up,
        name: "up",
        help: "move up (grid) / scroll up (log)",
        defaults: &["up", "k"],
        hint: None,
    },
    Binding {
        key: Key::Down,
        name: "down",
        help: "move down (grid) / scroll down (log)",
        defaults: &["down", "j"],
        hint: None,
    },
    Binding {
        key: Key::Left,
        name: "left",
        help: "move left (the row label selects the whole config)",
        defaults: &["left", "h"],
        hint: None,
    },
    Binding {
        key: Key::Right,
        name: "right",
        help: "move right",
        defaults: &["right", "l"],
        hint: None,
    },
    Binding {
        key: Key::PageUp,
        name: "page_up",
        help: "page up",
        defaults: &["pageup"],
        hint: None,
    },
    Binding {
        key: Key::PageDown,
        name: "page_down",
        help: "page down",
        defaults: &["pagedown"],
        hint: None,
    },
    Binding {
        key: Key::Top,
        name: "top",
        help: "first row / oldest log line",
        defaults: &["g", "home"],
        hint: None,
    },
    Binding {
        key: Key::Bottom,
        name: "bottom",
        help: "last row / newest log line (follows again)",
        defaults: &["G", "end"],
        hint: None,
    },
    Binding {
        key: Key::Details,
        name: "details",
        help: "details of the selected cell or config",
        defaults: &["enter"],
        hint: Some("details"),
    },
    Binding {
        key: Key::Focus,
        name: "focus",
        help: "move focus: grid, log, GPUs (z zooms the focused one)",
        defaults: &["tab"],
        hint: Some("focus"),
    },
    Binding {
        key: Key::Follow,
        name: "follow",
        help: "follow the log (toggle)",
        defaults: &["f"],
        hint: None,
    },
    Binding {
        key: Key::Search,
        name: "search",
        help: "grid: show configs whose name has the text; log: search on, as / in less (n N Esc)",
        defaults: &["/"],
        hint: Some("find"),
    },
    Binding {
        key: Key::Failures,
        name: "failures",
        help: "show only configs with a failed cell (toggle)",
        defaults: &["F"],
        hint: None,
    },
    Binding {
        key: Key::NextPhase,
        name: "next_phase",
        help: "show only the next phase (past the last: every phase)",
        defaults: &["]"],
        hint: None,
    },
    Binding {
        key: Key::PrevPhase,
        name: "prev_phase",
        help: "show only the previous phase",
        defaults: &["["],
        hint: None,
    },
    Binding {
        key: Key::Sort,
        name: "sort",
        help: "sort each phase's configs by the selected column's value, best first (toggle)",
        defaults: &["o"],
        hint: None,
    },
    Binding {
        key: Key::Percentile,
        name: "percentile",
        help: "latency values (TTFT, ITL, decode tok/s) at p50, p90 or p99",
        defaults: &["%"],
        hint: None,
    },
    Binding {
        key: Key::Chart,
        name: "chart",
        help: "chart the selected workload: the grid's value against concurrency for each config of the phase",
        defaults: &["c"],
        hint: Some("chart"),
    },
    Binding {
        key: Key::Zoom,
        name: "zoom",
        help: "the focused pane fills the screen (again: back)",
        defaults: &["z"],
        hint: Some("zoom"),
    },
    Binding {
        key: Key::Wrap,
        name: "wrap",
        help: "wrap long log lines, or cut them at the edge (toggle)",
        defaults: &["w"],
        hint: None,
    },
    Binding {
        key: Key::Detach,
        name: "detach",
        help: "detach from an attached sweep (it keeps running)",
        defaults: &["d"],
        hint: Some("detach"),
    },
    Binding {
        key: Key::Help,
        name: "help",
        help: "this help (in the log, where ? searches back: F1)",
        defaults: &["?", "f1"],
        hint: Some("help"),
    },
    Binding {
        key: Key::SearchBack,
        name: "search_back",
        help: "log: search back from the bottom of the view, as ? in less (n N Esc)",
        defaults: &["?"],
        hint: None,
    },
    Binding {
        key: Key::Theme,
        name: "theme",
        help: "next theme",
        defaults: &["t"],
        hint: None,
    },
    Binding {
        key: Key::Value,
        name: "value",
        help: "next grid value (the values are listed below)",
        defaults: &["v"],
        hint: Some("value"),
    },
    Binding {
        key: Key::Close,
        name: "close",
        help: "close the popup / cancel; in the grid: follow the running cell and its log again",
        defaults: &["esc"],
        hint: None,
    },
];

/// A key as the terminal reports it, reduced to what bindings compare: the code
/// and the Ctrl/Alt modifiers (Shift is part of the character: `G`, `?`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Chord {
    pub code: KeyCode,
    pub ctrl: bool,
    pub alt: bool,
}

impl Chord {
    pub fn from_event(ev: &KeyEvent) -> Chord {
        let code = match ev.code {
            // Some terminals report Shift-Tab as Tab with Shift.
            KeyCode::Tab if ev.modifiers.contains(KeyModifiers::SHIFT) => KeyCode::BackTab,
            c => c,
        };
        Chord {
            code,
            ctrl: ev.modifiers.contains(KeyModifiers::CONTROL),
            alt: ev.modifiers.contains(KeyModifiers::ALT),
        }
    }

    /// Parse `p`, `G`, `?`, `ctrl-c`, `alt-x`, `enter`, `tab`, `esc`, `up`, `f5`, `space`…
    pub fn parse(s: &str) -> Result<Chord, UnknownKey> {
        let mut ctrl = false;
        let mut alt = false;
        let mut rest = s;
        loop {
            let lower = rest.to_ascii_lowercase();
            if rest.len() > 1 && (lower.starts_with("ctrl-") || lower.starts_with("ctrl+")) {
                ctrl = true;
                rest = &rest[5..];
            } else if rest.len() > 1 && (lower.starts_with("alt-") || lower.starts_with("alt+")) {
                alt = true;
                rest = &rest[4..];
            } else {
                break;
            }
        }
        let mut chars = rest.chars();
        let code = match (chars.next(), chars.next()) {
            (Some(c), None) => KeyCode::Char(if ctrl { c.to_ascii_lowercase() } else { c }),
            _ => match rest.to_ascii_lowercase().as_str() {
                "enter" | "return" => KeyCode::Enter,
                "tab" => KeyCode::Tab,
                "backtab" | "shift-tab" => KeyCode::BackTab,
                "esc" | "escape" => KeyCode::Esc,
                "space" => KeyCode::Char(' '),
                "backspace" => KeyCode::Backspace,
                "up" => KeyCode::Up,
                "down" => KeyCode::Down,
                "left" => KeyCode::Left,
                "right" => KeyCode::Right,
                "pageup" | "pgup" => KeyCode::PageUp,
                "pagedown" | "pgdn" => KeyCode::PageDown,
                "home" => KeyCode::Home,
                "end" => KeyCode::End,
                "delete" | "del" => KeyCode::Delete,
                "insert" | "ins" => KeyCode::Insert,
                f if f.starts_with('f')
                    && f[1..].parse::<u8>().is_ok_and(|n| (1..=24).contains(&n)) =>
                {
                    KeyCode::F(f[1..].parse().unwrap_or(1))
                }
                _ => return Err(UnknownKey(s.to_string())),
            },
        };
        Ok(Chord { code, ctrl, alt })
    }
}

impl fmt::Display for Chord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            f.write_str("Ctrl-")?;
        }
        if self.alt {
            f.write_str("Alt-")?;
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("Space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::Enter => f.write_str("Enter"),
            KeyCode::Tab => f.write_str("Tab"),
            KeyCode::BackTab => f.write_str("Shift-Tab"),
            KeyCode::Esc => f.write_str("Esc"),
            KeyCode::Backspace => f.write_str("Backspace"),
            KeyCode::Up => f.write_str("↑"),
            KeyCode::Down => f.write_str("↓"),
            KeyCode::Left => f.write_str("←"),
            KeyCode::Right => f.write_str("→"),
            KeyCode::PageUp => f.write_str("PgUp"),
            KeyCode::PageDown => f.write_str("PgDn"),
            KeyCode::Home => f.write_str("Home"),
            KeyCode::End => f.write_str("End"),
            KeyCode::Delete => f.write_str("Del"),
            KeyCode::Insert => f.write_str("Ins"),
            KeyCode::F(n) => write!(f, "F{n}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// The bindings in force: the defaults with the user's overrides applied.
#[derive(Debug, Clone)]
pub struct Keymap {
    /// (key, chords) in table order.
    pub entries: Vec<(Key, Vec<Chord>)>,
    /// What the user's file changed besides what it named: a key taken from
    /// another action, an action left with no key. Shown when the dashboard
    /// starts.
    pub notes: Vec<String>,
    /// The actions that ask before they act (`confirm` in `keys.toml`):
    /// those a mistaken key press cannot take back.
    pub confirm: Vec<Key>,
}

/// The actions that ask first unless `keys.toml` says otherwise: skipping
/// throws away the running cell's GPU time, excluding a config its cells.
pub const CONFIRMED: &[Key] = &[Key::SkipConfig, Key::SkipCell, Key::Exclude];

/// The actions of the log pane alone: there their keys come first, and a key
/// they share with another action does that one everywhere else.
pub const LOG_ONLY: &[Key] = &[Key::SearchBack];

/// A key name no terminal key goes by.
#[derive(Debug, thiserror::Error)]
#[error("unknown key \"{0}\"")]
pub struct UnknownKey(pub String);

/// A keys file the dashboard cannot use: the file, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {problem}")]
pub struct KeymapError {
    pub file: String,
    #[source]
    pub problem: KeysFileProblem,
}

/// What is wrong with a keys file.
#[derive(Debug, thiserror::Error)]
pub enum KeysFileProblem {
    #[error("{0}")]
    Read(#[from] std::io::Error),
    #[error("{0}")]
    Toml(#[from] toml::de::Error),
    #[error("unknown action \"{0}\" (actions: {actions})", actions = action_names())]
    UnknownAction(String),
    #[error("{0}: keys must be strings")]
    NotStrings(String),
    #[error("{0}: a key or a list of keys")]
    NotKeys(String),
    #[error("confirm: a list of action names, as in confirm = [\"skip_config\", \"exclude\"] ([] for none)")]
    ConfirmList,
    #[error("{action}: {source}")]
    Key {
        action: String,
        #[source]
        source: UnknownKey,
    },
}

/// The names `keys.toml` knows, in table order.
fn action_names() -> String {
    BINDINGS
        .iter()
        .map(|b| b.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Default for Keymap {
    fn default() -> Self {
        Keymap {
            entries: BINDINGS
                .iter()
                .map(|b| {
                    let chords = b
                        .defaults
                        .iter()
                        .filter_map(|k| Chord::parse(k).ok())
                        .collect();
                    (b.key, chords)
                })
                .collect(),
            notes: Vec::new(),
            confirm: CONFIRMED.to_vec(),
        }
    }
}

impl Keymap {
    /// The action a key press asks for in the focused pane: a key that
    /// searches back in the log (`?`) is the help elsewhere.
    pub fn lookup_for(&self, chord: &Chord, log_focused: bool) -> Option<Key> {
        let bound = || {
            self.entries
                .iter()
                .filter(|(_, chords)| chords.contains(chord))
                .map(|(k, _)| *k)
        };
        // A log key comes first in the log and last elsewhere, so a key it
        // shares (`?`) does the other action outside the log.
        let in_log = |k: &Key| LOG_ONLY.contains(k);
        bound()
            .find(|k| in_log(k) == log_focused)
            .or_else(|| bound().next())
    }

    pub fn chords(&self, key: Key) -> &[Chord] {
        self.entries
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, c)| c.as_slice())
            .unwrap_or(&[])
    }

    /// The keys of an action as the help shows them: `p`, `↑ k`.
    pub fn label(&self, key: Key) -> String {
        let chords = self.chords(key);
        if chords.is_empty() {
            return "(unbound)".into();
        }
        chords
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Apply a user's `keys.toml`: each action it names gets exactly the keys it
    /// lists (a string or a list of strings, `[]` to unbind); a key taken by
    /// another action moves to the one named.
    pub fn with_overrides(mut self, text: &str, file: &Path) -> Result<Keymap, KeymapError> {
        let err = |problem: KeysFileProblem| KeymapError {
            file: file.display().to_string(),
            problem,
        };
        let table: toml::Table = toml::from_str(text).map_err(|e| err(e.into()))?;
        for (name, value) in &table {
            if name == "confirm" {
                self.confirm = confirmed(value).map_err(err)?;
                continue;
            }
            let binding = BINDINGS
                .iter()
                .find(|b| b.name == name)
                .ok_or_else(|| err(KeysFileProblem::UnknownAction(name.clone())))?;
            let keys: Vec<String> = match value {
                toml::Value::String(s) => vec![s.clone()],
                toml::Value::Array(a) => a
                    .iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| err(KeysFileProblem::NotStrings(name.clone())))
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(err(KeysFileProblem::NotKeys(name.clone()))),
            };
            let chords: Vec<Chord> = keys
                .iter()
                .map(|k| {
                    Chord::parse(k).map_err(|source| {
                        err(KeysFileProblem::Key {
                            action: name.clone(),
                            source,
                        })
                    })
                })
                .collect::<Result<_, _>>()?;
            for (key, existing) in &mut self.entries {
                if *key == binding.key {
                    *existing = chords.clone();
                    continue;
                }
                let before = existing.len();
                let taken: Vec<String> = existing
                    .iter()
                    .filter(|c| chords.contains(c))
                    .map(|c| c.to_string())
                    .collect();
                existing.retain(|c| !chords.contains(c));
                if !taken.is_empty() {
                    let other = self::binding(*key).name;
                    let mut note = format!("{} now does {name}, not {other}", taken.join(", "));
                    if before > 0 && existing.is_empty() {
                        note.push_str(&format!(" ({other} has no key left)"));
                    }
                    self.notes.push(note);
                }
            }
        }
        Ok(self)
    }

    /// Whether `key` asks before it acts.
    pub fn confirms(&self, key: Key) -> bool {
        self.confirm.contains(&key)
    }

    /// The defaults plus the user's file, if there is one.
    pub fn load(path: Option<&Path>) -> Result<Keymap, KeymapError> {
        let Some(path) = path else {
            return Ok(Keymap::default());
        };
        match std::fs::read_to_string(path) {
            Ok(text) => Keymap::default().with_overrides(&text, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Keymap::default()),
            Err(e) => Err(KeymapError {
                file: path.display().to_string(),
                problem: e.into(),
            }),
        }
    }
}

/// `confirm = ["skip_config", …]`: the actions that ask first (`[]`: none).
fn confirmed(value: &toml::Value) -> Result<Vec<Key>, KeysFileProblem> {
    let names = value.as_array().ok_or(KeysFileProblem::ConfirmList)?;
    names
        .iter()
        .map(|v| {
            let name = v.as_str().ok_or(KeysFileProblem::ConfirmList)?;
            BINDINGS
                .iter()
                .find(|b| b.name == name)
                .map(|b| b.key)
                .ok_or_else(|| KeysFileProblem::UnknownAction(name.to_string()))
        })
        .collect()
}

pub fn binding(key: Key) -> &'static Binding {
    BINDINGS
        .iter()
        .find(|b| b.key == key)
        .unwrap_or(&BINDINGS[0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn press(code: KeyCode, modifiers: KeyModifiers) -> Chord {
        Chord::from_event(&KeyEvent::new(code, modifiers))
    }

    #[test]
    fn defaults_cover_every_action_once() {
        let map = Keymap::default();
        for b in BINDINGS {
            assert!(!map.chords(b.key).is_empty(), "{} unbound", b.name);
            for d in b.defaults {
                let chord = Chord::parse(d).unwrap();
                // `?` is the help, and in the log the backward search.
                let in_log = b.key == Key::SearchBack;
                assert_eq!(map.lookup_for(&chord, in_log), Some(b.key), "{d}");
            }
        }
    }

    #[test]
    fn terminal_keys_match_parsed_names() {
        let map = Keymap::default();
        assert_eq!(
            map.lookup_for(&press(KeyCode::Char('c'), KeyModifiers::CONTROL), false),
            Some(Key::Quit)
        );
        assert_eq!(
            map.lookup_for(&press(KeyCode::Char('G'), KeyModifiers::SHIFT), false),
            Some(Key::Bottom)
        );
        assert_eq!(
            map.lookup_for(&press(KeyCode::Char('?'), KeyModifiers::SHIFT), false),
            Some(Key::Help)
        );
        // In the log `?` searches back, as in less; F1 is the help there too.
        assert_eq!(
            map.lookup_for(&press(KeyCode::Char('?'), KeyModifiers::SHIFT), true),
            Some(Key::SearchBack)
        );
        assert_eq!(
            map.lookup_for(&press(KeyCode::F(1), KeyModifiers::NONE), true),
            Some(Key::Help)
        );
        assert_eq!(
            map.lookup_for(&press(KeyCode::Enter, KeyModifiers::NONE), false),
            Some(Key::Details)
        );
        assert_eq!(
            map.lookup_for(&press(KeyCode::Char('u'), KeyModifiers::NONE), false),
            None
        );
    }

    #[test]
    fn a_user_file_rebinds_and_steals_keys() {
        let text = "pause = \"space\"\nhelp = [\"h\", \"f1\"]\n";
        let map = Keymap::default()
            .with_overrides(text, Path::new("keys.toml"))
            .unwrap();
        assert_eq!(
            map.lookup_for(&Chord::parse("space").unwrap(), false),
            Some(Key::Pause)
        );
        assert_eq!(map.lookup_for(&Chord::parse("p").unwrap(), false), None);
        // `h` moved from left to help; left keeps its arrow.
        assert_eq!(
            map.lookup_for(&Chord::parse("h").unwrap(), false),
            Some(Key::Help)
        );
        assert_eq!(map.label(Key::Left), "←");
        assert_eq!(map.label(Key::Help), "h F1");
        // What it took from another action is said, not done silently.
        assert_eq!(map.notes, ["h now does help, not left"]);
        let map = Keymap::default()
            .with_overrides("pause = \"x\"\n", Path::new("keys.toml"))
            .unwrap();
        assert_eq!(
            map.notes,
            ["x now does pause, not exclude (exclude has no key left)"]
        );
    }

    #[test]
    fn a_bad_file_says_where_and_what() {
        let e = Keymap::default()
            .with_overrides("paws = \"p\"", Path::new("/k.toml"))
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/k.toml: unknown action \"paws\""),
            "{e}"
        );
        let e = Keymap::default()
            .with_overrides("pause = \"hyper-p\"", Path::new("/k.toml"))
            .unwrap_err();
        assert!(e.to_string().contains("unknown key \"hyper-p\""), "{e}");
    }

    /// Skipping and excluding ask first unless `confirm` says otherwise;
    /// a bad `confirm` says what it must be.
    #[test]
    fn confirm_names_the_actions_that_ask_first() {
        let map = Keymap::default();
        assert!(map.confirms(Key::SkipConfig) && map.confirms(Key::SkipCell));
        assert!(map.confirms(Key::Exclude) && !map.confirms(Key::Pause));
        let none = Keymap::default()
            .with_overrides("confirm = []", Path::new("keys.toml"))
            .unwrap();
        assert!(none.confirm.is_empty());
        let one = Keymap::default()
            .with_overrides(
                "confirm = [\"skip_cell\", \"pause\"]\nskip_cell = \"N\"",
                Path::new("keys.toml"),
            )
            .unwrap();
        assert_eq!(one.confirm, [Key::SkipCell, Key::Pause]);
        assert_eq!(one.label(Key::SkipCell), "N");
        for (text, says) in [
            ("confirm = \"skip_cell\"", "confirm: a list of action names"),
            ("confirm = [1]", "confirm: a list of action names"),
            ("confirm = [\"skip\"]", "unknown action \"skip\""),
        ] {
            let e = Keymap::default()
                .with_overrides(text, Path::new("/k.toml"))
                .unwrap_err();
            assert!(
                e.to_string().starts_with(&format!("/k.toml: {says}")),
                "{e}"
            );
        }
    }

    #[test]
    fn the_readme_names_every_action_and_its_default_keys() {
        let readme = include_str!("../../README.md");
        let start = readme
            .find("Action names:")
            .expect("the README lists the action names");
        let list = &readme[start..start + 400];
        for b in BINDINGS {
            assert!(
                list.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|w| w == b.name),
                "{} is not in the README's action names",
                b.name
            );
        }
    }
}
