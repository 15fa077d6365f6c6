//! One line of `results.jsonl`: the contract users' scripts read.

use serde::{Deserialize, Serialize};

use super::{Failure, Metrics, Timestamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Ok,
    Failed,
    Skipped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
        }
    }
}

/// A finished cell. Every field is always present (`failure` and `metrics` may be
/// null). Invariant, enforced where records are made: `ok` ⇒ tokens and tok/s > 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellRecord {
    pub cell: String,
    pub config: String,
    pub phase: String,
    pub workload: String,
    pub context_tokens: u64,
    pub concurrency: u32,
    pub status: Status,
    pub failure: Option<Failure>,
    pub metrics: Option<Metrics>,
    pub started_at: Timestamp,
    pub finished_at: Timestamp,
    /// What an `ok` cell's numbers must be read with (requests that returned
    /// fewer tokens than asked: kind `short_output`, with the context numbers
    /// when they explain it). Null when there is nothing to say.
    #[serde(default)]
    pub warning: Option<Failure>,
}

impl CellRecord {
    /// Whether the record may stand as `ok`: real tokens at a real rate.
    pub fn holds_invariant(&self) -> bool {
        self.status != Status::Ok || self.metrics.as_ref().is_some_and(Metrics::has_tokens)
    }

    /// How long the cell ran, in seconds.
    pub fn duration_s(&self) -> f64 {
        self.finished_at.seconds_since(self.started_at)
    }
}

/// A record for tests: `cell` is `config/…`; a failed one is a CUDA illegal
/// instruction saying `message`, an ok one has [`super::sample_metrics`].
#[cfg(test)]
pub(crate) fn sample(cell: &str, status: Status, message: &str) -> CellRecord {
    use super::{FailureKind, FailureSource};
    CellRecord {
        cell: cell.into(),
        config: cell.split('/').next().unwrap_or(cell).into(),
        phase: "tp1".into(),
        workload: "code".into(),
        context_tokens: 1024,
        concurrency: 1,
        status,
        failure: (status == Status::Failed).then(|| {
            Failure::new(
                FailureKind::CudaIllegalInstruction,
                FailureSource::ServerLog,
                message,
            )
        }),
        metrics: (status == Status::Ok).then(super::sample_metrics),
        started_at: Timestamp::from_unix_ms(1_764_749_780_000),
        finished_at: Timestamp::from_unix_ms(1_764_749_784_500),
        warning: None,
    }
}
