//! A run's tables in the report: what was run and benchmarked, the grid in
//! a value the dashboard has, and every failure with its evidence.

use std::fmt::Write as _;

use super::{esc, RunReport};
use crate::model::{CellRecord, Status};
use crate::view::grid::{CellView, Grid, Row, Tone, ValueMode};
use crate::view::state::ViewState;

/// The run and its plan in a few rows, then what each config benchmarked.
pub(super) fn metadata(s: &mut String, run: &RunReport) {
    let mut rows: Vec<(String, String)> = vec![("run directory".into(), run.dir.clone())];
    if let Some(p) = &run.plan {
        rows.push(("plan".into(), p.name.clone()));
        if let Some(d) = &p.description {
            rows.push(("description".into(), d.clone()));
        }
        rows.push((
            "matrix".into(),
            format!("{} configs, {} cells", p.configs.len(), p.cells.len()),
        ));
    }
    if let Some(m) = &run.meta {
        rows.push(("state".into(), m.state.as_str().to_string()));
        rows.push(("started".into(), m.started_at.to_string()));
        if let Some(f) = m.finished_at {
            rows.push(("finished".into(), f.to_string()));
            rows.push((
                "duration".into(),
                crate::model::span_text(f.seconds_since(m.started_at)),
            ));
        }
        rows.push(("sweeptop".into(), m.sweeptop_version.clone()));
    }
    let n = |st: Status| run.records.iter().filter(|r| r.status == st).count();
    rows.push((
        "cells".into(),
        format!(
            "{} ok, {} failed, {} skipped",
            n(Status::Ok),
            n(Status::Failed),
            n(Status::Skipped)
        ),
    ));
    s.push_str(r#"<table class="meta">"#);
    for (k, v) in &rows {
        let _ = write!(
            s,
            r#"<tr><th class="l">{}</th><td>{}</td></tr>"#,
            esc(k),
            esc(v)
        );
    }
    s.push_str("</table>");
    prepared(s, run);
    benchmarked(s, run);
}

/// What each config benchmarked, in plan order: what every config shares
/// once, then a row per group of configs alike in the rest.
fn benchmarked(s: &mut String, run: &RunReport) {
    if run.servers.is_empty() {
        return;
    }
    let mut order: Vec<&str> = run
        .plan
        .as_ref()
        .map(|p| {
            p.configs
                .iter()
                .map(|c| c.id.as_str())
                .filter(|c| run.servers.contains_key(*c))
                .collect()
        })
        .unwrap_or_default();
    for c in run.servers.keys() {
        if !order.contains(&c.as_str()) {
            order.push(c);
        }
    }
    let rows: Vec<(&str, Vec<(&'static str, String)>)> = order
        .iter()
        .filter_map(|c| Some((*c, run.servers.get(*c)?.rows())))
        .collect();
    let Some((_, first)) = rows.first() else {
        return;
    };
    let heads: Vec<&'static str> = first.iter().map(|(k, _)| *k).collect();
    let shared: Vec<bool> = (0..heads.len())
        .map(|i| rows.iter().all(|(_, r)| r.get(i) == first.get(i)))
        .collect();
    let _ = write!(s, "<h3>What was benchmarked</h3>");
    if shared.iter().any(|&x| x) {
        let every = match rows.len() {
            1 => format!("config {}", rows[0].0),
            n => format!("every config ({n})"),
        };
        let _ = write!(
            s,
            r#"<table class="meta"><tr><th class="l" colspan="2">{}</th></tr>"#,
            esc(&every)
        );
        for (i, (k, v)) in first.iter().enumerate() {
            if shared[i] {
                let _ = write!(
                    s,
                    r#"<tr><th class="l">{}</th><td>{}</td></tr>"#,
                    esc(k),
                    esc(v)
                );
            }
        }
        s.push_str("</table>");
    }
    if shared.iter().all(|&x| x) {
        return;
    }
    // The rest, configs alike in it on one row (in the order they come).
    let mut groups: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
    for (config, r) in &rows {
        let values: Vec<&str> = r
            .iter()
            .enumerate()
            .filter(|(i, _)| !shared[*i])
            .map(|(_, (_, v))| v.as_str())
            .collect();
        match groups.iter_mut().find(|(_, v)| *v == values) {
            Some((configs, _)) => configs.push(config),
            None => groups.push((vec![config], values)),
        }
    }
    s.push_str(r#"<table class="meta"><tr><th class="l">configs</th>"#);
    for (i, h) in heads.iter().enumerate() {
        if !shared[i] {
            let _ = write!(s, r#"<th class="l">{}</th>"#, esc(h));
        }
    }
    s.push_str("</tr>");
    for (configs, values) in &groups {
        let _ = write!(s, "<tr><td>{}</td>", esc(&configs.join(", ")));
        for v in values {
            let _ = write!(s, "<td>{}</td>", esc(v));
        }
        s.push_str("</tr>");
    }
    s.push_str("</table>");
}

/// The prepare steps: when each ended, how, what it put in place, how long.
fn prepared(s: &mut String, run: &RunReport) {
    use crate::model::text::{bytes, duration};
    use crate::model::PrepareOutcome;
    if run.prepared.is_empty() {
        return;
    }
    s.push_str(
        "<h3>Prepare steps</h3><table class=\"meta\"><tr><th class=\"l\">step</th>\
         <th class=\"l\">ended</th><th class=\"l\">outcome</th><th>bytes</th><th>took</th></tr>",
    );
    for p in &run.prepared {
        let outcome = match (p.outcome, &p.message) {
            (PrepareOutcome::Present, _) => "in place already".to_string(),
            (PrepareOutcome::Done, _) => "done".to_string(),
            (PrepareOutcome::Failed, Some(m)) => format!("failed: {m}"),
            (PrepareOutcome::Failed, None) => "failed".to_string(),
        };
        let _ = write!(
            s,
            r#"<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(&p.step),
            esc(&p.at.to_string()),
            esc(&outcome),
            esc(&bytes(p.bytes)),
            esc(&duration(p.duration_s))
        );
    }
    s.push_str("</table>");
}

/// The grid in `mode`, toned as the dashboard tones it.
pub(super) fn grid_table(s: &mut String, view: &ViewState, grid: &Grid, mode: ValueMode) {
    let _ = write!(
        s,
        r#"<h3>{}</h3><table class="grid"><tr><th class="l">config</th>"#,
        esc(&mode.title())
    );
    for c in &grid.columns {
        let _ = write!(s, "<th>{} {}</th>", esc(&c.workload), esc(&c.label()));
    }
    s.push_str("</tr>");
    for row in &grid.rows {
        match row {
            Row::Phase(p) => {
                let _ = write!(
                    s,
                    r#"<tr><th class="l" colspan="{}">phase {}</th></tr>"#,
                    grid.columns.len() + 1,
                    esc(p)
                );
            }
            Row::Config(i) => {
                let cfg = &grid.configs[*i];
                let _ = write!(s, r#"<tr><td class="l">{}</td>"#, esc(&cfg.id));
                for col in 0..grid.columns.len() {
                    let (class, text) = match grid.cell(view, mode, *i, col) {
                        CellView::Failed { label, crash, .. } => {
                            (if crash { "crash" } else { "failed" }, label)
                        }
                        CellView::Value { text, tone } => (
                            match tone {
                                Tone::Better => "better",
                                Tone::Worse => "worse",
                                Tone::Baseline => "baseline",
                                Tone::Plain => "",
                            },
                            text,
                        ),
                        CellView::Flagged { label, .. } => ("worse", label),
                        CellView::Running | CellView::Queued | CellView::Pending => {
                            ("dim", "·".into())
                        }
                        other => ("dim", other.label().to_string()),
                    };
                    let _ = write!(s, r#"<td class="{class}">{}</td>"#, esc(&text));
                }
                s.push_str("</tr>");
            }
        }
    }
    s.push_str("</table>");
}

/// Every failed cell: its kind, its message and the log lines that prove it.
pub(super) fn failures(s: &mut String, run: &RunReport) {
    let mut failed: Vec<&CellRecord> = run
        .records
        .iter()
        .filter(|r| r.status == Status::Failed)
        .collect();
    // In the plan's order of cells (by id when the plan is not there).
    let rank = |cell: &str| {
        run.plan
            .as_ref()
            .and_then(|p| p.cells.iter().position(|c| c.id == cell))
            .unwrap_or(usize::MAX)
    };
    failed.sort_by(|a, b| rank(&a.cell).cmp(&rank(&b.cell)).then(a.cell.cmp(&b.cell)));
    let _ = write!(s, "<h2>Failures ({})</h2>", failed.len());
    if failed.is_empty() {
        s.push_str("<p class=\"dim\">none</p>");
        return;
    }
    s.push_str(r#"<table class="failures"><tr><th class="l">cell</th><th class="l">kind</th><th class="l">message and evidence</th></tr>"#);
    for r in failed {
        let Some(f) = &r.failure else { continue };
        let class = if f.kind.severity() >= 3 {
            "crash"
        } else {
            "failed"
        };
        let _ = write!(
            s,
            r#"<tr><td class="l">{}</td><td class="l {class}">{}</td><td class="l" style="white-space:normal">{}"#,
            esc(&r.cell),
            esc(f.kind.badge()),
            esc(&f.message)
        );
        if !f.evidence.is_empty() {
            let _ = write!(
                s,
                "<details><summary>evidence ({} lines)</summary><pre>{}</pre></details>",
                f.evidence.len(),
                esc(&f.evidence.join("\n"))
            );
        }
        s.push_str("</td></tr>");
    }
    s.push_str("</table>");
}
