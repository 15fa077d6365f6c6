//! Folding what the engine says into the view: events (a finished cell may
//! re-sort the grid, a started one moves the selection that follows it), log
//! lines and GPU samples that wait for the clock's tick, the view falling
//! behind, and the engine's end.

use super::{App, Redraw};
use crate::model::{Event, Level, Timestamp};
use crate::tui::keymap::Key;
use crate::view::grid::Grid;
use crate::view::state::{LineKind, LogLine, Shown, Sweep};

/// New log lines a glance takes in: more waiting at a tick is a chatty log.
const CHATTY: usize = 8;

impl App {
    pub(super) fn event(&mut self, ev: Event) -> Redraw {
        let is_log = matches!(ev, Event::Log { .. });
        let redraw = match &ev {
            // Data that shows with the next tick.
            Event::Log { .. } => Redraw::No,
            Event::Gpu { .. } => {
                self.ui.data_stale = true;
                Redraw::No
            }
            _ => Redraw::Now,
        };
        let finished = matches!(ev, Event::CellFinished { .. });
        let rebuild = finished && self.view.plan.is_none();
        let started = matches!(ev, Event::CellStarted { .. });
        let pushed_before = self.view.log.pushed;
        let shown_before = self.shown_log().pushed;
        self.view.apply(&ev);
        self.copy_to_picked(self.view.log.pushed - pushed_before);
        // Lines that reach the pane (a log line, or a note the fold added)
        // keep a scrolled-back or paused view still.
        let added = (self.shown_log().pushed - shown_before) as usize;
        if added > 0 && (self.ui.log_back > 0 || (is_log && !self.ui.follow)) {
            self.ui.log_back += added;
        }
        self.clamp_log();
        if rebuild {
            self.grid = Grid::build(&self.view);
        }
        if rebuild || (!self.ui.arrange.is_plain() && finished) {
            self.rearrange();
        }
        if started {
            self.follow_running();
        }
        if matches!(ev, Event::Paused { .. } | Event::Resumed { .. }) {
            self.drop_untrue_pause_message();
        }
        redraw
    }

    /// A pause or resume message the sweep no longer bears out (another
    /// viewer paused after this one resumed) goes: the header says who.
    fn drop_untrue_pause_message(&mut self) {
        let paused = self.view.sweep.paused;
        if let Some(f) = &self.ui.flash {
            if f.pause.is_some_and(|p| p != paused) {
                self.ui.flash = None;
            }
        }
    }

    /// The results are re-read; the message says so once they have been.
    pub(super) fn events_missed(&mut self) -> Redraw {
        self.reload_results();
        Redraw::No
    }

    pub(super) fn logs_missed(&mut self, n: u64) -> Redraw {
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

    fn push_log(&mut self, line: LogLine) {
        let shown_before = self.shown_log().pushed;
        self.view.log.push(line);
        self.copy_to_picked(1);
        if self.ui.log_back > 0 && self.shown_log().pushed > shown_before {
            self.ui.log_back += 1;
        }
        self.clamp_log();
    }

    /// The clock: the spinner turns, waiting data is shown, an old message goes.
    pub(super) fn tick(&mut self, now: Timestamp) -> Redraw {
        self.now = now;
        self.ui.spinner = self.ui.spinner.wrapping_add(1);
        let mut redraw = Redraw::No;
        if self.ui.data_stale {
            self.ui.data_stale = false;
            redraw = Redraw::Soon;
        }
        // A chatty log (more lines waiting than a glance takes in) is
        // brought up to date every other tick: the pane is a sample of it
        // either way, and half the samples are half the bytes on an SSH
        // link (the log file and scrolling back have every line). A
        // failure line shows at once.
        let hidden = self.log_hidden();
        if hidden > 0 {
            let failure = || {
                let log = self.shown_log();
                log.lines
                    .iter()
                    .rev()
                    .take(hidden)
                    .any(|l| l.kind == LineKind::Failure)
            };
            if hidden <= CHATTY || self.ui.log_waited || failure() {
                self.ui.log_shown = self.shown_log().pushed;
                self.ui.log_waited = false;
                redraw = Redraw::Soon;
            } else {
                self.ui.log_waited = true;
            }
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

    /// A signal (which also tells the engine to quit): close now if the
    /// engine has returned, else as after a quit, when it does. A signal that
    /// comes as a finished sweep is being shown, before the engine has said
    /// it is done, is not lost.
    pub(super) fn close_asked(&mut self) -> Redraw {
        if self.engine_done {
            self.exit = true;
        } else {
            self.quit_sent = true;
        }
        Redraw::No
    }

    /// The engine has returned: close after a quit or an interrupted sweep;
    /// after a finished one, stay until the user leaves.
    pub(super) fn engine_returned(&mut self) -> Redraw {
        self.engine_done = true;
        if self.quit_sent || matches!(self.view.sweep.sweep, Sweep::Interrupted { .. }) {
            self.exit = true;
        } else if matches!(self.view.sweep.sweep, Sweep::Finished { .. }) {
            let quit = self
                .keymap
                .chords(Key::Quit)
                .first()
                .map(|c| c.to_string())
                .unwrap_or_else(|| "quit".into());
            // This one stays until the user leaves.
            self.notice(
                Level::Info,
                format!(
                    "sweep finished; {quit} leaves (results are in {})",
                    self.run_dir.display()
                ),
            );
        } else {
            self.exit = true;
        }
        Redraw::Now
    }
}
