//! With several runs, the report opens on their comparison: each cell's
//! output tok/s in every run and its change against the first, as
//! `sweeptop compare` reads them.

use std::fmt::Write as _;

use super::{esc, RunReport};
use crate::export::compare::{compare, delta_text, value_text, RunResults, NOT_COMPARABLE};
use crate::model::Metric;

/// The comparison table, and how many cells are not in every run.
pub(super) fn comparison(s: &mut String, runs: &[RunReport]) {
    let cmp_runs: Vec<RunResults> = runs
        .iter()
        .map(|r| RunResults {
            name: r.dir.clone(),
            plan: r.plan.clone(),
            records: r.records.clone(),
        })
        .collect();
    let Some(metric) = Metric::by_key("output_tok_s") else {
        return;
    };
    let c = compare(&cmp_runs, metric, 2.0, false);
    let _ = write!(s, "<h1>Comparison: {}</h1>", esc(&c.runs.join(" vs ")));
    for d in &c.settings.differ {
        let _ = write!(
            s,
            r#"<p class="worse">The plans differ: workload {} asks for {} {} in {} but {} in {}; its cells are not comparable.</p>"#,
            esc(&d.workload),
            esc(&d.setting),
            esc(&d.first),
            esc(&c.runs[0]),
            esc(&d.value),
            esc(&d.run)
        );
    }
    s.push_str("<table><tr>");
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
            let text = value_text(v, metric);
            let _ = write!(s, "<td>{}</td>", esc(&text));
            if i > 0 {
                let d = &row.deltas[i - 1];
                let class = match d {
                    Some(d) if !d.within_noise && d.better == Some(true) => "better",
                    Some(d) if !d.within_noise && d.better == Some(false) => "worse",
                    _ => "dim",
                };
                let text = if row.comparable {
                    delta_text(d)
                } else {
                    NOT_COMPARABLE.to_string()
                };
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
