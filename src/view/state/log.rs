//! The log pane's lines, bounded: the server log tail, and sweeptop's own
//! notes in it (a config starting, a server stopped, a notice…) worded as the
//! headless progress.

use std::collections::VecDeque;

use super::ViewState;
use crate::model::text::display;
use crate::model::{Event, LogMark};
use crate::view::text;

/// Log lines kept for scrolling back.
pub const LOG_LINES: usize = 5000;

/// How a log line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    Plain,
    Failure,
    Ready,
    /// sweeptop's own note (config starting, server stopped, a notice…).
    Note,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub config: String,
    pub text: String,
    pub kind: LineKind,
}

/// The server log tail (plus sweeptop's notes), bounded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogTail {
    pub lines: VecDeque<LogLine>,
    /// Lines ever pushed (scroll positions are kept stable with it).
    pub pushed: u64,
    /// Lines the view missed because it fell behind (the log file has them).
    pub missed: u64,
}

impl LogTail {
    pub fn push(&mut self, line: LogLine) {
        if self.lines.len() == LOG_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
        self.pushed += 1;
    }
}

impl ViewState {
    /// A line of a server's log, made safe to show.
    pub(super) fn log_line(&mut self, config: &str, line: &str, mark: LogMark) {
        self.log.push(LogLine {
            config: config.to_string(),
            text: display(line).into_owned(),
            kind: match mark {
                LogMark::Plain => LineKind::Plain,
                LogMark::Failure => LineKind::Failure,
                LogMark::Ready => LineKind::Ready,
            },
        });
    }

    /// sweeptop's own line in the log pane for an event, worded as the
    /// headless progress and put under the config it is about.
    pub(super) fn note(&mut self, ev: &Event) {
        let config = match ev {
            Event::ConfigStarting { config, .. }
            | Event::ServerReady { config, .. }
            | Event::ServerExited { config, .. }
            | Event::ServerStopped { config, .. } => config.clone(),
            // A step's notes go with its output.
            Event::PrepareStarted { step, .. } | Event::PrepareEnded { step, .. } => {
                crate::model::prepare_log_name(step)
            }
            // The end of the whole sweep belongs to no config.
            Event::SweepFinished { .. } | Event::SweepInterrupted { .. } => String::new(),
            // The config running now (none between configs).
            Event::Action { .. }
            | Event::Paused { .. }
            | Event::Resumed { .. }
            | Event::Notice { .. } => self.config().map(|c| c.id.clone()).unwrap_or_default(),
            // Not noted: the header, the grid and the GPU panel show these,
            // and a log line is in the pane already.
            Event::SweepStarted { .. }
            | Event::CellStarted { .. }
            | Event::CellFinished { .. }
            | Event::PrepareProgress { .. }
            | Event::Log { .. }
            | Event::Gpu { .. }
            | Event::Viewers { .. } => return,
        };
        if let Some(words) = text::line(ev) {
            self.log.push(LogLine {
                config,
                text: words,
                kind: LineKind::Note,
            });
        }
    }
}
