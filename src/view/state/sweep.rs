//! The sweep as a whole: its (re)starts, its end, pauses, what the header's
//! badge says, how many cells are done, and the elapsed time and ETA from
//! the events' own clock.

use std::collections::BTreeSet;

use super::ViewState;
use crate::model::{covered_s, CellRecord, Status, Timestamp};

/// Cells measured since the (re)start before an ETA is given, and working
/// seconds: before them the pace is mostly the first server's start.
const ETA_MIN_CELLS: usize = 3;
const ETA_MIN_WORK_S: f64 = 10.0;

/// A cell recorded quicker than this did not run (a crashed config's rest,
/// failed without a request): no measurement.
const MEASURED_MIN_S: f64 = 0.1;

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
        // A step of an earlier start that never said its end (SIGKILL).
        self.preparing.retain(|p| p.started > at);
    }

    /// The sweep finished or was interrupted.
    pub(super) fn end_sweep(&mut self, at: Timestamp, sweep: Sweep) {
        // Nothing prepares once the sweep has ended.
        self.preparing.retain(|p| p.started > at);
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

    /// Seconds left, or `None` until enough is known (the header then says
    /// it is estimating). The rule, from what was recorded since the sweep
    /// (re)started: no ETA before [`ETA_MIN_CELLS`] cells were measured and
    /// [`ETA_MIN_WORK_S`] working seconds passed (paused time left out), as
    /// a first cell's pace is mostly its server's start. Then each cell left
    /// takes what the cells recorded since the start took each (the time any
    /// of them ran, over how many: cells side by side count once, a crashed
    /// config's rest counts as the nothing it cost), and each config left to
    /// start takes what the configs since the start took besides their
    /// cells (starting and stopping servers). Both are measured up to the
    /// last record, not to now, so a long cell running or a pause does not
    /// move the ETA.
    pub fn eta_s(&self, now: Timestamp) -> Option<u64> {
        if !matches!(self.sweep.sweep, Sweep::Running) {
            return None;
        }
        let start = self.started?;
        let now = self.paused_since.unwrap_or(now);
        let work_s = now.seconds_since(start) - self.paused_s;
        let since: Vec<&CellRecord> = self
            .records
            .values()
            .filter(|r| r.started_at >= start && r.status != Status::Skipped)
            .collect();
        let ran: Vec<(Timestamp, Timestamp)> = since
            .iter()
            .filter(|r| r.finished_at.seconds_since(r.started_at) >= MEASURED_MIN_S)
            .map(|r| (r.started_at, r.finished_at))
            .collect();
        if ran.len() < ETA_MIN_CELLS || work_s < ETA_MIN_WORK_S {
            return None;
        }
        let last = since.iter().map(|r| r.finished_at).max()?;
        let cells_s = covered_s(ran);
        let per_cell = cells_s / since.len() as f64;
        let configs_since: BTreeSet<&str> = since.iter().map(|r| r.config.as_str()).collect();
        let window_s = last.seconds_since(start) - self.paused_s;
        let per_config = (window_s - cells_s).max(0.0) / configs_since.len() as f64;
        let (cells, configs) = self.left_to_run();
        let eta = cells as f64 * per_cell + configs as f64 * per_config;
        eta.is_finite().then(|| eta.round().max(0.0) as u64)
    }

    /// Cells left to record (an excluded config's are skipped, not run), and
    /// the configs not running now that have some of them (each a server
    /// start). Without the plan, the cells left by the count.
    fn left_to_run(&self) -> (usize, usize) {
        let Some(plan) = &self.plan else {
            return (self.total_cells.saturating_sub(self.done()), 0);
        };
        let live: BTreeSet<&str> = self.live_configs().map(|c| c.id.as_str()).collect();
        let mut configs = BTreeSet::new();
        let mut cells = 0;
        for c in &plan.cells {
            let left = !self.records.contains_key(&c.id) || self.retry_waits(&c.id, &c.config);
            if left && !self.excluded.contains(&c.config) {
                cells += 1;
                if !live.contains(c.config.as_str()) {
                    configs.insert(c.config.as_str());
                }
            }
        }
        (cells, configs.len())
    }
}
