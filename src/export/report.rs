//! `sweeptop report RUN_DIR… [-o report.html]`: one self-contained HTML file
//! (inline CSS and SVG, no script, nothing fetched) that answers from a run:
//! what was benchmarked, the grid in every value, charts of throughput,
//! speedup and latency against concurrency, the throughput–latency curve,
//! and every failure with its evidence. All server text is escaped: it is
//! untrusted. Readable in light and dark, printable.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use super::Servers;
use crate::model::{CellRecord, Metric, RunMeta, Status};
use crate::plan::Plan;
use crate::view::grid::{CellView, Grid, Row, Tone, ValueMode};
use crate::view::replay;

/// One run as the report reads it.
pub struct RunReport {
    /// The run directory, as given.
    pub dir: String,
    pub plan: Option<Arc<Plan>>,
    pub meta: Option<RunMeta>,
    /// The latest record of each cell.
    pub records: Vec<CellRecord>,
    pub servers: Servers,
}

/// HTML-escaped text: safe in element content and in quoted attributes.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters (escape sequences) are shown, not passed on.
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

const CSS: &str = r#"
:root{--bg:#fff;--fg:#1b1f24;--dim:#57606a;--line:#d0d7de;--ok:#1a7f37;--bad:#cf222e;--warn:#9a6700;--other:#bc4c00;--base:#0969da;--card:#f6f8fa}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--dim:#8b949e;--line:#30363d;--ok:#3fb950;--bad:#f85149;--warn:#d29922;--other:#db6d28;--base:#58a6ff;--card:#161b22}}
body{background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em}
h1{font-size:1.6em}h2{border-bottom:1px solid var(--line);padding-bottom:.2em;margin-top:2em}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.6em 0;font-variant-numeric:tabular-nums}
td,th{border:1px solid var(--line);padding:.25em .55em;text-align:right;white-space:nowrap}
th{background:var(--card)}td.l,th.l{text-align:left}
.better{color:var(--ok)}.worse{color:var(--warn)}.baseline{color:var(--base);font-weight:600}
.crash{background:var(--bad);color:#fff;font-weight:600}.failed{color:var(--other);font-weight:600}
.dim{color:var(--dim)}.meta td{text-align:left;white-space:normal}
pre{background:var(--card);border:1px solid var(--line);padding:.6em;overflow-x:auto;font-size:12px}
.charts{display:flex;flex-wrap:wrap;gap:1em}.chart{background:var(--card);border:1px solid var(--line);padding:.4em}
svg text{fill:var(--fg);font:11px system-ui,sans-serif}svg .axis{stroke:var(--dim)}svg .grid{stroke:var(--line)}
@media print{body{margin:0;max-width:none}.chart{break-inside:avoid}details{display:block}details>*{display:block}}
"#;

/// Series colours, readable on light and dark backgrounds.
const PALETTE: [&str; 8] = [
    "#0969da", "#1a7f37", "#bc4c00", "#8250df", "#cf222e", "#1b7c83", "#9a6700", "#bf3989",
];

/// A line chart as inline SVG: each series is a config, x and y numeric.
/// Points are drawn and joined; a series with one point is a dot.
/// A series: its name, its colour (an index into the palette, the same for a
/// config in every chart) and its points.
type Series = (String, usize, Vec<(f64, f64)>);

fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series], log_x: bool) -> String {
    let (w, h) = (420.0, 260.0);
    let (left, right, top, bottom) = (52.0, 12.0, 24.0, 40.0);
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|(_, _, p)| p.iter().copied())
        .collect();
    if pts.is_empty() {
        return String::new();
    }
    let fx = |x: f64| if log_x { x.max(1e-9).log2() } else { x };
    let (mut x0, mut x1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
        (a.min(fx(p.0)), b.max(fx(p.0)))
    });
    if x1 <= x0 {
        x0 -= 1.0;
        x1 += 1.0;
    }
    let y1 = pts.iter().map(|p| p.1).fold(0.0_f64, f64::max) * 1.08;
    let y1 = if y1 > 0.0 { y1 } else { 1.0 };
    let sx = |x: f64| left + (fx(x) - x0) / (x1 - x0) * (w - left - right);
    let sy = |y: f64| top + (1.0 - y / y1) * (h - top - bottom);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<div class="chart"><svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{}" viewBox="0 0 {w} {}" role="img"><title>{}</title>"#,
        h + 18.0 * series.len().div_ceil(2) as f64,
        h + 18.0 * series.len().div_ceil(2) as f64,
        esc(title)
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="14" font-weight="600">{}</text>"#,
        esc(title)
    );
    // Y grid: five lines with labels.
    for k in 0..=4 {
        let y = y1 * f64::from(k) / 4.0;
        let py = sy(y);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{left}" x2="{}" y1="{py:.1}" y2="{py:.1}"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            w - right,
            left - 4.0,
            py + 4.0,
            short(y)
        );
    }
    // X ticks at the distinct x values.
    let mut xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    for x in xs.iter().take(12) {
        let px = sx(*x);
        let _ = write!(
            s,
            r#"<line class="axis" x1="{px:.1}" x2="{px:.1}" y1="{}" y2="{}"/><text x="{px:.1}" y="{}" text-anchor="middle">{}</text>"#,
            h - bottom,
            h - bottom + 4.0,
            h - bottom + 16.0,
            short(*x)
        );
    }
    let _ = write!(
        s,
        r#"<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{}"/><line class="axis" x1="{left}" x2="{}" y1="{}" y2="{}"/>"#,
        h - bottom,
        w - right,
        h - bottom,
        h - bottom
    );
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle" class="dim">{}</text><text x="12" y="{}" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#,
        (left + w - right) / 2.0,
        h - 6.0,
        esc(x_label),
        (top + h - bottom) / 2.0,
        (top + h - bottom) / 2.0,
        esc(y_label)
    );
    for (i, (name, colour, points)) in series.iter().enumerate() {
        let colour = PALETTE[colour % PALETTE.len()];
        let mut p = points.clone();
        p.sort_by(|a, b| a.0.total_cmp(&b.0));
        let path: Vec<String> = p
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", sx(*x), sy(*y)))
            .collect();
        if path.len() > 1 {
            let _ = write!(
                s,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
                path.join(" ")
            );
        }
        for (x, y) in &p {
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{}: {} → {}</title></circle>"#,
                sx(*x),
                sy(*y),
                esc(name),
                short(*x),
                short(*y)
            );
        }
        // Legend, two per row under the plot.
        let lx = left + (i % 2) as f64 * 180.0;
        let ly = h + 4.0 + (i / 2) as f64 * 18.0;
        let _ = write!(
            s,
            r#"<rect x="{lx}" y="{ly}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
            lx + 14.0,
            ly + 9.0,
            esc(name)
        );
    }
    s.push_str("</svg></div>");
    s
}

/// `389`, `1.2k`, `0.85`, `12.5`.
fn short(x: f64) -> String {
    let a = x.abs();
    if a >= 10_000.0 {
        format!("{:.0}k", x / 1000.0)
    } else if a >= 1000.0 {
        format!("{:.1}k", x / 1000.0)
    } else if a >= 100.0 || a == 0.0 || (x.fract() == 0.0 && a >= 1.0) {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// The metric's value of an ok record.
fn number(r: &CellRecord, key: &str) -> Option<f64> {
    let m = Metric::by_key(key)?;
    if r.status != Status::Ok {
        return None;
    }
    r.metrics.as_ref().and_then(|v| m.value(v).number())
}

/// One run's section.
fn run_section(s: &mut String, run: &RunReport) {
    let view = replay::from_records(run.plan.clone(), &run.records);
    let grid = Grid::build(&view);
    let name = if view.plan_name.is_empty() {
        run.dir.clone()
    } else {
        view.plan_name.clone()
    };
    let _ = write!(s, "<h1>{}</h1>", esc(&name));
    metadata(s, run);
    // The grid in every value the dashboard has.
    let _ = write!(s, "<h2>Results</h2>");
    for mode in ValueMode::all() {
        grid_table(s, &view, &grid, mode);
    }
    charts(s, run);
    failures(s, run);
}

fn metadata(s: &mut String, run: &RunReport) {
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
    if !run.servers.is_empty() {
        let _ = write!(
            s,
            "<h3>What was benchmarked</h3><table class=\"meta\"><tr><th class=\"l\">config</th>"
        );
        let heads: Vec<&str> = run
            .servers
            .values()
            .next()
            .map(|m| m.rows().iter().map(|(k, _)| *k).collect())
            .unwrap_or_default();
        for h in &heads {
            let _ = write!(s, r#"<th class="l">{}</th>"#, esc(h));
        }
        s.push_str("</tr>");
        for (config, m) in &run.servers {
            let _ = write!(s, r#"<tr><td>{}</td>"#, esc(config));
            for (_, v) in m.rows() {
                let _ = write!(s, "<td>{}</td>", esc(&v));
            }
            s.push_str("</tr>");
        }
        s.push_str("</table>");
    }
}

fn grid_table(s: &mut String, view: &crate::view::state::ViewState, grid: &Grid, mode: ValueMode) {
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

/// Per workload and context: the value against concurrency, a line per config.
fn charts(s: &mut String, run: &RunReport) {
    type Key = (String, u64);
    let mut groups: BTreeMap<Key, Vec<&CellRecord>> = BTreeMap::new();
    for r in &run.records {
        groups
            .entry((r.workload.clone(), r.context_tokens))
            .or_default()
            .push(r);
    }
    // The phase baseline of each config, for speedups.
    let baseline_of = |config: &str| -> Option<String> {
        let p = run.plan.as_ref()?;
        let phase = &p.config(config)?.phase;
        p.configs
            .iter()
            .find(|c| &c.phase == phase && c.baseline)
            .map(|c| c.id.clone())
    };
    // A config has one colour in every chart: its place among all configs.
    let mut configs: Vec<&str> = run.records.iter().map(|r| r.config.as_str()).collect();
    configs.sort_unstable();
    configs.dedup();
    let colour = |c: &str| configs.iter().position(|x| *x == c).unwrap_or(0);
    let to_series = |by: BTreeMap<String, Vec<(f64, f64)>>| -> Vec<Series> {
        by.into_iter()
            .map(|(name, p)| {
                let c = colour(&name);
                (name, c, p)
            })
            .collect()
    };
    let _ = write!(s, "<h2>Charts</h2>");
    for ((workload, context), records) in &groups {
        let series = |key: &str| -> Vec<Series> {
            let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for r in records {
                if let Some(y) = number(r, key) {
                    by.entry(r.config.clone())
                        .or_default()
                        .push((f64::from(r.concurrency), y));
                }
            }
            to_series(by)
        };
        let speedups: Vec<Series> = {
            let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for r in records {
                let Some(base) = baseline_of(&r.config) else {
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
            to_series(by)
        };
        let curve: Vec<Series> = {
            let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for r in records.iter() {
                if let (Some(itl), Some(t)) = (number(r, "itl_ms_p50"), number(r, "output_tok_s")) {
                    by.entry(r.config.clone()).or_default().push((itl, t));
                }
            }
            to_series(by)
        };
        let ctx = crate::model::thousands(*context);
        let _ = write!(
            s,
            "<h3>{} · {} tokens of prompt</h3><div class=\"charts\">",
            esc(workload),
            esc(&ctx)
        );
        s.push_str(&line_chart(
            "output tok/s",
            "concurrency",
            "tok/s",
            &series("output_tok_s"),
            true,
        ));
        s.push_str(&line_chart(
            "decode tok/s per request (p50)",
            "concurrency",
            "tok/s",
            &series("decode_tok_s_p50"),
            true,
        ));
        s.push_str(&line_chart(
            "speedup × against the phase baseline",
            "concurrency",
            "×",
            &speedups,
            true,
        ));
        s.push_str(&line_chart(
            "TTFT p50",
            "concurrency",
            "ms",
            &series("ttft_ms_p50"),
            true,
        ));
        s.push_str(&line_chart(
            "TTFT p99",
            "concurrency",
            "ms",
            &series("ttft_ms_p99"),
            true,
        ));
        s.push_str(&line_chart(
            "ITL p50",
            "concurrency",
            "ms",
            &series("itl_ms_p50"),
            true,
        ));
        s.push_str(&line_chart(
            "ITL p99",
            "concurrency",
            "ms",
            &series("itl_ms_p99"),
            true,
        ));
        s.push_str(&line_chart(
            "acceptance length",
            "concurrency",
            "tokens",
            &series("accept_len"),
            true,
        ));
        s.push_str(&line_chart(
            "throughput against latency",
            "ITL p50 (ms)",
            "output tok/s",
            &curve,
            false,
        ));
        s.push_str("</div>");
    }
}

fn failures(s: &mut String, run: &RunReport) {
    let mut failed: Vec<&CellRecord> = run
        .records
        .iter()
        .filter(|r| r.status == Status::Failed)
        .collect();
    failed.sort_by(|a, b| a.cell.cmp(&b.cell));
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

/// The whole report; with several runs, a comparison of them first.
pub fn html(runs: &[RunReport]) -> String {
    let mut s = String::with_capacity(64 * 1024);
    let title = runs
        .iter()
        .map(|r| r.plan.as_ref().map_or(r.dir.clone(), |p| p.name.clone()))
        .collect::<Vec<_>>()
        .join(" vs ");
    let _ = write!(
        s,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><meta name=\"color-scheme\" content=\"light dark\"><title>{} · sweeptop report</title><style>{CSS}</style></head><body>",
        esc(&title)
    );
    if runs.len() > 1 {
        let cmp_runs: Vec<super::compare::RunResults> = runs
            .iter()
            .map(|r| super::compare::RunResults {
                name: r.dir.clone(),
                records: r.records.clone(),
            })
            .collect();
        if let Some(metric) = Metric::by_key("output_tok_s") {
            let c = super::compare::compare(&cmp_runs, metric, 2.0);
            let _ = write!(
                s,
                "<h1>Comparison: {}</h1><table><tr>",
                esc(&c.runs.join(" vs "))
            );
            let _ = write!(s, r#"<th class="l">cell</th>"#);
            for (i, r) in c.runs.iter().enumerate() {
                let _ = write!(s, "<th>{}</th>", esc(r));
                if i > 0 {
                    let _ = write!(s, "<th>Δ vs first</th>");
                }
            }
            s.push_str("</tr>");
            for row in &c.rows {
                let _ = write!(s, r#"<tr><td class="l">{}</td>"#, esc(&row.cell));
                for (i, v) in row.values.iter().enumerate() {
                    let text = super::compare::value_text(v, metric);
                    let _ = write!(s, "<td>{}</td>", esc(&text));
                    if i > 0 {
                        let d = &row.deltas[i - 1];
                        let class = match d {
                            Some(d) if !d.within_noise && d.better == Some(true) => "better",
                            Some(d) if !d.within_noise && d.better == Some(false) => "worse",
                            _ => "dim",
                        };
                        let text = super::compare::delta_text(d);
                        let _ = write!(s, r#"<td class="{class}">{}</td>"#, esc(&text));
                    }
                }
                s.push_str("</tr>");
            }
            let _ = write!(
                s,
                "</table><p class=\"dim\">≈: within the cells' measured spread where they were repeated, else ±2 %. {} cells are not in every run.</p>",
                c.only_in.len()
            );
        }
    }
    for run in runs {
        run_section(&mut s, run);
    }
    s.push_str("</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_is_escaped_everywhere() {
        let mut r = crate::model::sample_record("c/w-ctx1-c1", Status::Failed, "");
        r.failure = Some(
            crate::model::Failure::new(
                crate::model::FailureKind::ServerExited,
                crate::model::FailureSource::ServerLog,
                "<script>alert(1)</script> & \u{1b}[31m",
            )
            .with_evidence(vec!["<img src=x onerror=alert(1)>".into()]),
        );
        let page = html(&[RunReport {
            dir: "runs/<x>".into(),
            plan: None,
            meta: None,
            records: vec![r],
            servers: Servers::new(),
        }]);
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains('\u{1b}'));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp;"));
        assert!(page.contains("runs/&lt;x&gt;"));
    }
}
