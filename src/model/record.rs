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
}

impl CellRecord {
    /// Whether the record may stand as `ok`: real tokens at a real rate.
    pub fn holds_invariant(&self) -> bool {
        self.status != Status::Ok
            || self.metrics.as_ref().is_some_and(|m| {
                m.output_tokens > 0 && m.output_tok_s > 0.0 && m.output_tok_s.is_finite()
            })
    }

    /// How long the cell ran, in seconds.
    pub fn duration_s(&self) -> f64 {
        self.finished_at.seconds_since(self.started_at)
    }
}
