//! One line of `results.jsonl`: the contract users' scripts read.

use serde::{Deserialize, Serialize};

use crate::detect::Failure;
use crate::load::Metrics;

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
    pub started_at: String,
    pub finished_at: String,
}
