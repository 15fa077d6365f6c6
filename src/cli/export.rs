//! `sweeptop export DIR --format csv|json|md [-o FILE]`: the results as a file
//! (or on stdout).

use std::path::PathBuf;
use std::sync::Arc;

use super::{user, Context, Result};
use crate::export::{self, Format};
use crate::plan::Plan;
use crate::store;

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// The run directory (see `sweeptop ls`).
    dir: PathBuf,
    /// csv (one row per cell), json (one object per cell) or md (tables to
    /// paste into a pull request).
    #[arg(long, value_enum)]
    format: Format,
    /// Write to this file (atomically) instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

pub fn export(args: ExportArgs) -> Result<u8> {
    let dir = &args.dir;
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
        eprintln!("warning: {p}");
    }
    let servers = store::read_servers(dir);
    let text = export::render(args.format, plan, &results.records, &servers);
    match &args.output {
        Some(p) => std::fs::write(p, text).context(|| format!("cannot write {}", p.display()))?,
        None => super::print(&text)?,
    }
    Ok(0)
}
