//! `sweeptop report RUN_DIR... [-o FILE]`: one self-contained HTML report of
//! one or more runs (a comparison first when several).

use std::path::PathBuf;

use super::{Context, Result};
use crate::export::report::{self, RunReport};
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
        let (plan, results) = super::read_run(dir)?;
        runs.push(RunReport {
            dir: dir.display().to_string(),
            plan,
            meta: store::run_meta(dir),
            records: results.records,
            servers: store::read_servers(dir),
            prepared: report::prepared(&store::read_events(dir)),
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
