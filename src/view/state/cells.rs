//! Cells: the one each config runs now, the record of each finished one (the
//! latest wins, a retry replaces it), and the alert line over the worst failure.

use std::collections::BTreeMap;

use super::{shown, Sweep, ViewState};
use crate::model::{CellRecord, Status, Timestamp};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub cell: String,
    pub config: String,
    pub since: Timestamp,
}

impl ViewState {
    /// A cell starts, unless it is older than what is shown: its own record,
    /// a newer start on its config, or the end of the sweep.
    pub(super) fn cell_started(&mut self, at: Timestamp, cell: &str, config: &str) {
        let stale = self.records.get(cell).is_some_and(|r| r.finished_at >= at)
            || self
                .running
                .iter()
                .any(|r| r.config == config && r.since > at)
            || self.sweep.sweep_at > at
                && !matches!(self.sweep.sweep, Sweep::Running | Sweep::Waiting);
        if !stale {
            self.running.retain(|r| r.config != config);
            self.running.push(Running {
                cell: cell.to_string(),
                config: config.to_string(),
                since: at,
            });
            self.retry_queued.remove(cell);
            self.retry_queued.remove(config);
        }
    }

    /// A finished cell: it replaces an older record of the same cell, never a newer one.
    /// Its failure's text is kept as it may be shown ([`crate::model::text::display`]).
    pub fn record(&mut self, mut record: CellRecord) {
        for f in record.failure.iter_mut().chain(record.warnings.iter_mut()) {
            shown(&mut f.message);
            f.evidence.iter_mut().for_each(shown);
        }
        if let Some(old) = self.records.get(&record.cell) {
            if old.finished_at > record.finished_at {
                return;
            }
            if *old == record {
                return;
            }
        } else if self
            .started
            .as_ref()
            .is_some_and(|s| record.finished_at >= *s)
        {
            self.finished_since_start += 1;
        }
        self.running
            .retain(|r| !(r.cell == record.cell && r.since <= record.finished_at));
        if record.status == Status::Failed {
            let worse = self
                .last_failure
                .as_ref()
                .and_then(|c| self.records.get(c))
                .is_none_or(|r| headline(r) <= headline(&record));
            if worse {
                self.last_failure = Some(record.cell.clone());
            }
        } else if self.last_failure.as_ref() == Some(&record.cell) {
            // A retry succeeded: the alert goes to the worst failure left, if any.
            self.last_failure = None;
        }
        self.records.insert(record.cell.clone(), record);
        if self.last_failure.is_none() {
            self.last_failure = self
                .records
                .values()
                .filter(|r| r.status == Status::Failed)
                .max_by_key(|r| headline(r))
                .map(|r| r.cell.clone());
        }
    }

    /// Whether `cell` is running now.
    pub fn is_running(&self, cell: &str) -> bool {
        self.running.iter().any(|r| r.cell == cell)
    }

    /// The running cell of `config`.
    pub fn running_of(&self, config: &str) -> Option<&Running> {
        self.running.iter().find(|r| r.config == config)
    }

    /// The alert line: the worst failure (a crash outranks an overflow, the
    /// latest breaks ties) and how many cells of its config failed.
    pub fn alert(&self) -> Option<String> {
        let r = self.records.get(self.last_failure.as_ref()?)?;
        let f = r.failure.as_ref()?;
        let n = self
            .records
            .values()
            .filter(|o| o.config == r.config && o.status == Status::Failed)
            .count();
        Some(format!(
            "{}: {} — {n} cell{} failed",
            r.config,
            f.kind.describe(),
            if n == 1 { "" } else { "s" }
        ))
    }

    /// With more than one kind of failure in the run, how many cells of
    /// each, worst first: `in all 7 ILL-INSTR, 3 CTX 400`.
    pub fn failure_kinds(&self) -> Option<String> {
        let mut kinds: BTreeMap<(u8, &'static str), usize> = Default::default();
        for r in self.records.values().filter(|r| r.status == Status::Failed) {
            if let Some(f) = &r.failure {
                *kinds
                    .entry((u8::MAX - f.kind.severity(), f.kind.badge()))
                    .or_default() += 1;
            }
        }
        (kinds.len() > 1).then(|| {
            let each: Vec<String> = kinds
                .iter()
                .map(|((_, badge), count)| format!("{count} {badge}"))
                .collect();
            format!("in all {}", each.join(", "))
        })
    }
}

/// What decides which failure the alert line shows: severity, then time.
fn headline(r: &CellRecord) -> (u8, Timestamp) {
    (
        r.failure.as_ref().map_or(0, |f| f.kind.severity()),
        r.finished_at,
    )
}
