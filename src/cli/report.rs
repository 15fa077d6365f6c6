//! `sweeptop report RUN_DIR... [-o FILE]`: one self-contained HTML report of
//! one or more runs (a comparison first when several).

use std::path::PathBuf;
use std::sync::Arc;

use super::{user, Context, Result};
use crate::export::report::{self, RunReport};
use crate::plan::Plan;
use crate::store;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// One or more run directories; several are compared cell by cell first.
    #[arg(required = true, num_args = 1.., value_name = "RUN_DIR")]
    runs: Vec<PathBuf>,
    /// Where to write the HTML (default: report.html in the first run
    /// directory); `-` for standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

pub fn report(args: ReportArgs) -> Result<u8> {
    let mut runs = Vec::new();
    for dir in &args.runs {
        if !dir.join(store::RESULTS).exists() {
            return Err(user(format!(
                "{} has no {}: is it a run directory? (see `sweeptop ls`)",
                dir.display(),
                store::RESULTS
            )));
        }
        let mut results = store::read_results(dir).map_err(super::store_error)?;
        let plan = Plan::load(&dir.join(store::PLAN)).ok().map(Arc::new);
        if let Some(plan) = &plan {
            results.only_cells(plan.cells.iter().map(|c| c.id.as_str()));
        }
        for p in &results.problems {
            eprintln!("warning: {}: {p}", dir.display());
        }
        runs.push(RunReport {
            dir: dir.display().to_string(),
            plan,
            meta: store::run_meta(dir),
            records: results.records,
            servers: store::read_servers(dir),
        });
    }
    let html = report::html(&runs);
    let out = args
        .output
        .unwrap_or_else(|| args.runs[0].join("report.html"));
    if out.as_os_str() == "-" {
        super::print(&html)?;
        return Ok(0);
    }
    // Written beside, then renamed: a reader never sees half a report.
    let tmp = out.with_extension("html.tmp");
    std::fs::write(&tmp, &html).context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &out).context(|| format!("cannot write {}", out.display()))?;
    super::print(&format!(
        "report written to {} ({} KB)\n",
        out.display(),
        html.len().div_ceil(1024)
    ))?;
    Ok(0)
}
