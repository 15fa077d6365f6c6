//! The Markdown export, made to paste into a pull request: what was measured,
//! the dashboard's grid in its main values, failures and warnings, every
//! metric of every cell, and what was benchmarked.

use std::fmt::Write as _;
use std::sync::Arc;

use super::Servers;
use crate::model::text;
use crate::model::{CellRecord, Failure, Metric, ServerMeta, METRICS};
use crate::plan::Plan;
use crate::view::grid::{CellView, Grid, Row, ValueMode};
use crate::view::replay;
use crate::view::state::ViewState;

/// Text as one Markdown table cell: control characters shown, a pipe that
/// would end the cell escaped, and `&`, `<`, `>` as entities, so a server's
/// words (a model name, a failure message) can never become HTML where the
/// table is rendered.
pub(super) fn md_cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in text::display(s).chars() {
        match c {
            '|' => out.push_str("\\|"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// One grid table in `mode` (`first`: the table the export has always
/// started with, introduced as such).
fn md_grid(s: &mut String, view: &ViewState, grid: &Grid, mode: ValueMode, first: bool) {
    let title = mode.title();
    let mut chars = title.chars();
    let title: String = chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default();
    if first {
        let _ = writeln!(s, "{title} per cell (failed cells show why).\n");
    } else {
        let _ = writeln!(s, "\n{title} per cell.\n");
    }
    let mut header = String::from("| phase | config |");
    let mut rule = String::from("|---|---|");
    for c in &grid.columns {
        let _ = write!(header, " {} {} |", md_cell(&c.workload), c.label());
        rule.push_str("---:|");
    }
    let _ = writeln!(s, "{header}\n{rule}");
    for row in &grid.rows {
        let Row::Config(i) = row else { continue };
        let cfg = &grid.configs[*i];
        let _ = write!(s, "| {} | {} |", md_cell(&cfg.phase), md_cell(&cfg.id));
        for col in 0..grid.columns.len() {
            let cell = match grid.cell(view, mode, *i, col) {
                CellView::Running | CellView::Queued => CellView::Pending,
                other => other,
            };
            let _ = write!(s, " {} |", md_cell(cell.label()));
        }
        s.push('\n');
    }
}

/// A metadata line, the grid (rows: configs by phase; columns: workload ×
/// context × concurrency) with the dashboard's labels in the value, the
/// speedup and the latencies, then failures, warnings and every metric.
pub fn markdown(plan: Option<Arc<Plan>>, records: &[CellRecord], servers: &Servers) -> String {
    let view = replay::from_records(plan, records);
    let grid = Grid::build(&view);
    let mut s = String::new();
    if !view.plan_name.is_empty() {
        let _ = writeln!(s, "# {}\n", md_cell(&view.plan_name));
    }
    about(&mut s, records, servers);
    // The value, the speedup against each phase's baseline, then latency.
    for (n, mode) in [
        Some(ValueMode::default()),
        Some(ValueMode::speedup()),
        Metric::by_key("ttft_ms_p50").map(ValueMode::Metric),
        Metric::by_key("itl_ms_p50").map(ValueMode::Metric),
    ]
    .into_iter()
    .flatten()
    .enumerate()
    {
        md_grid(&mut s, &view, &grid, mode, n == 0);
    }
    let mut ordered: Vec<&CellRecord> = records.iter().collect();
    ordered.sort_by(|a, b| a.cell.cmp(&b.cell));
    failures_and_warnings(&mut s, &ordered);
    every_metric(&mut s, &ordered);
    benchmarked(&mut s, servers);
    s
}

/// What this is, in one paragraph: a table pasted into a pull request
/// must say what it measured.
fn about(s: &mut String, records: &[CellRecord], servers: &Servers) {
    let mut about: Vec<String> = Vec::new();
    // Each thing once, in a stable order, named when there is any.
    let mut say = |what: &str, values: Vec<String>| {
        let set: std::collections::BTreeSet<String> = values.into_iter().collect();
        if !set.is_empty() {
            about.push(format!(
                "{what} {}",
                set.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    };
    say(
        "server",
        servers.values().map(ServerMeta::server_label).collect(),
    );
    say("model", servers.values().map(|m| m.model.clone()).collect());
    say(
        "GPUs",
        servers
            .values()
            .flat_map(|m| m.gpus.iter())
            .map(|g| g.split_once(": ").map_or(g.as_str(), |x| x.1).to_string())
            .collect(),
    );
    say("host", servers.values().map(|m| m.host.clone()).collect());
    if let (Some(first), Some(last)) = (
        records.iter().map(|r| r.started_at).min(),
        records.iter().map(|r| r.finished_at).max(),
    ) {
        about.push(format!("measured {} to {}", first, last));
    }
    about.push(format!("sweeptop {}", env!("CARGO_PKG_VERSION")));
    let _ = writeln!(s, "{}.\n", md_cell(&about.join("; ")));
}

/// Each failed cell's failure, then each ok cell's warnings: a table each,
/// left out when there is none.
fn failures_and_warnings(s: &mut String, ordered: &[&CellRecord]) {
    type Pick = fn(&CellRecord) -> &[Failure];
    let sections: [(&str, Pick); 2] = [
        ("Failures", |r| r.failure.as_slice()),
        ("Warnings (ok cells to read with care)", |r| {
            r.warnings.as_slice()
        }),
    ];
    for (title, pick) in sections {
        let said: Vec<(&CellRecord, &Failure)> = ordered
            .iter()
            .flat_map(|r| pick(r).iter().map(|f| (*r, f)))
            .collect();
        if said.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "\n## {title}\n\n| cell | kind | message |\n|---|---|---|"
        );
        for (r, f) in said {
            let _ = writeln!(
                s,
                "| {} | {} | {} |",
                md_cell(&r.cell),
                f.kind.as_str(),
                md_cell(&f.message)
            );
        }
    }
}

/// Every metric of every cell, a row per cell with its status in words.
fn every_metric(s: &mut String, ordered: &[&CellRecord]) {
    let _ = writeln!(s, "\n## Every metric\n");
    let mut header = String::from("| cell | status |");
    let mut rule = String::from("|---|---|");
    for m in METRICS {
        let _ = write!(header, " {} |", md_cell(&m.label()));
        rule.push_str("---:|");
    }
    let _ = writeln!(s, "{header}\n{rule}");
    for r in ordered {
        let status = CellView::of_record(r, ValueMode::default(), None, false);
        let status = match &status {
            CellView::Value { .. } => r.status.as_str().to_string(),
            // The value is in its own column: the mark says what it is read with.
            CellView::Flagged {
                mark, badge, value, ..
            } if *mark == format!("{value} {badge}") => format!("ok, {}", badge.to_lowercase()),
            CellView::Flagged { mark, badge, .. } => {
                format!("ok, {} {mark}", badge.to_lowercase())
            }
            other => other.label().to_string(),
        };
        let _ = write!(s, "| {} | {} |", md_cell(&r.cell), md_cell(&status));
        for m in METRICS {
            let v = r.metrics.as_ref().map(|v| m.human(v)).unwrap_or_default();
            let _ = write!(s, " {} |", md_cell(&v));
        }
        s.push('\n');
    }
}

/// What each config benchmarked, when the run recorded it.
fn benchmarked(s: &mut String, servers: &Servers) {
    if servers.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## What was benchmarked\n");
    let names: Vec<&str> = ServerMeta::default()
        .rows()
        .iter()
        .map(|(k, _)| *k)
        .collect();
    let _ = writeln!(
        s,
        "| config | {} |\n|---|{}",
        names.join(" | "),
        "---|".repeat(names.len())
    );
    for (config, meta) in servers {
        let values: Vec<String> = meta.rows().iter().map(|(_, v)| md_cell(v)).collect();
        let _ = writeln!(s, "| {} | {} |", md_cell(config), values.join(" | "));
    }
}
