//! The details popup (Enter in the grid): for a config, what was benchmarked,
//! its cells' counts, its server and its command line; for a cell, its
//! workload, status, timings, failure or warnings with their evidence, and
//! every metric.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::Frame;

use super::popup::{centered, show};
use crate::model::{describe_exit, CellRecord, Failure, Status};
use crate::tui::app::App;
use crate::view::grid::{context_label, CellView, ConfigRow, ValueMode};
use crate::view::state::Server;
use crate::view::text::metric_lines;

pub fn draw(frame: &mut Frame, app: &App, area: Rect, scroll: u16) {
    let Some(config) = app.grid.configs.get(app.ui.sel_config) else {
        return;
    };
    let (title, lines) = match app.ui.sel_col {
        None => (format!(" Config {} ", config.id), config_lines(app, config)),
        Some(col) => {
            let id = app.grid.cell_id(&config.id, col).unwrap_or("").to_string();
            let lines = cell_lines(app, config, col, &id);
            (format!(" Cell {id} "), lines)
        }
    };
    let w = 96.min(area.width.saturating_sub(4));
    let h = (lines.len() as u16 + 2).min(area.height.saturating_sub(2));
    show(frame, app, centered(area, w, h), title, lines, scroll);
}

/// A name and its value, on one line.
fn kv(app: &App, k: &str, v: String) -> Line<'static> {
    let t = app.theme();
    Line::from(vec![
        Span::styled(format!(" {k:<24}"), t.dim),
        Span::styled(v, t.popup),
    ])
}

/// A config: its plan entry, its cells, its server.
fn config_lines(app: &App, config: &ConfigRow) -> Vec<Line<'static>> {
    let mut lines: Vec<Line<'static>> = Vec::new();
    lines.push(kv(app, "phase", config.phase.clone()));
    lines.push(kv(
        app,
        "baseline",
        if config.baseline { "yes" } else { "no" }.into(),
    ));
    if let Some(c) = app.view.plan.as_ref().and_then(|p| p.config(&config.id)) {
        for (k, v) in &c.axes {
            lines.push(kv(app, k, v.clone()));
        }
        lines.push(kv(
            app,
            "GPUs",
            c.gpus
                .as_ref()
                .map(|g| {
                    g.iter()
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_else(|| "all".into()),
        ));
    }
    let mut n = [0usize; 4];
    let cols = app.grid.columns.len();
    for c in 0..cols {
        let rec = app
            .grid
            .cell_id(&config.id, c)
            .and_then(|id| app.view.records.get(id));
        n[match rec.map(|r| r.status) {
            Some(Status::Ok) => 0,
            Some(Status::Failed) => 1,
            Some(Status::Skipped) => 2,
            None => 3,
        }] += 1;
    }
    lines.push(kv(
        app,
        "cells",
        format!(
            "{} ok, {} failed, {} skipped, {} pending",
            n[0], n[1], n[2], n[3]
        ),
    ));
    if app.view.excluded.contains(&config.id) {
        lines.push(kv(app, "excluded", "yes (rest of the sweep)".into()));
    }
    if let Some(meta) = app.view.servers.get(&config.id) {
        lines.push(Line::raw(""));
        for (name, value) in meta.rows() {
            lines.push(kv(app, name, value));
        }
    }
    lines.extend(server_lines(app, &config.id));
    lines
}

/// The config's run: its GPUs, attempt, server state and command line.
fn server_lines(app: &App, config: &str) -> Vec<Line<'static>> {
    let t = app.theme();
    let mut lines = Vec::new();
    let Some(run) = app.view.configs.iter().find(|c| c.id == config) else {
        return lines;
    };
    if !run.gpus.is_empty() {
        let gpus: Vec<String> = run.gpus.iter().map(u32::to_string).collect();
        lines.push(kv(app, "GPUs", gpus.join(",")));
    }
    lines.push(kv(app, "attempt", run.attempt.to_string()));
    lines.push(kv(
        app,
        "server",
        match &run.server {
            Server::Starting => "starting".into(),
            Server::Ready {
                after_s,
                context_limit,
                model,
            } => format!(
                "ready after {after_s:.1} s, model {model}, context {}",
                context_limit
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "unknown".into())
            ),
            Server::Exited { code, signal } => {
                format!("exited by itself ({})", describe_exit(*code, *signal))
            }
            Server::Stopped { how } => format!("stopped ({how})"),
        },
    ));
    lines.push(Line::raw(""));
    lines.push(Line::styled(" command", t.dim));
    lines.push(Line::styled(format!(" {}", run.command), t.popup));
    lines
}

/// A cell: what it asks of the server, then its record (or that it is
/// running or pending).
fn cell_lines(app: &App, config: &ConfigRow, col: usize, id: &str) -> Vec<Line<'static>> {
    let mut lines: Vec<Line<'static>> = Vec::new();
    lines.push(kv(app, "config", config.id.clone()));
    if let Some(c) = app.grid.columns.get(col) {
        lines.push(kv(app, "workload", c.workload.clone()));
        lines.push(kv(
            app,
            "context (target)",
            format!(
                "{} tokens of prompt (`{}` in the column heading)",
                crate::model::thousands(c.context),
                context_label(c.context)
            ),
        ));
        lines.push(kv(
            app,
            "concurrency",
            format!(
                "{} requests in flight (`c{}`)",
                c.concurrency, c.concurrency
            ),
        ));
    }
    match app.selected_record() {
        None => {
            let state = if app.view.is_running(id) {
                "running"
            } else {
                "pending"
            };
            lines.push(kv(app, "status", state.into()));
        }
        Some(r) => lines.extend(record_lines(app, r, col)),
    }
    lines
}

/// A recorded cell: status, timings, what was said about it, its metrics.
fn record_lines(app: &App, r: &CellRecord, col: usize) -> Vec<Line<'static>> {
    let t = app.theme();
    let mut lines = Vec::new();
    let style = match r.status {
        Status::Ok => t.better,
        Status::Failed => t.failed,
        Status::Skipped => t.skipped,
    };
    lines.push(Line::from(vec![
        Span::styled(format!(" {:<24}", "status"), t.dim),
        Span::styled(r.status.as_str().to_string(), style),
    ]));
    lines.push(kv(
        app,
        "started / finished",
        format!(
            "{} / {} ({:.1} s)",
            r.started_at,
            r.finished_at,
            r.duration_s()
        ),
    ));
    if let Some(sp) = r.spread {
        lines.push(kv(
            app,
            "repetitions",
            format!(
                "{}: output tok/s median {:.1}, {:.1} to {:.1}, spread {:.1} % (the values below are the median one's)",
                sp.n, sp.median, sp.min, sp.max, sp.spread_pct
            ),
        ));
    }
    // A failure, or the warnings an ok cell's numbers come with.
    let said = r
        .failure
        .iter()
        .map(|f| ("failure", f))
        .chain(r.warnings.iter().map(|w| ("warning", w)));
    for (what, f) in said {
        lines.extend(failure_lines(app, what, f));
    }
    if let Some(m) = &r.metrics {
        lines.push(Line::raw(""));
        for (name, value) in metric_lines(m, true) {
            lines.push(kv(app, name, value));
        }
        if let CellView::Value { text, .. } | CellView::Flagged { value: text, .. } =
            app.grid
                .cell(&app.view, ValueMode::speedup(), app.ui.sel_config, col)
        {
            lines.push(kv(app, "vs phase baseline", text));
        }
    }
    lines
}

/// A failure or a warning (`what`): its kind, source, message, the context
/// numbers of an overflow, and the log lines that prove it.
fn failure_lines(app: &App, what: &str, f: &Failure) -> Vec<Line<'static>> {
    let t = app.theme();
    let mut lines = vec![Line::raw("")];
    lines.push(kv(
        app,
        what,
        format!("{} ({})", f.kind.describe(), f.kind.as_str()),
    ));
    lines.push(kv(app, "source", f.source.as_str().to_string()));
    lines.push(kv(app, "message", f.message.clone()));
    if let Some(n) = &f.context {
        let num = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_else(|| "?".into());
        lines.push(kv(
            app,
            "context numbers",
            format!(
                "limit {}, prompt {}, output {}, total {}",
                num(n.limit),
                num(n.prompt_tokens),
                num(n.output_tokens),
                num(n.total_tokens)
            ),
        ));
    }
    if !f.evidence.is_empty() {
        lines.push(Line::styled(" evidence", t.dim));
        for e in &f.evidence {
            lines.push(Line::styled(format!("   {e}"), t.log_failure));
        }
    }
    lines
}
