//! What the dashboard's screen is made of besides the data: where the user is
//! looking (focus, selection, scroll positions, the popup or typed line) and how
//! it looks, fixed at start. The app changes it; the layout and drawing read it.

use crate::model::Level;
use crate::view::grid::{Arrange, ValueMode};

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
    /// A key that cannot be undone waits for a yes: the key, and what it
    /// will do in words (`skip the rest of tp1-ddtree-b8`).
    Confirm {
        key: crate::tui::keymap::Key,
        what: String,
    },
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
    /// The pause state a pause or resume message announces: a pause or
    /// resume made since by someone else makes it untrue, and it goes.
    pub pause: Option<bool>,
    /// A search's "not found": the next match makes it stale, and it goes.
    pub search: bool,
}

/// The statistics `%` cycles latency values through.
pub const STATS: [&str; 3] = ["p50", "p90", "p99"];

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
    /// A chatty log waited one tick to be brought up to date.
    pub log_waited: bool,
    /// GPU samples arrived since the last tick (log lines are counted by
    /// `log_shown`).
    pub data_stale: bool,
    pub last_search: Option<String>,
    /// A search was made and not ended (Esc): `n`/`N`/Enter move between
    /// its matches instead of doing what they do otherwise.
    pub searching: bool,
    /// The search runs backward (`?`), as `n` repeats it; `N` reverses.
    pub search_back: bool,
    /// The line the search stands on, counted from the first line the
    /// shown log ever had (stable while lines arrive); a repeated search
    /// goes on from it.
    pub search_hit: Option<u64>,
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
            log_waited: false,
            data_stale: false,
            last_search: None,
            searching: false,
            search_back: false,
            search_hit: None,
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
