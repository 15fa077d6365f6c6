//! `sweeptop export DIR --format csv|json|md [-o FILE]`: the results as a file
//! (or on stdout).

use std::path::PathBuf;

use super::{Context, Result};
use crate::export::{self, Format};
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
    let (plan, results) = super::read_run(dir)?;
    let servers = store::read_servers(dir);
    let text = export::render(args.format, plan, &results.records, &servers);
    match &args.output {
        Some(p) => std::fs::write(p, text).context(|| format!("cannot write {}", p.display()))?,
        None => super::print(&text)?,
    }
    Ok(0)
}
