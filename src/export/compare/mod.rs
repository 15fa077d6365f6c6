//! `sweeptop compare RUN_A RUN_B [...]`: the same cells of several runs side
//! by side, matched by cell id, with each run's change against the first. A
//! change inside the noise band is marked as such (`≈`): one measurement per
//! cell has no spread of its own, so the band is the user's `--noise` (2 %
//! by default). Cells only some runs have are listed apart. Runs of plans
//! whose workloads ask for different things are said at the top, and those
//! workloads' cells are not compared unless forced ([`settings`]).

mod settings;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;

use crate::model::{text, CellRecord, Metric, Status};
use crate::plan::Plan;
pub use settings::{SettingDiff, Settings};

/// One run as `compare` reads it.
pub struct RunResults {
    /// How the run is named in the output (its directory).
    pub name: String,
    /// Its plan, when it could be read: the settings its cells measured.
    pub plan: Option<Arc<Plan>>,
    /// The latest record of each cell.
    pub records: Vec<CellRecord>,
}

/// A cell's value in one run: a number, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Value {
    Ok {
        value: f64,
    },
    /// Ok but the metric is not there (acceptance length without drafts).
    Missing,
    Failed {
        kind: String,
    },
    Skipped,
}

impl Value {
    fn of(r: &CellRecord, metric: &Metric) -> Value {
        match r.status {
            Status::Skipped => Value::Skipped,
            Status::Failed => Value::Failed {
                kind: r
                    .failure
                    .as_ref()
                    .map_or_else(|| "FAILED".to_string(), |f| f.kind.badge().to_string()),
            },
            Status::Ok => match r.metrics.as_ref().and_then(|m| metric.value(m).number()) {
                Some(value) => Value::Ok { value },
                None => Value::Missing,
            },
        }
    }

    fn number(&self) -> Option<f64> {
        match self {
            Value::Ok { value } => Some(*value),
            _ => None,
        }
    }
}

/// The change of a later run's value against the first run's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delta {
    /// Percent change (positive: the value went up).
    pub pct: f64,
    /// Inside the noise band: not a change one can claim.
    pub within_noise: bool,
    /// Better, by the metric's direction (none when the metric has none or
    /// the change is noise).
    pub better: Option<bool>,
}

/// One cell across the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub cell: String,
    /// Its workload asks for the same in every run (else no delta is
    /// given, unless forced).
    pub comparable: bool,
    pub values: Vec<Value>,
    /// Against the first run, for each later run (None without two numbers).
    pub deltas: Vec<Option<Delta>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub metric: String,
    pub runs: Vec<String>,
    pub noise_pct: f64,
    /// Cells every run has.
    pub rows: Vec<Row>,
    /// Cells only some runs have: the cell and the runs that have it.
    pub only_in: Vec<(String, Vec<String>)>,
    /// The workload settings that differ between the runs' plans.
    pub settings: Settings,
    /// Cells of workloads whose settings differ are compared anyway.
    pub forced: bool,
    /// For each later run, how its cells changed against the first run's.
    pub summaries: Vec<Summary>,
}

/// How a later run's cells changed against the first run's, counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub run: String,
    pub better: usize,
    pub worse: usize,
    pub within_noise: usize,
    /// A change the metric has no direction for (neither better nor worse).
    pub changed: usize,
    /// A value in the first run, a failure in this one.
    pub newly_failing: usize,
    /// A failure or a skip in the first run, a value in this one.
    pub newly_ok: usize,
    /// Cells whose workload asked for something else (not forced).
    pub not_comparable: usize,
}

/// How a cell went from the first run's value to a later run's, when it is
/// not a number against a number.
fn transition(first: &Value, later: &Value) -> Option<&'static str> {
    match (first, later) {
        (Value::Ok { .. } | Value::Missing, Value::Failed { .. }) => Some("newly failing"),
        (Value::Failed { .. } | Value::Skipped, Value::Ok { .. }) => Some("newly ok"),
        _ => None,
    }
}

fn summarize(runs: &[RunResults], rows: &[Row], forced: bool) -> Vec<Summary> {
    (1..runs.len())
        .map(|k| {
            let mut s = Summary {
                run: runs[k].name.clone(),
                ..Summary::default()
            };
            for r in rows {
                if !(r.comparable || forced) {
                    s.not_comparable += 1;
                    continue;
                }
                match (&r.deltas[k - 1], transition(&r.values[0], &r.values[k])) {
                    (Some(d), _) if d.within_noise => s.within_noise += 1,
                    (Some(d), _) => match d.better {
                        Some(true) => s.better += 1,
                        Some(false) => s.worse += 1,
                        None => s.changed += 1,
                    },
                    (None, Some("newly failing")) => s.newly_failing += 1,
                    (None, Some(_)) => s.newly_ok += 1,
                    (None, None) => {}
                }
            }
            s
        })
        .collect()
}

impl Summary {
    /// `12 better, 3 worse, 41 within noise, 2 newly failing` (what is zero
    /// left out).
    fn line(&self) -> String {
        let parts: Vec<String> = [
            (self.better, "better"),
            (self.worse, "worse"),
            (self.changed, "changed"),
            (self.within_noise, "within noise"),
            (self.newly_failing, "newly failing"),
            (self.newly_ok, "newly ok"),
            (self.not_comparable, "not comparable"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if parts.is_empty() {
            "nothing to compare".into()
        } else {
            parts.join(", ")
        }
    }
}

/// The runs' cells side by side; with `force`, deltas are given for cells
/// whose workload's settings differ between the plans too.
pub fn compare(
    runs: &[RunResults],
    metric: &'static Metric,
    noise_pct: f64,
    force: bool,
) -> Comparison {
    let plans: Vec<(&str, Option<&Plan>)> = runs
        .iter()
        .map(|r| (r.name.as_str(), r.plan.as_deref()))
        .collect();
    let settings = settings::compare_settings(&plans);
    let maps: Vec<BTreeMap<&str, &CellRecord>> = runs
        .iter()
        .map(|r| r.records.iter().map(|c| (c.cell.as_str(), c)).collect())
        .collect();
    let all: BTreeSet<&str> = maps.iter().flat_map(|m| m.keys().copied()).collect();
    // As people read cell ids: ctx1024 before ctx8192 before ctx32768.
    let mut all: Vec<&str> = all.into_iter().collect();
    all.sort_by(|a, b| text::natural_cmp(a, b));
    let mut rows = Vec::new();
    let mut only_in = Vec::new();
    for cell in all {
        let recs: Vec<Option<&&CellRecord>> = maps.iter().map(|m| m.get(cell)).collect();
        if recs.iter().any(Option::is_none) {
            let have = recs
                .iter()
                .zip(runs)
                .filter(|(r, _)| r.is_some())
                .map(|(_, run)| run.name.clone())
                .collect();
            only_in.push((cell.to_string(), have));
            continue;
        }
        let values: Vec<Value> = recs
            .iter()
            .flatten()
            .map(|r| Value::of(r, metric))
            .collect();
        let comparable = recs[0].is_none_or(|r| settings.same(&r.workload));
        let base = values[0].number().filter(|_| comparable || force);
        let deltas = values[1..]
            .iter()
            .enumerate()
            .map(|(k, v)| {
                let (b, x) = (base?, v.number()?);
                if b == 0.0 {
                    return None;
                }
                let pct = (x - b) / b * 100.0;
                // Measured noise where the cells were repeated: the wider
                // of the two cells' spreads, else the --noise band.
                let spread = |r: Option<&&CellRecord>| r.and_then(|r| r.spread);
                let measured = crate::model::Spread::band(spread(recs[0]), spread(recs[k + 1]));
                let within_noise = pct.abs() <= measured.unwrap_or(noise_pct);
                let better = match (within_noise, metric.better) {
                    (true, _) | (_, crate::model::Better::Neither) => None,
                    (false, crate::model::Better::Higher) => Some(pct > 0.0),
                    (false, crate::model::Better::Lower) => Some(pct < 0.0),
                };
                Some(Delta {
                    pct,
                    within_noise,
                    better,
                })
            })
            .collect();
        rows.push(Row {
            cell: cell.to_string(),
            comparable,
            values,
            deltas,
        });
    }
    Comparison {
        metric: metric.label(),
        runs: runs.iter().map(|r| r.name.clone()).collect(),
        noise_pct,
        summaries: summarize(runs, &rows, force),
        rows,
        only_in,
        settings,
        forced: force,
    }
}

/// What the plans' settings say about the comparison, before its table, a
/// paragraph each (its detail lines are the second of each pair): each
/// workload setting that differs with both values, and the runs whose plan
/// could not be read. None when the plans agree.
fn settings_said(c: &Comparison) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    if !c.settings.differ.is_empty() {
        let head = if c.forced {
            "The plans differ: these workloads' cells are compared anyway (--force)."
        } else {
            "The plans differ: these workloads' cells are not comparable and get no change (--force to compare them)."
        };
        let details = c
            .settings
            .differ
            .iter()
            .map(|d| {
                format!(
                    "workload {}: {} {} in {} but {} in {}",
                    d.workload, d.setting, d.first, c.runs[0], d.value, d.run
                )
            })
            .collect();
        out.push((head.to_string(), details));
    }
    for run in &c.settings.unchecked {
        out.push((
            format!("{run}: its plan cannot be read, so its settings are not checked against the others'."),
            Vec::new(),
        ));
    }
    out
}

/// The summary first: one line per later run (`vs RUN: …` when there are
/// several).
fn summary_lines(c: &Comparison) -> Vec<String> {
    let several = c.summaries.len() > 1;
    c.summaries
        .iter()
        .map(|s| {
            if several {
                format!("{} vs {}: {}", s.run, c.runs[0], s.line())
            } else {
                s.line()
            }
        })
        .collect()
}

/// A later run's change where the cell's workload asked for something else.
pub(crate) const NOT_COMPARABLE: &str = "≠ workload";

pub(crate) fn value_text(v: &Value, metric: &Metric) -> String {
    match v {
        Value::Ok { value } => metric.unit.compact(crate::model::Value::Number(*value)),
        Value::Missing => "n/a".into(),
        Value::Failed { kind } => kind.clone(),
        Value::Skipped => "skip".into(),
    }
}

pub(crate) fn delta_text(d: &Option<Delta>) -> String {
    match d {
        None => "".into(),
        Some(d) if d.within_noise => format!("≈ {:+.1}%", d.pct),
        Some(d) => {
            let mark = match d.better {
                Some(true) => " better",
                Some(false) => " worse",
                None => "",
            };
            format!("{:+.1}%{mark}", d.pct)
        }
    }
}

/// The header and rows as text cells, for the table and Markdown.
fn cells(c: &Comparison, metric: &Metric) -> (Vec<String>, Vec<Vec<String>>) {
    let mut head = vec!["cell".to_string()];
    for (i, run) in c.runs.iter().enumerate() {
        head.push(run.clone());
        if i > 0 {
            head.push(format!("Δ vs {}", c.runs[0]));
        }
    }
    let rows = c
        .rows
        .iter()
        .map(|r| {
            let mut row = vec![r.cell.clone()];
            for (i, v) in r.values.iter().enumerate() {
                row.push(value_text(v, metric));
                if i > 0 {
                    row.push(if !(r.comparable || c.forced) {
                        NOT_COMPARABLE.to_string()
                    } else if let Some(t) = transition(&r.values[0], v) {
                        t.to_string()
                    } else {
                        delta_text(&r.deltas[i - 1])
                    });
                }
            }
            row
        })
        .collect();
    (head, rows)
}

fn footer(c: &Comparison) -> String {
    let mut s = format!(
        "{} cells in every run; ≈ marks a change within the noise: the cells' measured spread where they were repeated (`repeats`), else ±{}% (--noise).\n",
        c.rows.len(),
        c.noise_pct
    );
    if !c.only_in.is_empty() {
        let _ = writeln!(s, "\nCells not in every run:");
        for (cell, have) in &c.only_in {
            let _ = writeln!(s, "  {cell}: only in {}", have.join(", "));
        }
    }
    s
}

/// An aligned terminal table.
pub fn table(c: &Comparison, metric: &Metric) -> String {
    let (head, rows) = cells(c, metric);
    let width = |i: usize| {
        std::iter::once(&head)
            .chain(rows.iter())
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..head.len()).map(width).collect();
    let line = |r: &[String]| {
        r.iter()
            .enumerate()
            .map(|(i, v)| {
                let pad = widths[i].saturating_sub(v.chars().count());
                if i == 0 {
                    format!("{v}{}", " ".repeat(pad))
                } else {
                    format!("{}{v}", " ".repeat(pad))
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut s = format!("{} — {}\n\n", c.metric, c.runs.join(" vs "));
    for line in summary_lines(c) {
        let _ = writeln!(s, "{line}");
    }
    if !c.summaries.is_empty() {
        s.push('\n');
    }
    for (head, details) in settings_said(c) {
        let _ = writeln!(s, "{head}");
        for d in details {
            let _ = writeln!(s, "  {d}");
        }
        s.push('\n');
    }
    let _ = writeln!(s, "{}", line(&head));
    for r in &rows {
        let _ = writeln!(s, "{}", line(r));
    }
    s.push('\n');
    s.push_str(&footer(c));
    text::display_lines(&s)
}

/// A Markdown table to paste into a pull request.
pub fn markdown(c: &Comparison, metric: &Metric) -> String {
    let (head, rows) = cells(c, metric);
    let md = super::markdown::md_cell;
    let mut s = format!("### {} — {}\n\n", md(&c.metric), md(&c.runs.join(" vs ")));
    for line in summary_lines(c) {
        let _ = writeln!(s, "**{}**\n", md(&line));
    }
    for (head, details) in settings_said(c) {
        let _ = writeln!(s, "{}\n", md(&head));
        for d in &details {
            let _ = writeln!(s, "- {}", md(d));
        }
        if !details.is_empty() {
            s.push('\n');
        }
    }
    let _ = writeln!(
        s,
        "| {} |",
        head.iter().map(|h| md(h)).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(s, "|---|{}", "---:|".repeat(head.len().saturating_sub(1)));
    for r in &rows {
        let _ = writeln!(
            s,
            "| {} |",
            r.iter().map(|v| md(v)).collect::<Vec<_>>().join(" | ")
        );
    }
    s.push('\n');
    s.push_str(&footer(c));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{sample_record, Failure, FailureKind, FailureSource};

    fn ok(cell: &str, tok_s: f64) -> CellRecord {
        let mut r = sample_record(cell, Status::Ok, "");
        if let Some(m) = r.metrics.as_mut() {
            m.output_tok_s = tok_s;
        }
        r
    }

    #[test]
    fn cells_are_matched_by_id_with_deltas_against_the_first_run() {
        let mut crashed = sample_record("c/w-ctx1-c4", Status::Failed, "");
        crashed.failure = Some(Failure::new(
            FailureKind::CudaIllegalInstruction,
            FailureSource::ServerLog,
            "boom",
        ));
        let a = RunResults {
            name: "runs/a".into(),
            plan: None,
            records: vec![
                ok("c/w-ctx1-c1", 100.0),
                ok("c/w-ctx1-c4", 300.0),
                ok("c/only-a", 1.0),
            ],
        };
        let b = RunResults {
            name: "runs/b".into(),
            plan: None,
            records: vec![ok("c/w-ctx1-c1", 101.0), crashed, ok("c/only-b", 1.0)],
        };
        let c = RunResults {
            name: "runs/c".into(),
            plan: None,
            records: vec![ok("c/w-ctx1-c1", 130.0), ok("c/w-ctx1-c4", 240.0)],
        };
        let metric = Metric::by_key("output_tok_s").unwrap();
        let cmp = compare(&[a, b, c], metric, 2.0, false);
        assert_eq!(cmp.rows.len(), 2);
        let r0 = &cmp.rows[0];
        assert_eq!(r0.cell, "c/w-ctx1-c1");
        let d_b = r0.deltas[0].as_ref().unwrap();
        assert!((d_b.pct - 1.0).abs() < 1e-9 && d_b.within_noise && d_b.better.is_none());
        let d_c = r0.deltas[1].as_ref().unwrap();
        assert!((d_c.pct - 30.0).abs() < 1e-9 && !d_c.within_noise);
        assert_eq!(d_c.better, Some(true));
        // A crash has no number, so no delta; it shows its badge.
        let r1 = &cmp.rows[1];
        assert_eq!(
            r1.values[1],
            Value::Failed {
                kind: "ILL-INSTR".into()
            }
        );
        assert_eq!(r1.deltas[0], None);
        assert_eq!(r1.deltas[1].as_ref().unwrap().better, Some(false));
        assert_eq!(cmp.only_in.len(), 2);
        let t = table(&cmp, metric);
        assert!(t.contains("≈ +1.0%"), "{t}");
        assert!(t.contains("+30.0% better"), "{t}");
        assert!(t.contains("-20.0% worse"), "{t}");
        assert!(t.contains("ILL-INSTR"), "{t}");
        assert!(t.contains("c/only-a: only in runs/a"), "{t}");
        let md = markdown(&cmp, metric);
        assert!(
            md.contains("| c/w-ctx1-c1 | 100.0 | 101.0 | ≈ +1.0% |"),
            "{md}"
        );
        let json = serde_json::to_value(&cmp).unwrap();
        assert_eq!(json["rows"][0]["deltas"][1]["better"], true);
        // Plans whose workload asked for something else: said at the top,
        // the cells not compared unless forced.
        let plan = |max_tokens: u32| {
            let text = format!(
                "name = \"t\"\n[server]\ncommand = \"serve --port {{port}}\"\nport = 1\n\
                 [[workloads]]\nid = \"code\"\ncontexts = [1]\nconcurrency = [1]\n\
                 max_tokens = {max_tokens}\n[[phases]]\nid = \"p\"\n"
            );
            Some(Arc::new(
                Plan::parse(std::path::Path::new("t.toml"), &text).unwrap(),
            ))
        };
        let runs = |force| {
            let two = [
                RunResults {
                    name: "runs/a".into(),
                    plan: plan(16),
                    records: vec![ok("c/w-ctx1-c1", 100.0)],
                },
                RunResults {
                    name: "runs/b".into(),
                    plan: plan(128),
                    records: vec![ok("c/w-ctx1-c1", 111.7)],
                },
            ];
            compare(&two, metric, 2.0, force)
        };
        let unforced = runs(false);
        assert!(!unforced.rows[0].comparable);
        assert_eq!(unforced.rows[0].deltas[0], None);
        let t = table(&unforced, metric);
        assert!(t.contains("The plans differ"), "{t}");
        assert!(
            t.contains("workload code: max_tokens 16 in runs/a but 128 in runs/b"),
            "{t}"
        );
        assert!(t.contains("≠ workload") && !t.contains("better"), "{t}");
        let md = markdown(&unforced, metric);
        assert!(md.contains("- workload code: max_tokens 16"), "{md}");
        let forced = runs(true);
        assert!(table(&forced, metric).contains("+11.7% better"));
        assert!(table(&forced, metric).contains("compared anyway (--force)"));
        // A cell id or run name is never raw HTML in the Markdown.
        let mut hostile = cmp.clone();
        hostile.rows[0].cell = "c/<svg/onload=x>".into();
        hostile.runs[0] = "runs/<b>a</b>".into();
        let md = markdown(&hostile, metric);
        assert!(!md.contains("<svg") && !md.contains("<b>"), "{md}");
        assert!(md.contains("c/&lt;svg/onload=x&gt;"), "{md}");
    }

    #[test]
    fn cells_read_in_number_order_with_a_summary_first_and_transitions_named() {
        let metric = Metric::by_key("output_tok_s").unwrap();
        let mut crashed = sample_record("c/w-ctx8192-c1", Status::Failed, "");
        crashed.failure = Some(Failure::new(
            FailureKind::CudaIllegalInstruction,
            FailureSource::ServerLog,
            "boom",
        ));
        let a = RunResults {
            name: "a".into(),
            plan: None,
            records: vec![
                ok("c/w-ctx32768-c1", 1.0),
                ok("c/w-ctx8192-c1", 100.0),
                ok("c/w-ctx1024-c1", 100.0),
                ok("c/w-ctx1024-c12", 100.0),
                ok("c/w-ctx1024-c4", 100.0),
            ],
        };
        let b = RunResults {
            name: "b".into(),
            plan: None,
            records: vec![
                ok("c/w-ctx32768-c1", 5.0),
                crashed,
                ok("c/w-ctx1024-c1", 120.0),
                ok("c/w-ctx1024-c12", 80.0),
                ok("c/w-ctx1024-c4", 100.5),
            ],
        };
        let cmp = compare(
            &[
                a,
                RunResults {
                    name: b.name.clone(),
                    plan: None,
                    records: b.records.clone(),
                },
            ],
            metric,
            2.0,
            false,
        );
        let order: Vec<&str> = cmp.rows.iter().map(|r| r.cell.as_str()).collect();
        assert_eq!(
            order,
            [
                "c/w-ctx1024-c1",
                "c/w-ctx1024-c4",
                "c/w-ctx1024-c12",
                "c/w-ctx8192-c1",
                "c/w-ctx32768-c1"
            ]
        );
        let t = table(&cmp, metric);
        let first = t.lines().nth(2).unwrap();
        assert_eq!(
            first, "2 better, 1 worse, 1 within noise, 1 newly failing",
            "{t}"
        );
        assert!(t.contains("newly failing"), "{t}");
        // A skip then a value: the change is named, not left blank.
        let a2 = RunResults {
            name: "a".into(),
            plan: None,
            records: vec![sample_record("c/w-ctx32768-c1", Status::Skipped, "")],
        };
        let b2 = RunResults {
            name: "b".into(),
            plan: None,
            records: vec![ok("c/w-ctx32768-c1", 5.0)],
        };
        let cmp = compare(&[a2, b2], metric, 2.0, false);
        assert_eq!(cmp.summaries[0].newly_ok, 1);
        assert!(table(&cmp, metric).contains("newly ok"));
    }
}
