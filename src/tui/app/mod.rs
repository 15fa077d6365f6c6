//! The dashboard's vocabulary and its one place of change: keys become
//! [`Action`]s, [`App::update`] applies them, and drawing only reads. The
//! changes are split by job: what a key or a click asks for ([`input`]), the
//! keys themselves ([`keys`]), moving the selection and scrolling
//! ([`navigate`]), the grid's filter and sort ([`arrange`]), the typed line
//! ([`search`]), commands to the engine ([`commands`]), folding the engine's
//! events ([`events`]) and asking for disk work and applying its results
//! ([`disk`]).

mod arrange;
mod commands;
mod disk;
mod events;
mod input;
mod keys;
mod log;
mod navigate;
mod search;

use std::path::PathBuf;

use tokio::sync::mpsc;

use super::disk::{Done, Job};
use super::keymap::{Key, Keymap};
use super::layout::{self, Areas};
use super::theme::Theme;
use super::ui::{Flash, Focus, Look, Overlay, Ui};
use crate::engine::Request;
use crate::model::{Event, Level, Timestamp};
use crate::view::grid::{Grid, ValueMode};
use crate::view::state::{Sweep, ViewState};
pub use log::PickedLog;

/// Everything that can change the dashboard.
#[derive(Debug)]
pub enum Action {
    /// A bound key.
    Key(Key),
    /// Yes to the open question (quit).
    Confirm,
    /// Close the popup, cancel the question or the search.
    Cancel,
    SearchInput(char),
    SearchBackspace,
    SearchSubmit,
    /// While a search is active (as in less): `n` the next match the way
    /// the search goes, `N` (`reverse`) the other way; Esc ends the search.
    SearchAgain {
        reverse: bool,
    },
    EndSearch,
    /// Something the engine said.
    Event(Event),
    /// The view fell behind the event stream: re-read the results from disk.
    EventsMissed,
    /// The view fell behind the server log by this many lines.
    LogsMissed(u64),
    /// A left click (`--mouse`) on a pane, at a screen position.
    Click {
        pane: Focus,
        column: u16,
        row: u16,
    },
    /// The mouse wheel over a pane.
    Wheel {
        pane: Focus,
        up: bool,
    },
    /// The clock.
    Tick(Timestamp),
    Resize(u16, u16),
    /// The engine has returned: nothing more will arrive.
    /// A signal asked the dashboard to close (SIGINT, SIGTERM): at once after
    /// the end; before it, once the engine has stopped.
    Close,
    EngineDone,
    /// Disk work asked for earlier has been done.
    Disk(Done),
}

impl Action {
    /// Whether the user did it (a key, a typed character, a resize): the log
    /// pane is brought up to date for it.
    fn by_user(&self) -> bool {
        matches!(
            self,
            Action::Key(_)
                | Action::Confirm
                | Action::Cancel
                | Action::SearchInput(_)
                | Action::SearchBackspace
                | Action::SearchSubmit
                | Action::SearchAgain { .. }
                | Action::EndSearch
                | Action::Resize(..)
        )
    }
}

/// How soon the screen needs drawing after an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Redraw {
    No,
    /// Data that may wait for the next regular frame (log lines, GPU samples, the clock).
    Soon,
    /// Something the user did or must see now.
    Now,
}

/// Live (commands go to the engine) or a recorded run (read-only).
pub enum Mode {
    Live {
        commands: mpsc::Sender<Request>,
    },
    /// Watching a sweep that runs in another process (`sweeptop attach`):
    /// commands go over its control socket, and leaving does not stop it.
    Attached {
        commands: mpsc::Sender<Request>,
    },
    ReadOnly,
}

pub struct App {
    pub view: ViewState,
    pub grid: Grid,
    pub ui: Ui,
    pub keymap: Keymap,
    /// Themes `t` cycles through; `theme` is the one in use.
    pub themes: Vec<Theme>,
    pub theme: usize,
    pub look: Look,
    pub mode: Mode,
    pub run_dir: PathBuf,
    /// The clock: live from ticks, the last event's time for a recorded run.
    pub now: Timestamp,
    pub size: (u16, u16),
    /// The engine asked to quit on the user's word, or a signal's.
    pub quit_sent: bool,
    pub engine_done: bool,
    /// The dashboard should close.
    pub exit: bool,
    /// What to run once it has closed: a retry after the end (`r`, `R`),
    /// as the `--retry` targets of `sweeptop run --resume`.
    pub then_retry: Option<Vec<String>>,
    /// The log of the config the user selected (none: the live tail).
    picked: Option<PickedLog>,
    /// Disk work asked for and not yet handed to the worker.
    jobs: Vec<Job>,
}

/// How long a message stays on the alert line.
const FLASH_MS: i64 = 8000;

impl App {
    pub fn new(
        view: ViewState,
        mode: Mode,
        run_dir: PathBuf,
        keymap: Keymap,
        theme: Theme,
        look: Look,
    ) -> App {
        let mut themes: Vec<Theme> = super::theme::names()
            .into_iter()
            .filter_map(Theme::builtin)
            .collect();
        let theme_index = match themes.iter().position(|t| *t == theme) {
            Some(i) => i,
            None => {
                themes.insert(0, theme);
                0
            }
        };
        let grid = Grid::build(&view);
        let mut app = App {
            view,
            grid,
            ui: Ui::default(),
            keymap,
            themes,
            theme: theme_index,
            look,
            mode,
            run_dir,
            now: Timestamp::default(),
            size: (80, 24),
            quit_sent: false,
            engine_done: false,
            exit: false,
            then_retry: None,
            picked: None,
            jobs: Vec::new(),
        };
        app.now = app.view.latest_at;
        if !app.keymap.notes.is_empty() {
            let notes = app.keymap.notes.join("; ");
            app.flash(Level::Warn, format!("keys.toml: {notes}"));
        }
        app.ui.log_shown = app.view.log.pushed;
        app.follow_running();
        app.pick_log();
        app
    }

    /// The value the grid shows: the chosen one at the chosen statistic.
    pub fn value_mode(&self) -> ValueMode {
        self.ui.value.at_stat(self.ui.stat)
    }

    pub fn theme(&self) -> &Theme {
        &self.themes[self.theme.min(self.themes.len() - 1)]
    }

    pub fn read_only(&self) -> bool {
        matches!(self.mode, Mode::ReadOnly)
    }

    /// Whether this view watches a sweep running in another process.
    pub fn attached(&self) -> bool {
        matches!(self.mode, Mode::Attached { .. })
    }

    /// Whether the sweep can still take commands.
    pub fn sweep_live(&self) -> bool {
        !self.read_only()
            && !self.engine_done
            && !matches!(
                self.view.sweep.sweep,
                Sweep::Finished { .. } | Sweep::Interrupted { .. }
            )
    }

    /// The panes at the app's terminal size; `None` when it is too small.
    pub fn layout(&self) -> Option<Areas> {
        let (w, h) = self.size;
        let area = ratatui::layout::Rect::new(0, 0, w, h);
        layout::areas(area, &self.ui, &self.grid, &self.look)
    }

    /// Log lines that arrived but are not on screen yet.
    pub fn log_hidden(&self) -> usize {
        let log = self.shown_log();
        (log.pushed.saturating_sub(self.ui.log_shown) as usize).min(log.lines.len())
    }

    /// The record of the selected cell, if it has one.
    pub fn selected_record(&self) -> Option<&crate::model::CellRecord> {
        let config = self.grid.configs.get(self.ui.sel_config)?;
        let id = self.grid.cell_id(&config.id, self.ui.sel_col?)?;
        self.view.records.get(id)
    }

    /// Apply an action; says how soon to draw.
    pub fn update(&mut self, action: Action) -> Redraw {
        // Whatever the user does, the log pane is current when it is drawn.
        if action.by_user() {
            self.ui.log_shown = self.shown_log().pushed;
        }
        match action {
            Action::Key(k) => self.key(k),
            Action::Click { pane, column, row } => self.click(pane, column, row),
            Action::Wheel { pane, up } => self.wheel(pane, up),
            Action::Confirm => match self.ui.overlay {
                Overlay::Confirm { key, .. } => self.confirmed(key),
                _ => self.confirm_quit(),
            },
            Action::Cancel => self.cancel(),
            Action::SearchInput(c) => self.type_char(c),
            Action::SearchBackspace => self.backspace(),
            Action::SearchSubmit => self.submit(),
            Action::SearchAgain { reverse } => self.search_again(reverse),
            Action::EndSearch => {
                self.ui.searching = false;
                Redraw::Now
            }
            Action::Event(ev) => self.event(ev),
            Action::EventsMissed => self.events_missed(),
            Action::LogsMissed(n) => self.logs_missed(n),
            Action::Tick(now) => self.tick(now),
            Action::Resize(w, h) => {
                self.size = (w, h);
                self.keep_selection_visible();
                self.clamp_log();
                Redraw::Now
            }
            Action::EngineDone => self.engine_returned(),
            Action::Close => self.close_asked(),
            Action::Disk(done) => self.disk_done(done),
        }
    }

    /// A message that stays on the alert line until something replaces it.
    pub fn notice(&mut self, level: Level, text: String) {
        self.flash(level, text);
        if let Some(f) = &mut self.ui.flash {
            f.until_ms = i64::MAX;
        }
    }

    fn flash(&mut self, level: Level, text: String) {
        self.ui.flash = Some(Flash {
            text,
            level,
            until_ms: self.now.unix_ms().saturating_add(FLASH_MS),
            pause: None,
            search: false,
        });
    }

    /// Open a popup (or, with [`Overlay::None`], close it).
    fn open(&mut self, overlay: Overlay) -> Redraw {
        self.ui.overlay = overlay;
        Redraw::Now
    }
}
