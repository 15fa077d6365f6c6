//! The dashboard's vocabulary and its one place of change: keys become
//! [`Action`]s, [`App::update`] applies them (folding events into the view state,
//! moving the selection, sending commands to the engine), and drawing only reads.

use std::path::{Path, PathBuf};

use crossterm::event::{KeyCode, KeyEvent, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Position;
use tokio::sync::mpsc;

use super::draw;
use super::keymap::{Chord, Key, Keymap};
use super::theme::Theme;
use crate::engine::Request;
use crate::model::{Command, Event, Level, Status, Timestamp};
use crate::store;
use crate::view::grid::{Arrange, Grid, Row, ValueMode};
use crate::view::state::{LineKind, LogLine, LogTail, Shown, Sweep, ViewState};

/// Everything that can change the dashboard.
#[derive(Debug, Clone)]
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
    /// While a search is active (as in less): `n` the next match back
    /// (`true`), `N` the next one forward; Esc ends the search.
    SearchAgain(bool),
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
    EngineDone,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    Grid,
    Log,
    /// The GPU panel: nothing to move in it, but `z` zooms it to a chart
    /// per GPU.
    Gpu,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Overlay {
    None,
    Help {
        scroll: u16,
    },
    Details {
        scroll: u16,
    },
    ConfirmQuit,
    Search(String),
    /// Typing the grid's name filter (`/` in the grid): it applies as typed.
    Filter(String),
    /// The selected workload charted across the phase's configs.
    Chart,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flash {
    pub text: String,
    pub level: Level,
    pub until_ms: i64,
}

/// Where the user is looking: selection, scroll positions, popups.
#[derive(Debug, Clone)]
pub struct Ui {
    pub focus: Focus,
    /// Selected config (index into `Grid::configs`).
    pub sel_config: usize,
    /// Selected column; `None` selects the whole config (its row label).
    pub sel_col: Option<usize>,
    /// The selection follows the running cell until the user moves it.
    pub track_running: bool,
    /// First display row and first column shown.
    pub grid_top: usize,
    pub grid_left: usize,
    /// Log lines scrolled back from the newest; 0 with `follow` keeps up.
    pub log_back: usize,
    pub follow: bool,
    /// Log lines pushed when the log pane was last brought up to date: new
    /// lines show with the next tick (once a second) or the next key, so a
    /// chatty server does not repaint the pane for every line.
    pub log_shown: u64,
    /// Log lines or GPU samples arrived since the last tick.
    pub data_stale: bool,
    pub last_search: Option<String>,
    /// A search was made and not ended (Esc): `n`/`N`/Enter move between
    /// its matches instead of doing what they do otherwise.
    pub searching: bool,
    pub overlay: Overlay,
    pub value: ValueMode,
    /// The statistic latency values are read at (`%`): p50, p90, p99.
    pub stat: &'static str,
    /// Which configs the grid shows, in what order.
    pub arrange: Arrange,
    /// The focused pane fills the screen.
    pub zoom: bool,
    /// Long log lines wrap (else they are cut at the pane's edge).
    pub wrap: bool,
    pub flash: Option<Flash>,
    /// Advances every tick: the running cell's spinner.
    pub spinner: usize,
}

impl Default for Ui {
    fn default() -> Self {
        Ui {
            focus: Focus::Grid,
            sel_config: 0,
            sel_col: Some(0),
            track_running: true,
            grid_top: 0,
            grid_left: 0,
            log_back: 0,
            follow: true,
            log_shown: 0,
            data_stale: false,
            last_search: None,
            searching: false,
            overlay: Overlay::None,
            value: ValueMode::default(),
            stat: STATS[0],
            arrange: Arrange::default(),
            zoom: false,
            wrap: true,
            flash: None,
            spinner: 0,
        }
    }
}

/// How the dashboard looks, fixed at start.
#[derive(Debug, Clone)]
pub struct Look {
    /// Block and braille characters replaced by ASCII.
    pub ascii: bool,
    /// The GPU panel is shown (not with `--no-gpu`).
    pub show_gpu: bool,
    /// Clicks and the wheel are read (`--mouse`).
    pub mouse: bool,
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
    /// The engine asked to quit on the user's word.
    pub quit_sent: bool,
    pub engine_done: bool,
    /// The dashboard should close.
    pub exit: bool,
    /// The config whose log file a read-only view shows.
    log_file_config: Option<String>,
}

/// The statistics `%` cycles latency values through.
pub const STATS: [&str; 3] = ["p50", "p90", "p99"];

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
            log_file_config: None,
        };
        app.now = app.view.latest_at;
        if !app.keymap.notes.is_empty() {
            let notes = app.keymap.notes.join("; ");
            app.flash(Level::Warn, format!("keys.toml: {notes}"));
        }
        app.ui.log_shown = app.view.log.pushed;
        app.follow_running();
        if app.read_only() {
            app.load_log_file();
        }
        app
    }

    /// The value the grid shows: the chosen one at the chosen statistic.
    pub fn value_mode(&self) -> ValueMode {
        self.ui.value.at_stat(self.ui.stat)
    }

    /// Re-apply the grid's filter and sort (after results or the choice
    /// changed); the selection moves to a shown config if its own is hidden.
    pub fn rearrange(&mut self) {
        let mode = self.value_mode();
        self.grid.arrange(&self.view, &self.ui.arrange, mode);
        if !self.grid.shown_configs().any(|c| c == self.ui.sel_config) {
            if let Some(first) = self.grid.shown_configs().next() {
                self.ui.sel_config = first;
            }
        }
        self.ui.grid_top = 0;
        self.keep_selection_visible();
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

    /// The source this view's commands are recorded with: `key` for the
    /// sweep's own dashboard, `viewer PID` for an attached one.
    pub fn own_source(&self) -> String {
        if self.attached() {
            format!("viewer {}", std::process::id())
        } else {
            "key".into()
        }
    }

    /// Who a command's source is, from this view: `you`, `another viewer`…
    pub fn who(&self, source: &str) -> String {
        if source == self.own_source() {
            "you".into()
        } else if source == "key" {
            "the sweep's own dashboard".into()
        } else if source.starts_with("viewer ") {
            "another viewer".into()
        } else if matches!(source, "script" | "attach") {
            "a script (attach --send)".into()
        } else {
            source.to_string()
        }
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

    /// The action a key press asks for, given what is on screen.
    pub fn on_key(&self, ev: &KeyEvent) -> Option<Action> {
        let chord = Chord::from_event(ev);
        let bound = self.keymap.lookup(&chord);
        match &self.ui.overlay {
            Overlay::ConfirmQuit => match ev.code {
                KeyCode::Char('y' | 'Y') | KeyCode::Enter => Some(Action::Confirm),
                _ if self.attached() && bound == Some(Key::Detach) => {
                    Some(Action::Key(Key::Detach))
                }
                KeyCode::Char('n' | 'N') | KeyCode::Esc => Some(Action::Cancel),
                _ if bound == Some(Key::Quit) => Some(Action::Confirm),
                _ => None,
            },
            Overlay::Search(_) | Overlay::Filter(_) => match ev.code {
                _ if chord.ctrl && bound == Some(Key::Quit) => Some(Action::Key(Key::Quit)),
                KeyCode::Esc => Some(Action::Cancel),
                KeyCode::Enter => Some(Action::SearchSubmit),
                KeyCode::Backspace => Some(Action::SearchBackspace),
                KeyCode::Char(c) if !chord.ctrl && !chord.alt => Some(Action::SearchInput(c)),
                _ => None,
            },
            Overlay::Chart => match bound {
                Some(Key::Quit) if chord.ctrl => Some(Action::Key(Key::Quit)),
                // The value and the statistic change the chart in place.
                Some(k @ (Key::Value | Key::Percentile | Key::Theme)) => Some(Action::Key(k)),
                _ => Some(Action::Cancel),
            },
            Overlay::Help { .. } | Overlay::Details { .. } => match bound {
                Some(
                    k
                    @ (Key::Up | Key::Down | Key::PageUp | Key::PageDown | Key::Top | Key::Bottom),
                ) => Some(Action::Key(k)),
                Some(Key::Quit) if chord.ctrl => Some(Action::Key(Key::Quit)),
                Some(Key::Theme) => Some(Action::Key(Key::Theme)),
                _ => Some(Action::Cancel),
            },
            Overlay::None if self.ui.searching && !chord.ctrl && !chord.alt => match ev.code {
                KeyCode::Char('n') | KeyCode::Enter => Some(Action::SearchAgain(true)),
                KeyCode::Char('N') => Some(Action::SearchAgain(false)),
                KeyCode::Esc => Some(Action::EndSearch),
                _ => bound.map(Action::Key),
            },
            Overlay::None => bound.map(Action::Key),
        }
    }

    /// The action a mouse event asks for (`--mouse`): a click focuses the
    /// pane under it and, in the grid, selects the cell (or the row label);
    /// the wheel scrolls what is under it.
    pub fn on_mouse(&self, ev: &MouseEvent) -> Option<Action> {
        if !matches!(self.ui.overlay, Overlay::None) {
            return match ev.kind {
                MouseEventKind::ScrollUp => Some(Action::Key(Key::Up)),
                MouseEventKind::ScrollDown => Some(Action::Key(Key::Down)),
                MouseEventKind::Down(_) => Some(Action::Cancel),
                _ => None,
            };
        }
        let areas = draw::layout(self)?;
        let at = Position::new(ev.column, ev.row);
        let pane = if areas.grid.contains(at) {
            Focus::Grid
        } else if areas.log.contains(at) {
            Focus::Log
        } else if areas.gpu.is_some_and(|g| g.contains(at)) {
            Focus::Gpu
        } else {
            return None;
        };
        match ev.kind {
            MouseEventKind::Down(MouseButton::Left) => Some(Action::Click {
                pane,
                column: ev.column,
                row: ev.row,
            }),
            MouseEventKind::ScrollUp => Some(Action::Wheel { pane, up: true }),
            MouseEventKind::ScrollDown => Some(Action::Wheel { pane, up: false }),
            _ => None,
        }
    }

    /// The grid cell at a screen position: the config and the column
    /// (`None`: its row label).
    fn grid_cell_at(&self, column: u16, row: u16) -> Option<(usize, Option<usize>)> {
        let areas = draw::layout(self)?;
        let geo = draw::grid::geometry(areas.grid, self);
        // Inside the border, below the two heading rows.
        let y = usize::from(row.checked_sub(areas.grid.y + 1 + 2)?);
        let x = usize::from(column.checked_sub(areas.grid.x + 1)?);
        let config = match self.grid.shown.get(self.ui.grid_top + y)? {
            Row::Config(c) => *c,
            Row::Phase(_) => return None,
        };
        let col = if x < geo.label_w {
            None
        } else {
            let c = self.ui.grid_left + (x - geo.label_w) / (geo.col_w + 1);
            if c >= self.grid.columns.len() {
                return None;
            }
            Some(c)
        };
        Some((config, col))
    }

    /// Log lines that arrived but are not on screen yet.
    pub fn log_hidden(&self) -> usize {
        (self.view.log.pushed.saturating_sub(self.ui.log_shown) as usize)
            .min(self.view.log.lines.len())
    }

    /// Apply an action; says how soon to draw.
    pub fn update(&mut self, action: Action) -> Redraw {
        // Whatever the user does, the log pane is current when it is drawn.
        if matches!(
            action,
            Action::Key(_)
                | Action::Confirm
                | Action::Cancel
                | Action::SearchInput(_)
                | Action::SearchBackspace
                | Action::SearchSubmit
                | Action::SearchAgain(_)
                | Action::EndSearch
                | Action::Resize(..)
        ) {
            self.ui.log_shown = self.view.log.pushed;
        }
        match action {
            Action::Key(k) => self.key(k),
            Action::Click { pane, column, row } => {
                self.ui.focus = pane;
                if pane == Focus::Grid {
                    if let Some((config, col)) = self.grid_cell_at(column, row) {
                        self.ui.track_running = false;
                        self.ui.sel_config = config;
                        self.ui.sel_col = col;
                        self.selection_moved();
                    }
                }
                Redraw::Now
            }
            Action::Wheel { pane, up } => {
                let focus = std::mem::replace(&mut self.ui.focus, pane);
                for _ in 0..3 {
                    self.step(if up { Key::Up } else { Key::Down });
                }
                self.ui.focus = focus;
                Redraw::Now
            }
            Action::Confirm => {
                self.ui.overlay = Overlay::None;
                if self.sweep_live() {
                    self.send(Command::Quit);
                    self.quit_sent = true;
                    self.flash(
                        Level::Info,
                        "stopping: the server group is being stopped; resume later with `sweeptop run --resume`".into(),
                    );
                } else {
                    self.exit = true;
                }
                Redraw::Now
            }
            Action::Cancel => {
                // Esc while typing a filter drops it.
                if matches!(self.ui.overlay, Overlay::Filter(_)) {
                    self.ui.arrange.name.clear();
                    self.rearrange();
                }
                self.ui.overlay = Overlay::None;
                Redraw::Now
            }
            Action::SearchInput(c) => {
                match &mut self.ui.overlay {
                    Overlay::Search(q) => q.push(c),
                    Overlay::Filter(q) => {
                        q.push(c);
                        self.ui.arrange.name = q.clone();
                        self.rearrange();
                    }
                    _ => {}
                }
                Redraw::Now
            }
            Action::SearchBackspace => {
                match &mut self.ui.overlay {
                    Overlay::Search(q) => {
                        q.pop();
                    }
                    Overlay::Filter(q) => {
                        q.pop();
                        self.ui.arrange.name = q.clone();
                        self.rearrange();
                    }
                    _ => {}
                }
                Redraw::Now
            }
            Action::SearchSubmit if matches!(self.ui.overlay, Overlay::Filter(_)) => {
                self.ui.overlay = Overlay::None;
                if !self.ui.arrange.name.is_empty() {
                    let n = self.grid.shown_configs().count();
                    self.flash(
                        Level::Info,
                        format!(
                            "{n} configs match \"{}\" (/ then Esc shows all)",
                            self.ui.arrange.name
                        ),
                    );
                }
                Redraw::Now
            }
            Action::SearchSubmit => {
                let q = match std::mem::replace(&mut self.ui.overlay, Overlay::None) {
                    Overlay::Search(q) if !q.is_empty() => q,
                    _ => self.ui.last_search.clone().unwrap_or_default(),
                };
                if !q.is_empty() {
                    self.ui.searching = true;
                    self.search(&q, true);
                }
                Redraw::Now
            }
            Action::SearchAgain(older) => {
                if let Some(q) = self.ui.last_search.clone() {
                    self.search(&q, older);
                }
                Redraw::Now
            }
            Action::EndSearch => {
                self.ui.searching = false;
                Redraw::Now
            }
            Action::Event(ev) => self.event(ev),
            Action::EventsMissed => {
                self.reload_results();
                self.flash(
                    Level::Warn,
                    "the view fell behind; results re-read from the run directory".into(),
                );
                Redraw::Now
            }
            Action::LogsMissed(n) => {
                self.view.log.missed += n;
                let config = self.view.config().map(|c| c.id.clone()).unwrap_or_default();
                self.push_log(LogLine {
                    text: format!("({n} log lines not shown here; logs/{config}.log has them all)"),
                    config,
                    kind: LineKind::Note,
                });
                self.ui.data_stale = true;
                Redraw::No
            }
            Action::Tick(now) => {
                self.now = now;
                self.ui.spinner = self.ui.spinner.wrapping_add(1);
                let mut redraw = Redraw::No;
                if self.ui.data_stale || self.log_hidden() > 0 {
                    self.ui.data_stale = false;
                    self.ui.log_shown = self.view.log.pushed;
                    redraw = Redraw::Soon;
                }
                if self
                    .ui
                    .flash
                    .as_ref()
                    .is_some_and(|f| f.until_ms <= now.unix_ms())
                {
                    self.ui.flash = None;
                    redraw = Redraw::Soon;
                }
                if matches!(
                    self.view.shown(),
                    Shown::Running | Shown::Paused | Shown::Stopping | Shown::Starting
                ) && !self.read_only()
                {
                    redraw = Redraw::Soon;
                }
                redraw
            }
            Action::Resize(w, h) => {
                self.size = (w, h);
                self.keep_selection_visible();
                self.clamp_log();
                Redraw::Now
            }
            Action::EngineDone => {
                self.engine_done = true;
                if self.quit_sent || matches!(self.view.sweep.sweep, Sweep::Interrupted { .. }) {
                    self.exit = true;
                } else if matches!(self.view.sweep.sweep, Sweep::Finished { .. }) {
                    self.flash(
                        Level::Info,
                        format!(
                            "sweep finished; {} leaves (results are in {})",
                            self.keymap
                                .chords(Key::Quit)
                                .first()
                                .map(|c| c.to_string())
                                .unwrap_or_else(|| "quit".into()),
                            self.run_dir.display()
                        ),
                    );
                    // This one stays until the user leaves.
                    if let Some(f) = &mut self.ui.flash {
                        f.until_ms = i64::MAX;
                    }
                } else {
                    self.exit = true;
                }
                Redraw::Now
            }
        }
    }

    fn event(&mut self, ev: Event) -> Redraw {
        let redraw = match &ev {
            // Data that shows with the next tick.
            Event::Log { .. } => {
                if !self.ui.follow || self.ui.log_back > 0 {
                    self.ui.log_back += 1;
                }
                self.ui.data_stale = true;
                Redraw::No
            }
            Event::Gpu { .. } => {
                self.ui.data_stale = true;
                Redraw::No
            }
            _ => Redraw::Now,
        };
        let ev_kind = if matches!(ev, Event::CellFinished { .. }) {
            EvKind::Finished
        } else {
            EvKind::Other
        };
        let rebuild = matches!(ev, Event::CellFinished { .. }) && self.view.plan.is_none();
        let started = matches!(ev, Event::CellStarted { .. });
        let pushed_before = self.view.log.pushed;
        self.view.apply(&ev);
        // Notes the fold added are lines too: keep a scrolled-back view still.
        let added = self.view.log.pushed - pushed_before;
        if !matches!(ev, Event::Log { .. }) && added > 0 && self.ui.log_back > 0 {
            self.ui.log_back += added as usize;
        }
        self.clamp_log();
        if rebuild {
            self.grid = Grid::build(&self.view);
        }
        if rebuild || (!self.ui.arrange.is_plain() && matches!(ev_kind, EvKind::Finished)) {
            self.rearrange();
        }
        if started {
            self.follow_running();
        }
        redraw
    }

    fn key(&mut self, k: Key) -> Redraw {
        // Popups scroll with the movement keys.
        if let Overlay::Help { scroll } | Overlay::Details { scroll } = &mut self.ui.overlay {
            match k {
                Key::Up => *scroll = scroll.saturating_sub(1),
                Key::Down => *scroll = scroll.saturating_add(1),
                Key::PageUp => *scroll = scroll.saturating_sub(10),
                Key::PageDown => *scroll = scroll.saturating_add(10),
                Key::Top => *scroll = 0,
                Key::Bottom => *scroll = u16::MAX / 2,
                _ => {}
            }
            if matches!(
                k,
                Key::Up | Key::Down | Key::PageUp | Key::PageDown | Key::Top | Key::Bottom
            ) {
                return Redraw::Now;
            }
        }
        match k {
            Key::Pause => {
                let words = if self.view.sweep.paused {
                    "resuming the sweep"
                } else {
                    "pausing after the running cell (p again resumes)"
                };
                self.command(Command::TogglePause, words)
            }
            Key::SkipConfig | Key::SkipCell => {
                let config = self.skip_target();
                let (what, command) = if k == Key::SkipConfig {
                    (
                        "the rest of",
                        Command::SkipConfig {
                            config: config.clone(),
                        },
                    )
                } else {
                    (
                        "the running cell of",
                        Command::SkipCell {
                            config: config.clone(),
                        },
                    )
                };
                let whose = config.unwrap_or_else(|| "the config".into());
                self.command(command, &format!("skipping {what} {whose}"))
            }
            Key::Retry => self.retry(),
            Key::Exclude => {
                match self.grid.configs.get(self.ui.sel_config) {
                    // `x` again undoes it (cells already skipped stay skipped: `r` runs them).
                    Some(c) if self.view.excluded.contains(&c.id) => {
                        let config = c.id.clone();
                        self.command(
                            Command::Include {
                                config: config.clone(),
                            },
                            &format!("{config} back in the sweep"),
                        )
                    }
                    Some(c) => {
                        let config = c.id.clone();
                        self.command(
                        Command::Exclude {
                            config: config.clone(),
                        },
                        &format!("{config} excluded from the rest of the sweep (x again puts it back)"),
                    )
                    }
                    None => Redraw::No,
                }
            }
            Key::Export => {
                self.export();
                Redraw::Now
            }
            Key::Quit => {
                if self.sweep_live() {
                    self.ui.overlay = Overlay::ConfirmQuit;
                } else {
                    self.exit = true;
                }
                Redraw::Now
            }
            Key::Up | Key::Down | Key::Left | Key::Right | Key::PageUp | Key::PageDown => {
                self.step(k);
                Redraw::Now
            }
            Key::Top | Key::Bottom => {
                match self.ui.focus {
                    Focus::Grid => {
                        self.ui.track_running = false;
                        let shown = self.grid.shown_configs();
                        let pick = if k == Key::Top {
                            shown.into_iter().next()
                        } else {
                            shown.into_iter().last()
                        };
                        if let Some(c) = pick {
                            self.ui.sel_config = c;
                        }
                        self.selection_moved();
                    }
                    Focus::Log => {
                        if k == Key::Top {
                            self.ui.log_back = usize::MAX;
                            self.ui.follow = false;
                        } else {
                            self.ui.log_back = 0;
                            self.ui.follow = true;
                        }
                        self.clamp_log();
                    }
                    Focus::Gpu => {}
                }
                Redraw::Now
            }
            // The details are of the selected cell: from the grid only.
            Key::Details if self.ui.focus != Focus::Grid => Redraw::No,
            Key::Details => {
                self.ui.overlay = Overlay::Details { scroll: 0 };
                Redraw::Now
            }
            Key::Focus => {
                self.ui.focus = match self.ui.focus {
                    Focus::Grid => Focus::Log,
                    Focus::Log if self.look.show_gpu => Focus::Gpu,
                    Focus::Log | Focus::Gpu => Focus::Grid,
                };
                Redraw::Now
            }
            Key::Follow => {
                self.ui.follow = !self.ui.follow || self.ui.log_back > 0;
                if self.ui.follow {
                    self.ui.log_back = 0;
                }
                Redraw::Now
            }
            Key::Search => {
                self.ui.overlay = match self.ui.focus {
                    Focus::Grid => Overlay::Filter(self.ui.arrange.name.clone()),
                    Focus::Log | Focus::Gpu => Overlay::Search(String::new()),
                };
                Redraw::Now
            }
            Key::Failures => {
                self.ui.arrange.failures_only = !self.ui.arrange.failures_only;
                self.rearrange();
                let words = if self.ui.arrange.failures_only {
                    format!(
                        "{} configs with a failed cell (F again shows all)",
                        self.grid.shown_configs().count()
                    )
                } else {
                    "every config shown".to_string()
                };
                self.flash(Level::Info, words);
                Redraw::Now
            }
            Key::NextPhase | Key::PrevPhase => {
                let phases: Vec<String> = self
                    .grid
                    .rows
                    .iter()
                    .filter_map(|r| match r {
                        Row::Phase(p) => Some(p.clone()),
                        Row::Config(_) => None,
                    })
                    .collect();
                // Positions: 0 = every phase, then each phase.
                let at = self
                    .ui
                    .arrange
                    .phase
                    .as_ref()
                    .and_then(|p| phases.iter().position(|x| x == p))
                    .map_or(0, |i| i + 1);
                let n = phases.len() + 1;
                let next = if k == Key::NextPhase {
                    (at + 1) % n
                } else {
                    (at + n - 1) % n
                };
                self.ui.arrange.phase = next.checked_sub(1).map(|i| phases[i].clone());
                self.rearrange();
                let words = match &self.ui.arrange.phase {
                    Some(p) => format!("phase {p} only ([ ] other phases)"),
                    None => "every phase shown".to_string(),
                };
                self.flash(Level::Info, words);
                Redraw::Now
            }
            Key::Sort => {
                let col = self.ui.sel_col.unwrap_or(0);
                self.ui.arrange.sort_by = match self.ui.arrange.sort_by {
                    Some(c) if c == col => None,
                    _ if self.grid.columns.is_empty() => None,
                    _ => Some(col),
                };
                self.rearrange();
                let words = match self
                    .ui
                    .arrange
                    .sort_by
                    .and_then(|c| self.grid.columns.get(c))
                {
                    Some(c) => format!(
                        "sorted by {} {} ({}), best first; o again: plan order",
                        c.workload,
                        c.label(),
                        self.value_mode().title()
                    ),
                    None => "plan order".to_string(),
                };
                self.flash(Level::Info, words);
                Redraw::Now
            }
            Key::Percentile => {
                let at = STATS.iter().position(|s| *s == self.ui.stat).unwrap_or(0);
                self.ui.stat = STATS[(at + 1) % STATS.len()];
                if !self.ui.arrange.is_plain() {
                    self.rearrange();
                }
                let shown = self.value_mode();
                let words = if shown == self.ui.value && self.ui.stat != STATS[0] {
                    format!(
                        "latency values at {} ({} has no {}; v picks another value)",
                        self.ui.stat,
                        shown.title(),
                        self.ui.stat
                    )
                } else {
                    format!("latency values at {}", self.ui.stat)
                };
                self.flash(Level::Info, words);
                Redraw::Now
            }
            Key::Zoom => {
                self.ui.zoom = !self.ui.zoom;
                self.keep_selection_visible();
                self.clamp_log();
                Redraw::Now
            }
            Key::Wrap => {
                self.ui.wrap = !self.ui.wrap;
                let words = if self.ui.wrap {
                    "long log lines wrap"
                } else {
                    "long log lines are cut at the edge (w wraps them)"
                };
                self.flash(Level::Info, words.into());
                Redraw::Now
            }
            Key::Help => {
                self.ui.overlay = Overlay::Help { scroll: 0 };
                Redraw::Now
            }
            Key::Theme => {
                self.theme = (self.theme + 1) % self.themes.len();
                let name = self.theme().name.clone();
                self.flash(Level::Info, format!("theme {name}"));
                Redraw::Now
            }
            Key::Value => {
                self.ui.value = self.ui.value.next();
                if self.ui.arrange.sort_by.is_some() {
                    self.rearrange();
                }
                Redraw::Now
            }
            Key::Chart => {
                self.ui.overlay = Overlay::Chart;
                Redraw::Now
            }
            Key::Close => {
                self.ui.overlay = Overlay::None;
                Redraw::Now
            }
            Key::Detach => {
                if self.attached() {
                    self.ui.overlay = Overlay::None;
                    self.exit = true;
                } else {
                    self.flash(
                        Level::Info,
                        "detach applies to `sweeptop attach`; this view runs the sweep".into(),
                    );
                }
                Redraw::Now
            }
        }
    }

    fn command(&mut self, command: Command, done: &str) -> Redraw {
        // A run that takes no commands says which command line does it.
        let dir = self.run_dir.display();
        let instead = match &command {
            Command::Retry { target } => {
                format!("run it again with `sweeptop run --resume {dir} --retry {target}`")
            }
            _ => format!("continue it with `sweeptop run --resume {dir}`"),
        };
        if self.read_only() {
            self.flash(Level::Warn, format!("read-only: {instead}"));
        } else if !self.sweep_live() {
            self.flash(Level::Warn, format!("the sweep has ended: {instead}"));
        } else if self.send(command) {
            self.flash(Level::Info, done.to_string());
        }
        Redraw::Now
    }

    /// Send a command to the engine; says whether it went.
    fn send(&mut self, command: Command) -> bool {
        let (Mode::Live { commands } | Mode::Attached { commands }) = &self.mode else {
            return false;
        };
        let sent = commands
            .try_send(Request {
                command,
                source: self.own_source(),
            })
            .is_ok();
        if !sent {
            self.flash(
                Level::Error,
                "the engine is not taking commands right now".into(),
            );
        }
        sent
    }

    fn retry(&mut self) -> Redraw {
        let Some(config) = self.grid.configs.get(self.ui.sel_config).cloned() else {
            return Redraw::No;
        };
        let Some(col) = self.ui.sel_col else {
            return self.command(
                Command::Retry {
                    target: config.id.clone(),
                },
                &format!("{} queued to run again at the end", config.id),
            );
        };
        let cell = self.grid.cell_id(&config.id, col).map(str::to_string);
        let retryable = cell
            .as_ref()
            .and_then(|c| self.view.records.get(c))
            .is_some_and(|r| matches!(r.status, Status::Failed | Status::Skipped));
        match cell {
            Some(cell) if retryable => self.command(
                Command::Retry {
                    target: cell.clone(),
                },
                &format!("{cell} queued to run again at the end"),
            ),
            _ => {
                self.flash(
                    Level::Warn,
                    "only a failed or skipped cell can be retried (select the row label to retry a config)".into(),
                );
                Redraw::Now
            }
        }
    }

    /// `e`: the grid as CSV and Markdown, from the recorded results, into the run directory.
    fn export(&mut self) {
        let results = match store::read_results(&self.run_dir) {
            Ok(r) => r,
            Err(e) => {
                self.flash(Level::Error, format!("export failed: {e}"));
                return;
            }
        };
        let plan = self.view.plan.clone();
        let servers = store::read_servers(&self.run_dir);
        let mut written = Vec::new();
        for (format, name) in [
            (crate::export::Format::Csv, EXPORT_CSV),
            (crate::export::Format::Md, EXPORT_MD),
        ] {
            let path = self.run_dir.join(name);
            let text = crate::export::render(format, plan.clone(), &results.records, &servers);
            if let Err(e) = std::fs::write(&path, text) {
                self.flash(
                    Level::Error,
                    format!("export failed: {}: {e}", path.display()),
                );
                return;
            }
            written.push(path.display().to_string());
        }
        self.flash(
            Level::Info,
            format!(
                "exported {} cells → {}",
                results.records.len(),
                written.join(", ")
            ),
        );
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
        });
    }

    fn reload_results(&mut self) {
        if let Ok(results) = store::read_results(&self.run_dir) {
            for r in results.records {
                self.view.record(r);
            }
        }
        if self.view.plan.is_none() {
            self.grid = Grid::build(&self.view);
        }
    }

    fn step(&mut self, k: Key) {
        match self.ui.focus {
            Focus::Grid => {
                self.ui.track_running = false;
                let order: Vec<usize> = self.grid.shown_configs().collect();
                let n = order.len();
                let cols = self.grid.columns.len();
                let page = self.grid_page().max(1);
                let s = &mut self.ui;
                // Move through the shown configs, in the order shown.
                let at = order.iter().position(|&c| c == s.sel_config).unwrap_or(0);
                let to = match k {
                    Key::Up => at.saturating_sub(1),
                    Key::Down => (at + 1).min(n.saturating_sub(1)),
                    Key::PageUp => at.saturating_sub(page),
                    Key::PageDown => (at + page).min(n.saturating_sub(1)),
                    _ => at,
                };
                if let Some(&c) = order.get(to) {
                    s.sel_config = c;
                }
                match k {
                    Key::Left => {
                        s.sel_col = match s.sel_col {
                            Some(0) | None => None,
                            Some(c) => Some(c - 1),
                        }
                    }
                    Key::Right => {
                        s.sel_col = match s.sel_col {
                            None if cols > 0 => Some(0),
                            None => None,
                            Some(c) => Some((c + 1).min(cols.saturating_sub(1))),
                        }
                    }
                    _ => {}
                }
                self.selection_moved();
            }
            Focus::Log => {
                let page = self.log_page().max(1);
                match k {
                    Key::Up => self.ui.log_back += 1,
                    Key::Down => self.ui.log_back = self.ui.log_back.saturating_sub(1),
                    Key::PageUp => self.ui.log_back += page,
                    Key::PageDown => self.ui.log_back = self.ui.log_back.saturating_sub(page),
                    _ => {}
                }
                self.ui.follow = self.ui.log_back == 0;
                self.clamp_log();
            }
            Focus::Gpu => {}
        }
    }

    fn selection_moved(&mut self) {
        self.keep_selection_visible();
        if self.read_only() {
            self.load_log_file();
        }
    }

    /// What a skip key acts on: the selected config when it runs now (with
    /// configs side by side, the one the user looks at); else the engine's
    /// choice (the config running, or the next).
    fn skip_target(&self) -> Option<String> {
        let selected = self.grid.configs.get(self.ui.sel_config)?;
        self.view
            .live_configs()
            .any(|c| c.id == selected.id)
            .then(|| selected.id.clone())
    }

    /// Put the selection on the running cell (until the user moves it): the
    /// selected config's, else the one started last.
    fn follow_running(&mut self) {
        if !self.ui.track_running {
            return;
        }
        let selected = self
            .grid
            .configs
            .get(self.ui.sel_config)
            .map(|c| c.id.as_str());
        let Some(r) = selected
            .and_then(|c| self.view.running_of(c))
            .or_else(|| self.view.running.iter().max_by_key(|r| r.since))
        else {
            return;
        };
        let Some(config) = self.grid.config_index(&r.config) else {
            return;
        };
        // A config the filter hides is not followed into.
        if !self.grid.shown_configs().any(|c| c == config) {
            return;
        }
        let col = (0..self.grid.columns.len())
            .find(|&c| self.grid.cell_id(&r.config, c) == Some(r.cell.as_str()));
        self.ui.sel_config = config;
        if col.is_some() {
            self.ui.sel_col = col;
        }
        self.keep_selection_visible();
    }

    fn grid_page(&self) -> usize {
        draw::layout(self)
            .map(|a| draw::grid::geometry(a.grid, self).rows)
            .unwrap_or(1)
    }

    fn log_page(&self) -> usize {
        draw::layout(self)
            .map(|a| a.log.height.saturating_sub(2) as usize)
            .unwrap_or(1)
    }

    /// Scroll the grid so the selected cell is on screen.
    pub fn keep_selection_visible(&mut self) {
        let Some(areas) = draw::layout(self) else {
            return;
        };
        let geo = draw::grid::geometry(areas.grid, self);
        let row = self.grid.display_row(self.ui.sel_config);
        // Show the phase heading above the first config of a phase when it fits.
        let want_top = if row > 0 && matches!(self.grid.shown.get(row - 1), Some(Row::Phase(_))) {
            row - 1
        } else {
            row
        };
        if want_top < self.ui.grid_top {
            self.ui.grid_top = want_top;
        } else if row >= self.ui.grid_top + geo.rows.max(1) {
            self.ui.grid_top = row + 1 - geo.rows.max(1);
        }
        let max_top = self.grid.shown.len().saturating_sub(geo.rows.max(1));
        self.ui.grid_top = self.ui.grid_top.min(max_top);
        if let Some(col) = self.ui.sel_col {
            if col < self.ui.grid_left {
                self.ui.grid_left = col;
            } else if col >= self.ui.grid_left + geo.cols.max(1) {
                self.ui.grid_left = col + 1 - geo.cols.max(1);
            }
        } else {
            self.ui.grid_left = 0;
        }
    }

    fn clamp_log(&mut self) {
        let page = self.log_page();
        let max_back = self.view.log.lines.len().saturating_sub(page);
        self.ui.log_back = self.ui.log_back.min(max_back);
    }

    fn push_log(&mut self, line: LogLine) {
        self.view.log.push(line);
        if self.ui.log_back > 0 {
            self.ui.log_back += 1;
        }
        self.clamp_log();
    }

    /// Jump to the next match above the bottom line of the log view
    /// (`older`), or below it.
    fn search(&mut self, q: &str, older: bool) {
        self.ui.last_search = Some(q.to_string());
        self.ui.focus = Focus::Log;
        let lines = &self.view.log.lines;
        let n = lines.len();
        // The line shown at the bottom now; a repeated search goes past it.
        let bottom = n.saturating_sub(self.ui.log_back);
        let repeat = self.ui.log_back > 0;
        let needle = q.to_lowercase();
        let matches = |i: &usize| lines[*i].text.to_lowercase().contains(&needle);
        let hit = if older {
            let from = if repeat {
                bottom.saturating_sub(1)
            } else {
                bottom
            };
            (0..from).rev().find(matches)
        } else {
            (bottom..n).find(matches)
        };
        match hit {
            Some(i) => {
                self.ui.log_back = n - (i + 1);
                self.ui.follow = false;
                self.clamp_log();
            }
            None => {
                let way = if older { "further back" } else { "further on" };
                self.flash(Level::Warn, format!("\"{q}\" not found {way}"));
            }
        }
    }

    /// A read-only view shows the log file of the selected config.
    fn load_log_file(&mut self) {
        let Some(config) = self
            .grid
            .configs
            .get(self.ui.sel_config)
            .map(|c| c.id.clone())
        else {
            return;
        };
        if self.log_file_config.as_deref() == Some(config.as_str()) {
            return;
        }
        self.view.log = read_log_file(&self.run_dir, &config, &self.view);
        self.ui.log_shown = self.view.log.pushed;
        self.log_file_config = Some(config);
        self.ui.log_back = 0;
        self.ui.follow = true;
    }

    /// The record of the selected cell, if it has one.
    pub fn selected_record(&self) -> Option<&crate::model::CellRecord> {
        let config = self.grid.configs.get(self.ui.sel_config)?;
        let id = self.grid.cell_id(&config.id, self.ui.sel_col?)?;
        self.view.records.get(id)
    }
}

/// Whether an event finished a cell (a filter or sort may change with it).
enum EvKind {
    Finished,
    Other,
}

pub const EXPORT_CSV: &str = "results.csv";
pub const EXPORT_MD: &str = "results.md";

/// The tail of a config's server log, marked: lines a failure quotes as evidence,
/// the plan's ready line, and sweeptop's own `#` lines.
fn read_log_file(run_dir: &Path, config: &str, view: &ViewState) -> LogTail {
    let mut tail = LogTail::default();
    let path = run_dir.join(store::LOGS).join(format!("{config}.log"));
    let Ok(bytes) = std::fs::read(&path) else {
        tail.push(LogLine {
            config: config.to_string(),
            text: format!(
                "(no server log for {config}: {} is missing)",
                path.display()
            ),
            kind: LineKind::Note,
        });
        return tail;
    };
    let text = String::from_utf8_lossy(&bytes);
    let evidence: std::collections::HashSet<&str> = view
        .records
        .values()
        .filter(|r| r.config == config)
        .filter_map(|r| r.failure.as_ref())
        .flat_map(|f| f.evidence.iter().map(|l| l.trim_end()))
        .collect();
    let ready = view
        .plan
        .as_ref()
        .and_then(|p| p.config(config))
        .and_then(|c| c.ready.log_line.clone());
    for line in text.lines() {
        let kind = if line.starts_with("# sweeptop ") {
            LineKind::Note
        } else if evidence.contains(line.trim_end()) {
            LineKind::Failure
        } else if ready.as_deref().is_some_and(|r| line.contains(r)) {
            LineKind::Ready
        } else {
            LineKind::Plain
        };
        tail.push(LogLine {
            config: config.to_string(),
            text: line.to_string(),
            kind,
        });
    }
    tail
}
