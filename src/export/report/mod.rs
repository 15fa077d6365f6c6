//! `sweeptop report RUN_DIR… [-o report.html]`: one self-contained HTML file
//! (inline CSS and SVG, no script, nothing fetched) that answers from a run:
//! what was benchmarked, the grid in every value, charts of throughput,
//! speedup and latency against concurrency, the throughput–latency curve,
//! and every failure with its evidence. All server text is escaped: it is
//! untrusted. Readable in light and dark, printable.
//!
//! Here the page and a run's section; `tables`, `charts` (drawn by `svg`)
//! and, with several runs, `comparison` write their parts.

mod charts;
mod comparison;
mod svg;
mod tables;

use std::fmt::Write as _;
use std::sync::Arc;

use super::Servers;
use crate::model::{CellRecord, RunMeta};
use crate::plan::Plan;
use crate::view::grid::{Grid, ValueMode};
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
    /// The prepare steps that ran or were found in place, in order.
    pub prepared: Vec<Prepared>,
}

/// A prepare step's end, as the run recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub at: crate::model::Timestamp,
    pub step: String,
    pub outcome: crate::model::PrepareOutcome,
    pub bytes: u64,
    pub duration_s: f64,
    pub message: Option<String>,
}

/// The prepare steps' ends among a run's events.
pub fn prepared(events: &[crate::model::Event]) -> Vec<Prepared> {
    events
        .iter()
        .filter_map(|ev| match ev {
            crate::model::Event::PrepareEnded {
                at,
                step,
                outcome,
                bytes,
                duration_s,
                message,
                ..
            } => Some(Prepared {
                at: *at,
                step: step.clone(),
                outcome: *outcome,
                bytes: *bytes,
                duration_s: *duration_s,
                message: message.clone(),
            }),
            _ => None,
        })
        .collect()
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
    tables::metadata(s, run);
    // The grid in every value the dashboard has.
    let _ = write!(s, "<h2>Results</h2>");
    for mode in ValueMode::all() {
        tables::grid_table(s, &view, &grid, mode);
    }
    charts::charts(s, run);
    tables::failures(s, run);
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
        comparison::comparison(&mut s, runs);
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
    use crate::model::Status;

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
            prepared: Vec::new(),
        }]);
        assert!(!page.contains("<script>"), "{page}");
        assert!(!page.contains("<img"), "{page}");
        assert!(!page.contains('\u{1b}'));
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt; &amp;"));
        assert!(page.contains("runs/&lt;x&gt;"));
    }

    #[test]
    fn what_was_benchmarked_says_what_configs_share_once_and_groups_the_rest_in_plan_order() {
        let plan = crate::plan::Plan::parse(
            std::path::Path::new(crate::plan::DEMO_PATH),
            crate::plan::DEMO_PLAN,
        )
        .unwrap();
        let meta = |command: &str| crate::model::ServerMeta {
            kind: "sglang".into(),
            version: Some("0.5.6".into()),
            model: "qwen".into(),
            command: command.into(),
            host: "node1".into(),
            sweeptop_version: "0.1.0".into(),
            ..Default::default()
        };
        let ids: Vec<&str> = plan.configs.iter().map(|c| c.id.as_str()).collect();
        // Named out of plan order; two configs ran the same command.
        let mut servers = Servers::new();
        servers.insert(ids[2].to_string(), meta("serve --b"));
        servers.insert(ids[0].to_string(), meta("serve --a"));
        servers.insert(ids[1].to_string(), meta("serve --a"));
        let page = html(&[RunReport {
            dir: "runs/x".into(),
            plan: Some(std::sync::Arc::new(plan.clone())),
            meta: None,
            records: Vec::new(),
            servers,
            prepared: Vec::new(),
        }]);
        let at = page
            .find("<h3>What was benchmarked</h3>")
            .expect("the section");
        let section = &page[at..];
        // Shared once.
        assert!(section.contains("every config (3)"), "{section}");
        assert_eq!(section.matches("sglang 0.5.6").count(), 1, "{section}");
        assert_eq!(section.matches("node1").count(), 1, "{section}");
        // The rest: configs alike on one row, in plan order.
        let a = section
            .find(&format!(
                "<td>{}, {}</td><td>serve --a</td>",
                ids[0], ids[1]
            ))
            .expect("the two configs of one command on one row");
        let b = section
            .find(&format!("<td>{}</td><td>serve --b</td>", ids[2]))
            .expect("the other");
        assert!(a < b);
        // No records: no chart, and no heading without one under it.
        assert!(!page.contains("<h2>Charts</h2>"), "{page}");
        assert!(!page.contains("<h3>code"), "{page}");
    }
}
