//! The sweep as a whole: its (re)starts, its end, pauses, what the header's
//! badge says, how many cells are done, and the elapsed time and ETA from
//! the events' own clock.

use super::ViewState;
use crate::model::Timestamp;

/// Where the sweep as a whole stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sweep {
    /// No `SweepStarted` seen yet.
    Waiting,
    Running,
    Finished {
        ok: usize,
        failed: usize,
        skipped: usize,
    },
    Interrupted {
        reason: String,
    },
}

/// What the header's state badge says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    Starting,
    Running,
    Paused,
    Stopping,
    Finished,
    Interrupted,
}

impl Shown {
    pub fn label(self) -> &'static str {
        match self {
            Shown::Starting => "STARTING",
            Shown::Running => "RUNNING",
            Shown::Paused => "PAUSED",
            Shown::Stopping => "STOPPING",
            Shown::Finished => "FINISHED",
            Shown::Interrupted => "INTERRUPTED",
        }
    }
}

/// The sweep state with the time of each change, so older events cannot undo newer ones.
#[derive(Debug, Clone)]
pub struct SweepState {
    pub sweep: Sweep,
    pub sweep_at: Timestamp,
    pub paused: bool,
    pub paused_at: Timestamp,
    /// A quit was asked for and the engine is stopping.
    pub stopping: bool,
    pub stopping_at: Timestamp,
}

impl Default for SweepState {
    fn default() -> Self {
        SweepState {
            sweep: Sweep::Waiting,
            sweep_at: Timestamp::default(),
            paused: false,
            paused_at: Timestamp::default(),
            stopping: false,
            stopping_at: Timestamp::default(),
        }
    }
}

impl ViewState {
    /// A (re)start: the ETA counts from the latest one, which is neither
    /// paused nor stopping, and what ran before it runs no more.
    pub(super) fn sweep_started(
        &mut self,
        at: Timestamp,
        plan: &str,
        run_dir: &str,
        configs: usize,
        cells: usize,
    ) {
        self.plan_name = plan.to_string();
        self.run_dir = run_dir.to_string();
        self.total_configs = configs;
        self.total_cells = cells;
        if self.started.is_none_or(|s| at >= s) {
            self.started = Some(at);
            (self.paused_s, self.paused_since) = (0.0, None);
            self.finished_since_start = self
                .records
                .values()
                .filter(|r| r.finished_at >= at)
                .count();
        }
        let s = &mut self.sweep;
        if at >= s.sweep_at {
            s.sweep = Sweep::Running;
            s.sweep_at = at;
        }
        // A fresh start is neither paused nor stopping.
        if at >= s.paused_at {
            s.paused = false;
            s.paused_at = at;
        }
        if at >= s.stopping_at {
            s.stopping = false;
            s.stopping_at = at;
        }
        self.running.retain(|r| r.since > at);
        self.configs.retain(|c| c.at > at);
    }

    /// The sweep finished or was interrupted.
    pub(super) fn end_sweep(&mut self, at: Timestamp, sweep: Sweep) {
        if at >= self.sweep.sweep_at {
            self.sweep.sweep = sweep;
            self.sweep.sweep_at = at;
            self.sweep.stopping = false;
            self.sweep.stopping_at = at;
            self.sweep.paused = false;
            self.sweep.paused_at = at;
            self.running.retain(|r| r.since > at);
        }
    }

    /// Paused (`paused`) or resumed: the paused time is kept for the ETA.
    pub(super) fn pause(&mut self, at: Timestamp, paused: bool) {
        if at < self.sweep.paused_at {
            return;
        }
        match (paused, self.paused_since) {
            (true, None) => self.paused_since = Some(at),
            (false, Some(since)) => {
                self.paused_s += at.seconds_since(since).max(0.0);
                self.paused_since = None;
            }
            _ => {}
        }
        self.sweep.paused = paused;
        self.sweep.paused_at = at;
        self.paused_by = if paused {
            self.pause_source.clone()
        } else {
            None
        };
    }

    /// What the header's badge says.
    pub fn shown(&self) -> Shown {
        match &self.sweep.sweep {
            Sweep::Finished { .. } => Shown::Finished,
            Sweep::Interrupted { .. } => Shown::Interrupted,
            Sweep::Waiting if !self.sweep.stopping => Shown::Starting,
            _ if self.sweep.stopping => Shown::Stopping,
            _ if self.sweep.paused => Shown::Paused,
            _ => Shown::Running,
        }
    }

    /// Cells of the plan that have a record and wait for no retry.
    pub fn done(&self) -> usize {
        match &self.plan {
            Some(p) => p
                .cells
                .iter()
                .filter(|c| self.records.contains_key(&c.id) && !self.retry_waits(&c.id, &c.config))
                .count(),
            None => self
                .records
                .values()
                .filter(|r| !self.retry_waits(&r.cell, &r.config))
                .count(),
        }
    }

    /// Seconds since the sweep (re)started, at `now`.
    /// A sweep that ended stops its clock at its end (a dashboard left
    /// open on a finished sweep does not count on).
    pub fn elapsed_s(&self, now: Timestamp) -> Option<u64> {
        let end = match self.sweep.sweep {
            Sweep::Finished { .. } | Sweep::Interrupted { .. } if self.sweep.sweep_at < now => {
                self.sweep.sweep_at
            }
            _ => now,
        };
        Some(end.seconds_since(self.started?).max(0.0) as u64)
    }

    /// Seconds left, from the pace of the cells finished since the start,
    /// paused time left out (while paused, the ETA stands still).
    pub fn eta_s(&self, now: Timestamp) -> Option<u64> {
        if !matches!(self.sweep.sweep, Sweep::Running) || self.finished_since_start == 0 {
            return None;
        }
        let now = self.paused_since.unwrap_or(now);
        let elapsed = (now.seconds_since(self.started?) - self.paused_s).max(0.0);
        let left = self.total_cells.saturating_sub(self.done()) as f64;
        Some((elapsed / self.finished_since_start as f64 * left).round() as u64)
    }
}
