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
    /// With `repeats = N` on the workload: every repetition's metrics in the
    /// order measured; `metrics` is the one with the median output tok/s.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repetitions: Vec<Metrics>,
    /// The repetitions' output tok/s: median, min, max and spread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<Spread>,
    /// The configs whose servers ran on this machine at any moment while the
    /// cell was measured (configs packed side by side on other GPUs); empty
    /// when it ran alone.
    #[serde(default)]
    pub beside: Vec<String>,
    /// The GPUs the cell's server ran on (as NVML numbers them), when known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<u32>,
}

/// How much repetitions of one cell agree, on output tok/s.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// (max − min) / median, in percent: the noise a single measurement of
    /// this cell carries.
    pub spread_pct: f64,
}

impl Spread {
    /// Of two or more repetitions (`None` for fewer, or a zero median).
    pub fn of(reps: &[Metrics]) -> Option<Spread> {
        if reps.len() < 2 {
            return None;
        }
        let mut v: Vec<f64> = reps.iter().map(|m| m.output_tok_s).collect();
        v.sort_by(f64::total_cmp);
        let median = if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        };
        let (min, max) = (v[0], v[v.len() - 1]);
        (median > 0.0).then(|| Spread {
            n: v.len(),
            median,
            min,
            max,
            spread_pct: (max - min) / median * 100.0,
        })
    }

    /// The noise a comparison of two cells carries: the wider of their
    /// measured spreads, in percent; `None` when neither was repeated.
    pub fn band(a: Option<Spread>, b: Option<Spread>) -> Option<f64> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.spread_pct.max(b.spread_pct)),
            (Some(s), None) | (None, Some(s)) => Some(s.spread_pct),
            (None, None) => None,
        }
    }

    /// The repetition that stands for the cell: the one whose output tok/s
    /// is the median (the lower middle one for an even count).
    pub fn median_index(reps: &[Metrics]) -> usize {
        let mut order: Vec<usize> = (0..reps.len()).collect();
        order.sort_by(|a, b| reps[*a].output_tok_s.total_cmp(&reps[*b].output_tok_s));
        order
            .get((reps.len().saturating_sub(1)) / 2)
            .copied()
            .unwrap_or(0)
    }
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
        repetitions: Vec::new(),
        spread: None,
        beside: Vec::new(),
        gpus: Vec::new(),
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

    #[test]
    fn repetitions_give_a_median_and_a_spread() {
        let m = |t: f64| Metrics {
            output_tok_s: t,
            ..crate::model::sample_metrics()
        };
        let reps = vec![m(100.0), m(110.0), m(90.0)];
        let s = Spread::of(&reps).unwrap();
        assert_eq!((s.n, s.median, s.min, s.max), (3, 100.0, 90.0, 110.0));
        assert!((s.spread_pct - 20.0).abs() < 1e-9);
        assert_eq!(Spread::median_index(&reps), 0);
        // An even count: the lower middle one stands for the cell.
        let four = vec![m(4.0), m(1.0), m(3.0), m(2.0)];
        assert_eq!(four[Spread::median_index(&four)].output_tok_s, 2.0);
        assert_eq!(Spread::of(&four).unwrap().median, 2.5);
        assert_eq!(Spread::of(&reps[..1]), None);
        // Records without repetitions read and write as before.
        let r = sample("a/x", Status::Ok, "");
        let json = serde_json::to_string(&r).unwrap();
        assert!(!json.contains("repetitions") && !json.contains("spread"));
    }
}
