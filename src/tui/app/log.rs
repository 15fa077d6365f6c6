//! Whose log the pane shows. While nothing is selected, the live tail: the
//! running config's lines (with configs side by side, each line tagged).
//! Once the user selects a config in the grid, that config's log: its lines
//! in the live tail, kept current as they arrive, and, when it is not
//! running, its log file read on the disk thread (never on this one). A
//! recorded run always shows the selected config's file.

use super::App;
use crate::tui::disk::{Job, LogMarks};
use crate::view::state::{LogLine, LogTail};

/// The log of the config the user selected.
#[derive(Debug, Clone, Default)]
pub struct PickedLog {
    pub config: String,
    pub tail: LogTail,
}

impl App {
    /// The lines the log pane shows (search and scrolling go through them).
    pub fn shown_log(&self) -> &LogTail {
        self.picked.as_ref().map_or(&self.view.log, |p| &p.tail)
    }

    /// The config whose log the pane shows because it is selected.
    pub fn picked_config(&self) -> Option<&str> {
        self.picked.as_ref().map(|p| p.config.as_str())
    }

    /// Show the log the selection asks for: the selected config's, or
    /// (nothing selected) the live tail. A new log shows from its newest line.
    pub(super) fn pick_log(&mut self) {
        let want = (self.read_only() || !self.ui.track_running)
            .then(|| self.grid.configs.get(self.ui.sel_config))
            .flatten()
            .map(|c| c.id.clone());
        if want.as_deref() == self.picked_config() {
            return;
        }
        self.picked = want.map(|config| {
            let mut tail = LogTail::default();
            for l in self.view.log.lines.iter().filter(|l| l.config == config) {
                tail.push(l.clone());
            }
            // Only a sweep still going streams lines (a killed run's last
            // config looks started but is read from its file).
            let running = self.sweep_live() && self.view.live_configs().any(|c| c.id == config);
            if !running {
                self.jobs.push(Job::LogFile {
                    run_dir: self.run_dir.clone(),
                    marks: LogMarks::of(&self.view, &config),
                    config: config.clone(),
                });
            }
            PickedLog { config, tail }
        });
        self.ui.log_back = 0;
        self.ui.follow = true;
        self.ui.log_shown = self.shown_log().pushed;
    }

    /// The last `added` lines of the live tail: those of the selected config
    /// go to its log too, so it stays current while it runs.
    pub(super) fn copy_to_picked(&mut self, added: u64) {
        let Some(p) = &mut self.picked else {
            return;
        };
        let lines = &self.view.log.lines;
        let from = lines
            .len()
            .saturating_sub(usize::try_from(added).unwrap_or(usize::MAX));
        let new: Vec<LogLine> = lines
            .range(from..)
            .filter(|l| l.config == p.config)
            .cloned()
            .collect();
        for l in new {
            p.tail.push(l);
        }
    }

    /// A config's log file, read: it becomes the selected config's log
    /// (unless the selection has moved on since it was asked for).
    pub(super) fn log_file_read(&mut self, config: &str, tail: LogTail) -> bool {
        match &mut self.picked {
            Some(p) if p.config == config => p.tail = tail,
            _ => return false,
        }
        self.ui.log_shown = self.shown_log().pushed;
        self.ui.log_back = 0;
        self.ui.follow = true;
        true
    }

    /// Esc in the grid: nothing selected, the running cell and its log are
    /// followed again.
    pub(super) fn follow_again(&mut self) {
        if self.read_only() {
            return;
        }
        self.ui.track_running = true;
        self.follow_running();
        self.pick_log();
    }
}
