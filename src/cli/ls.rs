//! `sweeptop ls [DIR] [--json]`: run directories with their state, cells done
//! and failed, and the command to attach, resume or export each.

use std::path::{Path, PathBuf};

use super::Result;
use crate::model::{RunState, Status, Timestamp};
use crate::plan::Plan;
use crate::store;

#[derive(clap::Args, Debug)]
pub struct LsArgs {
    /// Where runs are (default ./runs).
    #[arg(default_value = "runs")]
    dir: PathBuf,
    #[arg(long)]
    json: bool,
}

/// One run directory as `ls` sees it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunInfo {
    pub dir: PathBuf,
    pub plan: String,
    pub state: RunState,
    /// A sweep answers on its control socket.
    #[serde(skip)]
    pub live: bool,
    pub started_at: Timestamp,
    pub done: usize,
    pub total: Option<usize>,
    pub failed: usize,
    pub command: String,
}

fn run_info(dir: &Path) -> Option<RunInfo> {
    let meta = store::run_meta(dir)?;
    let mut results = store::read_results(dir).ok().unwrap_or_default();
    let plan = Plan::load(&dir.join(store::PLAN)).ok();
    if let Some(plan) = &plan {
        results.only_cells(plan.cells.iter().map(|c| c.id.as_str()));
    }
    let total = plan.map(|p| p.cells.len());
    let live = crate::control::is_live(dir) || store::is_locked(dir);
    let state = match meta.state {
        _ if live => RunState::Running,
        // Recorded as running but nothing answers: it was killed.
        RunState::Running => RunState::Interrupted,
        s => s,
    };
    let command = match state {
        RunState::Running => format!("sweeptop attach {}", dir.display()),
        RunState::Finished => format!("sweeptop export {} --format md", dir.display()),
        RunState::Interrupted => format!("sweeptop run --resume {}", dir.display()),
    };
    Some(RunInfo {
        dir: dir.to_path_buf(),
        plan: meta.plan,
        state,
        live,
        started_at: meta.started_at,
        done: results.records.len(),
        total,
        failed: results
            .records
            .iter()
            .filter(|r| r.status == Status::Failed)
            .count(),
        command,
    })
}

/// Run directories under `root`, newest first.
pub fn list_runs(root: &Path) -> Vec<RunInfo> {
    let mut runs: Vec<RunInfo> = std::fs::read_dir(root)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| run_info(&e.path()))
                .collect()
        })
        .unwrap_or_default();
    runs.sort_by_key(|r| std::cmp::Reverse(r.started_at));
    runs
}

pub fn ls(args: LsArgs) -> Result<u8> {
    let runs = list_runs(&args.dir);
    if args.json {
        super::print(&format!("{}\n", crate::model::text::to_json_pretty(&runs)?))?;
        return Ok(0);
    }
    if runs.is_empty() {
        super::print(&format!("no runs under {}\n", args.dir.display()))?;
        return Ok(0);
    }
    let mut text = String::new();
    for r in &runs {
        let total = r.total.map_or_else(|| "?".into(), |t| t.to_string());
        text.push_str(&format!(
            "{:<12} {:<24} {:>5}/{:<5} cells  {:>3} failed  {}\n             {}\n",
            r.state.as_str(),
            r.plan,
            r.done,
            total,
            r.failed,
            r.dir.display(),
            r.command
        ));
    }
    super::print(&crate::model::text::display_lines(&text))?;
    Ok(0)
}
