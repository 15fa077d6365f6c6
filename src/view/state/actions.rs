//! What was asked of the sweep (pause, quit, exclude, include, retry: by a
//! key, an attached viewer or a signal) and what it noticed (warnings and errors).

use super::ViewState;
use crate::model::text::display;
use crate::model::{Level, Timestamp};

impl ViewState {
    /// An action asked for: a quit stops the sweep, excluded configs and
    /// queued retries are marked in the grid, and a pause's source is kept
    /// to say who paused.
    pub(super) fn action(
        &mut self,
        at: Timestamp,
        action: &str,
        target: Option<&str>,
        source: &str,
    ) {
        if matches!(action, "pause" | "resume" | "toggle_pause") {
            self.pause_source = Some(source.to_string());
        }
        match (action, target) {
            ("quit", _) if at >= self.sweep.stopping_at => {
                self.sweep.stopping = true;
                self.sweep.stopping_at = at;
            }
            ("exclude", Some(config)) => {
                self.excluded.insert(config.to_string());
            }
            ("include", Some(config)) => {
                self.excluded.remove(config);
            }
            ("retry", Some(target)) => {
                self.retry_queued.insert(target.to_string(), at);
            }
            _ => {}
        }
    }

    /// Whether `cell` (of `config`) waits for a retry asked for it or its
    /// config: asked, and not recorded since.
    pub fn retry_waits(&self, cell: &str, config: &str) -> bool {
        let asked = [cell, config]
            .iter()
            .filter_map(|t| self.retry_queued.get(*t))
            .max();
        match (asked, self.records.get(cell)) {
            (None, _) => false,
            (Some(_), None) => true,
            (Some(at), Some(r)) => r.finished_at < *at,
        }
    }

    /// A notice: the latest warning or error is kept to be shown.
    pub(super) fn notice(&mut self, level: Level, message: &str) {
        if level != Level::Info {
            self.last_notice = Some((level, display(message).into_owned()));
        }
    }
}
