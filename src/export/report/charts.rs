//! The report's charts: per workload and context, each value of
//! [`BY_CONCURRENCY`] against concurrency with a line per config, then the
//! throughput–latency curve.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::svg::{line_chart, Series};
use super::{esc, RunReport};
use crate::model::{CellRecord, Metric, Status};
use crate::plan::Plan;

/// What a chart against concurrency plots.
enum Plotted {
    /// A metric of the table, by its key.
    Metric(&'static str),
    /// Output tok/s as a ratio to the phase baseline's.
    Speedup,
}

/// The charts against concurrency, in order: title, y label, what is plotted.
const BY_CONCURRENCY: [(&str, &str, Plotted); 8] = [
    ("output tok/s", "tok/s", Plotted::Metric("output_tok_s")),
    (
        "decode tok/s per request (p50)",
        "tok/s",
        Plotted::Metric("decode_tok_s_p50"),
    ),
    (
        "speedup × against the phase baseline",
        "×",
        Plotted::Speedup,
    ),
    ("TTFT p50", "ms", Plotted::Metric("ttft_ms_p50")),
    ("TTFT p99", "ms", Plotted::Metric("ttft_ms_p99")),
    ("ITL p50", "ms", Plotted::Metric("itl_ms_p50")),
    ("ITL p99", "ms", Plotted::Metric("itl_ms_p99")),
    ("acceptance length", "tokens", Plotted::Metric("accept_len")),
];

/// Points by config.
type Points = BTreeMap<String, Vec<(f64, f64)>>;

/// Per workload and context (in the plan's order): the value against
/// concurrency, a line per config in plan order. A chart with no point is
/// left out, and so is a heading with no chart under it.
pub(super) fn charts(s: &mut String, run: &RunReport) {
    type Key = (usize, String, u64);
    let plan = run.plan.as_deref();
    let workload_rank = |w: &str| {
        plan.and_then(|p| p.workloads.iter().position(|x| x.id == w))
            .unwrap_or(usize::MAX)
    };
    let mut groups: BTreeMap<Key, Vec<&CellRecord>> = BTreeMap::new();
    for r in &run.records {
        groups
            .entry((
                workload_rank(&r.workload),
                r.workload.clone(),
                r.context_tokens,
            ))
            .or_default()
            .push(r);
    }
    let colours = Colours::of(plan, &run.records);
    let mut all = String::new();
    for ((_, workload, context), records) in &groups {
        let mut group = String::new();
        for (title, y_label, plotted) in &BY_CONCURRENCY {
            let points = match plotted {
                Plotted::Metric(key) => by_concurrency(records, key),
                Plotted::Speedup => speedups(plan, records),
            };
            group.push_str(&line_chart(
                title,
                "concurrency",
                y_label,
                &colours.series(points),
                true,
            ));
        }
        group.push_str(&line_chart(
            "throughput against latency",
            "ITL p50 (ms)",
            "output tok/s",
            &colours.series(curve(records)),
            false,
        ));
        if group.is_empty() {
            continue;
        }
        let ctx = crate::model::thousands(*context);
        let _ = write!(
            all,
            "<h3>{} · {} tokens of prompt</h3><div class=\"charts\">{group}</div>",
            esc(workload),
            esc(&ctx)
        );
    }
    if !all.is_empty() {
        let _ = write!(s, "<h2>Charts</h2>{all}");
    }
}

/// A config has one colour in every chart, and one place in every legend:
/// its place in the plan (configs the plan does not have, after, by name).
struct Colours<'a>(Vec<&'a str>);

impl<'a> Colours<'a> {
    fn of(plan: Option<&'a Plan>, records: &'a [CellRecord]) -> Colours<'a> {
        let mut configs: Vec<&str> = plan
            .map(|p| p.configs.iter().map(|c| c.id.as_str()).collect())
            .unwrap_or_default();
        let mut others: Vec<&str> = records
            .iter()
            .map(|r| r.config.as_str())
            .filter(|c| !configs.contains(c))
            .collect();
        others.sort_unstable();
        others.dedup();
        configs.extend(others);
        Colours(configs)
    }

    /// The series in the plan's order of configs.
    fn series(&self, by: Points) -> Vec<Series> {
        let mut out: Vec<Series> = by
            .into_iter()
            .map(|(name, p)| {
                let c = self.0.iter().position(|x| *x == name).unwrap_or(0);
                (name, c, p)
            })
            .collect();
        out.sort_by_key(|(_, c, _)| *c);
        out
    }
}

/// A metric against concurrency.
fn by_concurrency(records: &[&CellRecord], key: &str) -> Points {
    let mut by = Points::new();
    for r in records {
        if let Some(y) = number(r, key) {
            by.entry(r.config.clone())
                .or_default()
                .push((f64::from(r.concurrency), y));
        }
    }
    by
}

/// Output tok/s against concurrency as a ratio to the phase baseline's at
/// the same concurrency.
fn speedups(plan: Option<&Plan>, records: &[&CellRecord]) -> Points {
    let mut by = Points::new();
    for r in records {
        let Some(base) = baseline_of(plan, &r.config) else {
            continue;
        };
        let b = records
            .iter()
            .find(|x| x.config == base && x.concurrency == r.concurrency)
            .and_then(|x| number(x, "output_tok_s"));
        if let (Some(v), Some(b)) = (number(r, "output_tok_s"), b) {
            if b > 0.0 {
                by.entry(r.config.clone())
                    .or_default()
                    .push((f64::from(r.concurrency), v / b));
            }
        }
    }
    by
}

/// Output tok/s against ITL p50: what throughput costs in latency.
fn curve(records: &[&CellRecord]) -> Points {
    let mut by = Points::new();
    for r in records {
        if let (Some(itl), Some(t)) = (number(r, "itl_ms_p50"), number(r, "output_tok_s")) {
            by.entry(r.config.clone()).or_default().push((itl, t));
        }
    }
    by
}

/// The phase baseline of a config, for speedups.
fn baseline_of(plan: Option<&Plan>, config: &str) -> Option<String> {
    let p = plan?;
    let phase = &p.config(config)?.phase;
    p.configs
        .iter()
        .find(|c| &c.phase == phase && c.baseline)
        .map(|c| c.id.clone())
}

/// The metric's value of an ok record.
fn number(r: &CellRecord, key: &str) -> Option<f64> {
    let m = Metric::by_key(key)?;
    if r.status != Status::Ok {
        return None;
    }
    r.metrics.as_ref().and_then(|v| m.value(v).number())
}
