//! `sweeptop open DIR`: the dashboard over a recorded run, read-only; without a
//! terminal, the grid as Markdown (as `export --format md`).

use std::io::IsTerminal;
use std::path::PathBuf;

use super::{Context, Result, ViewArgs};
use crate::export::{self, Format};
use crate::view::replay;

#[derive(clap::Args, Debug)]
pub struct OpenArgs {
    /// The run directory.
    dir: PathBuf,
    #[command(flatten)]
    view: ViewArgs,
}

pub fn open(args: OpenArgs) -> Result<u8> {
    let mut view = replay::load_run(&args.dir).map_err(super::store_error)?;
    if !crate::control::is_live(&args.dir) {
        // A run killed mid-step never said the step's end: nothing prepares now.
        view.preparing.clear();
    }
    for notice in crate::store::sweep::Sweep::open(&args.dir)
        .map(|s| s.notices())
        .unwrap_or_default()
    {
        eprintln!("warning: {}: {notice}", args.dir.display());
    }
    if !std::io::stdout().is_terminal() {
        let mut records: Vec<_> = view.records.values().cloned().collect();
        records.sort_by(|a, b| a.cell.cmp(&b.cell));
        super::print(&export::render(
            Format::Md,
            view.plan.clone(),
            &records,
            &view.servers,
        ))?;
        return Ok(0);
    }
    let show_gpu = view
        .gpu
        .status()
        .is_some_and(|s| *s != crate::model::GpuStatus::Disabled);
    let setup = args.view.setup(show_gpu)?;
    let warning = crate::control::is_live(&args.dir).then(|| {
        let pid = crate::store::read_meta(&args.dir)
            .map(|m| format!(" (pid {})", m.pid))
            .unwrap_or_default();
        format!("this run is still going{pid}: what you see is a snapshot")
    });
    let (code, retry) = crate::tui::show_recorded(view, args.dir.clone(), setup, warning)
        .context(|| "cannot use the terminal".into())?;
    if let Some(targets) = retry {
        return super::run::retry_here(&args.dir, &targets);
    }
    Ok(u8::try_from(code).unwrap_or(1))
}
