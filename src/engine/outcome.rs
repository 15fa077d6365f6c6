//! A cell's outcome: how it ended ([`CellEnd`]) and the records made of it
//! (one constructor each for skipped, failed and ok). They are written
//! durably, before anyone is told, by [`super::core::Core::record`].

use crate::model::{CellRecord, Failure, Metrics, Status, Timestamp};
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
