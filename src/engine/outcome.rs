//! Recording an outcome: how a cell ended ([`CellEnd`]), the records made of it
//! (one constructor each for skipped, failed and ok), and writing them durably
//! before anyone is told.

use super::{Core, EngineError};
use crate::model::{CellRecord, Event, Failure, Metrics, Status, Timestamp};
use crate::plan::Cell;

/// How a cell ended, before it is recorded.
pub(super) enum CellEnd {
    Done(CellRecord),
    /// The server died or broke during the cell: record it failed, then the
    /// config's remaining cells (or a retry).
    ServerDied(CellRecord, Failure),
    /// No token for the stall timeout: record it, kill the server, go on with a
    /// fresh one.
    Stalled(CellRecord),
    Skipped(CellRecord),
    SkipConfig(CellRecord),
    Quit,
}

/// A record of `cell`, started at `started_at` and ending now.
fn record_of(
    cell: &Cell,
    started_at: Timestamp,
    status: Status,
    failure: Option<Failure>,
    metrics: Option<Metrics>,
) -> CellRecord {
    CellRecord {
        cell: cell.id.clone(),
        config: cell.config.clone(),
        phase: cell.phase.clone(),
        workload: cell.workload.clone(),
        context_tokens: cell.context_tokens,
        concurrency: cell.concurrency,
        status,
        failure,
        metrics,
        started_at,
        finished_at: Timestamp::now(),
        warnings: Vec::new(),
        repetitions: Vec::new(),
        spread: None,
        beside: Vec::new(),
        gpus: Vec::new(),
    }
}

pub(super) fn skipped(cell: &Cell, started_at: Timestamp) -> CellRecord {
    record_of(cell, started_at, Status::Skipped, None, None)
}

pub(super) fn failed(cell: &Cell, started_at: Timestamp, failure: Failure) -> CellRecord {
    record_of(cell, started_at, Status::Failed, Some(failure), None)
}

pub(super) fn ok(cell: &Cell, started_at: Timestamp, metrics: Metrics) -> CellRecord {
    record_of(cell, started_at, Status::Ok, None, Some(metrics))
}

impl Core {
    /// Append one finished cell to `results.jsonl` (fsynced), then tell
    /// everyone. A record that claims `ok` without tokens is never written as
    /// such: it is recorded as `zero_tokens`. A cell that ran carries the
    /// GPUs it ran on and the configs that ran beside it.
    pub(super) fn record(&self, mut record: CellRecord) -> Result<(), EngineError> {
        if !record.holds_invariant() {
            debug_assert!(false, "ok without tokens: {record:?}");
            let requests = record.metrics.as_ref().map_or(0, |m| m.requests);
            record.status = Status::Failed;
            record.metrics = None;
            record.failure = Some(crate::detect::zero_tokens(requests));
        }
        {
            let mut book = self.book();
            if let Some(beside) = book.beside.remove(&record.cell) {
                record.beside = beside.into_iter().filter(|c| *c != record.config).collect();
                if let Some(lane) = book.lanes.iter().find(|l| l.config == record.config) {
                    record.gpus = lane.gpus.clone();
                }
            }
            book.run.append_result(&record)?;
            book.done.insert(record.cell.clone());
            book.statuses.insert(record.cell.clone(), record.status);
        }
        self.emit(Event::CellFinished {
            at: Timestamp::now(),
            record: Box::new(record),
        });
        Ok(())
    }

    /// Mark cells that cannot run with the same failure.
    pub(super) fn fail_all(&self, cells: &[Cell], failure: &Failure) -> Result<(), EngineError> {
        for c in cells {
            self.record(failed(c, Timestamp::now(), failure.clone()))?;
        }
        Ok(())
    }

    pub(super) fn skip_all(&self, cells: &[Cell]) -> Result<(), EngineError> {
        for c in cells {
            self.record(skipped(c, Timestamp::now()))?;
        }
        Ok(())
    }
}
