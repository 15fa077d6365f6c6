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
    /// What an `ok` cell's numbers must be read with, most important first:
    /// requests that returned fewer tokens than asked (`short_output`, with
    /// the context numbers when they explain it), a client TTFT far from the
    /// server's own (`clock_gap`), cold prompts that hit the prefix cache
    /// (`cache_hit`). Empty when there is nothing to say. Records written
    /// before it was a list carry one `warning` (or null), read here as a list.
    #[serde(default, alias = "warning", deserialize_with = "one_or_many")]
    pub warnings: Vec<Failure>,
}

/// `null`, one failure, or a list of them.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Failure>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Said {
        One(Box<Failure>),
        Many(Vec<Failure>),
    }
    Ok(match Option::<Said>::deserialize(d)? {
        None => Vec::new(),
        Some(Said::One(f)) => vec![*f],
        Some(Said::Many(v)) => v,
    })
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
        warnings: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_with_one_warning_or_none_read_as_a_list() {
        let mut r = sample("a/x", Status::Ok, "");
        let w = Failure::new(
            crate::model::FailureKind::ShortOutput,
            crate::model::FailureSource::Client,
            "short",
        );
        r.warnings = vec![w.clone()];
        let mut v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["warnings"][0]["kind"], "short_output");
        let back: CellRecord = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, r);
        // The earlier shape: one `warning`, or null, or absent.
        let map = v.as_object_mut().unwrap();
        map.remove("warnings");
        map.insert("warning".into(), serde_json::to_value(&w).unwrap());
        let old: CellRecord = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(old.warnings, vec![w]);
        v["warning"] = serde_json::Value::Null;
        let old: CellRecord = serde_json::from_value(v.clone()).unwrap();
        assert!(old.warnings.is_empty());
        v.as_object_mut().unwrap().remove("warning");
        let old: CellRecord = serde_json::from_value(v).unwrap();
        assert!(old.warnings.is_empty());
    }
}
