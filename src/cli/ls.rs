//! `sweeptop ls [DIR] [--json]`: run directories, newest first, with their
//! state, start, age, how long they ran (their active spans), cells done and failed, and the
//! command to attach, resume or export each. Runs of one plan name whose
//! plan files differ are told apart by a short digest of the plan.

use std::path::{Path, PathBuf};

use super::Result;
use crate::model::{RunState, Status, Timestamp};
use crate::plan::Plan;
use crate::store::runs::{self, ListedRun, ListedSweep};
use crate::store::{self, sweep};
use crate::view::shards::cells_left;

/// Where runs are unless told.
const DEFAULT_DIR: &str = "runs";

#[derive(clap::Args, Debug)]
pub struct LsArgs {
    /// Where runs are (default ./runs).
    #[arg(default_value = DEFAULT_DIR)]
    dir: PathBuf,
    /// The list as JSON (one object per run, newest first).
    #[arg(long)]
    json: bool,
}

/// One run directory as `ls` sees it: where it stands, its cells, and the
/// command for it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunInfo {
    #[serde(flatten)]
    pub run: ListedRun,
    pub done: usize,
    pub total: Option<usize>,
    pub failed: usize,
    pub command: String,
    /// A sweep directory's shards (`sweeptop slurm`, or shards run by hand
    /// into one folder).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<Vec<ShardInfo>>,
    /// What is among a sweep's shards but is none of them (ignored).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub foreign: Vec<sweep::Foreign>,
}

/// One shard of a sweep directory.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ShardInfo {
    pub index: u32,
    #[serde(flatten)]
    pub state: sweep::ShardState,
    pub done: usize,
    pub total: usize,
}

/// A listed run with its cells counted from its plan and results.
fn run_info(run: ListedRun) -> RunInfo {
    let plan_path = run
        .sweep
        .as_ref()
        .map_or_else(|| run.dir.join(store::PLAN), |s| s.plan.clone());
    let plan = Plan::load(&plan_path).ok();
    let mut results = store::read_results(&run.dir).ok().unwrap_or_default();
    if let Some(plan) = &plan {
        results.only_cells(plan.cells.iter().map(|c| c.id.as_str()));
    }
    let shards = run.sweep.as_ref().map(|s| shard_infos(s, plan.as_ref()));
    let d = run.dir.display();
    let slurm = run.sweep.as_ref().map(|s| s.slurm);
    let command = match (run.state, slurm) {
        (RunState::Running, _) => format!("sweeptop attach {d}"),
        (RunState::Finished, _) => format!("sweeptop export {d} --format md"),
        (RunState::Interrupted, Some(true)) => format!("sweeptop slurm --resume {d}"),
        // Shards run by hand are resumed by hand, each in its directory.
        (RunState::Interrupted, Some(false)) => format!("sweeptop export {d} --format md"),
        (RunState::Interrupted, None) => format!("sweeptop run --resume {d}"),
    };
    let foreign = run
        .sweep
        .as_ref()
        .map(|s| s.foreign.clone())
        .unwrap_or_default();
    RunInfo {
        done: results.records.len(),
        total: plan.map(|p| p.cells.len()),
        failed: results
            .records
            .iter()
            .filter(|r| r.status == Status::Failed)
            .count(),
        command,
        shards,
        foreign,
        run,
    }
}

/// Each shard of a sweep with its cells done of those the plan gives it
/// (none for a shard whose place something foreign takes).
fn shard_infos(sweep: &ListedSweep, plan: Option<&Plan>) -> Vec<ShardInfo> {
    let count = sweep.meta.shards;
    sweep
        .shards
        .iter()
        .map(|(i, state)| {
            let d = sweep.dirs.iter().find(|(j, _)| j == i).map(|(_, d)| d);
            let total = plan.map_or(0, |p| {
                crate::plan::Shard::new(*i, count).map_or(0, |s| p.shard(s).cells.len())
            });
            let left = match (plan, d) {
                (Some(p), Some(d)) => cells_left(p, count, *i, d),
                _ => total,
            };
            ShardInfo {
                index: *i,
                state: state.clone(),
                done: total - left.min(total),
                total,
            }
        })
        .collect()
}

pub fn ls(args: LsArgs) -> Result<u8> {
    // A sweep directory is listed itself, with its shards (the folder of
    // runs, by default `runs`, is listed as such even when it holds only
    // shard runs).
    let sweep = if args.dir.as_path() == Path::new(DEFAULT_DIR) && !sweep::is_sweep_dir(&args.dir) {
        None
    } else {
        sweep::Sweep::open(&args.dir)
    };
    let listed = match sweep {
        Some(s) => vec![runs::listed_sweep(s)],
        None => runs::list_runs(&args.dir, crate::control::is_live),
    };
    let runs: Vec<RunInfo> = listed.into_iter().map(run_info).collect();
    if args.json {
        super::print(&format!("{}\n", crate::model::text::to_json_pretty(&runs)?))?;
        return Ok(0);
    }
    if runs.is_empty() {
        super::print(&format!("no runs under {}\n", args.dir.display()))?;
        return Ok(0);
    }
    super::print(&table(&runs, Timestamp::now()))?;
    Ok(0)
}

/// The listing: a header, then two lines per run (the facts, then the
/// command for it).
fn table(runs: &[RunInfo], now: Timestamp) -> String {
    use std::collections::{HashMap, HashSet};
    // Plan names used by runs whose plan files differ get a digest.
    let mut shas: HashMap<&str, HashSet<&str>> = HashMap::new();
    for r in runs {
        shas.entry(r.run.plan.as_str())
            .or_default()
            .insert(r.run.plan_sha256.as_deref().unwrap_or(""));
    }
    let plan_name = |r: &RunInfo| match (&r.run.plan_sha256, shas.get(r.run.plan.as_str())) {
        (Some(sha), Some(set)) if set.len() > 1 => {
            format!("{}@{}", r.run.plan, &sha[..sha.len().min(6)])
        }
        _ => r.run.plan.clone(),
    };
    let width = runs
        .iter()
        .map(|r| plan_name(r).chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 40);
    let mut text = format!(
        "{:<11} {:<width$} {:<16}  {:>6}  {:>6}  {:>11}  {:>6}  RUN\n",
        "STATE", "PLAN", "STARTED (UTC)", "AGE", "RAN", "CELLS", "FAILED"
    );
    for r in runs {
        let total = r.total.map_or_else(|| "?".into(), |t| t.to_string());
        text.push_str(&format!(
            "{:<11} {:<width$} {:<16}  {:>6}  {:>6}  {:>11}  {:>6}  {}\n{:<11} {}\n",
            r.run.state.as_str(),
            plan_name(r),
            r.run.started_at.minute_text(),
            crate::model::span_text(now.seconds_since(r.run.started_at)),
            crate::model::span_text(r.run.ran_s),
            format!("{}/{}", r.done, total),
            r.failed,
            r.run.dir.display(),
            "",
            r.command
        ));
        for s in r.shards.iter().flatten() {
            text.push_str(&format!(
                "{:<11}   shard {}: {}, {}/{} cells\n",
                "",
                s.index,
                s.state.text(),
                s.done,
                s.total
            ));
        }
        let shown = |f: &sweep::Foreign| {
            r.shards.iter().flatten().any(|s| {
                Some(s.index) == f.index && matches!(s.state, sweep::ShardState::Foreign { .. })
            })
        };
        for f in r.foreign.iter().filter(|f| !shown(f)) {
            text.push_str(&format!("{:<11}   {}\n", "", f.notice()));
        }
    }
    crate::model::text::display_lines(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(plan: &str, sha: &str, state: RunState, started_min: i64) -> RunInfo {
        RunInfo {
            run: ListedRun {
                dir: PathBuf::from(format!("runs/{plan}-{started_min}")),
                plan: plan.into(),
                state,
                live: false,
                started_at: Timestamp::from_unix_ms(started_min * 60_000),
                ended_at: None,
                ran_s: 245.0,
                plan_sha256: Some(sha.into()),
                sweep: None,
            },
            done: 3,
            total: Some(56),
            failed: 1,
            command: "sweeptop run --resume x".into(),
            shards: None,
            foreign: Vec::new(),
        }
    }

    #[test]
    fn the_listing_has_a_header_times_and_tells_plans_apart() {
        let runs = [
            run("demo", "aaaaaaaa11", RunState::Running, 120),
            run("demo", "bbbbbbbb22", RunState::Interrupted, 60),
            run("other", "cccccccc33", RunState::Finished, 0),
        ];
        let now = Timestamp::from_unix_ms(180 * 60_000);
        let text = table(&runs, now);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].starts_with("STATE"), "{text}");
        assert!(
            lines[0].contains("STARTED (UTC)")
                && lines[0].contains("AGE")
                && lines[0].contains("RAN")
        );
        assert!(lines[1].starts_with("running"), "{text}");
        assert!(lines[1].contains("demo@aaaaaa"), "{text}");
        assert!(lines[1].contains("1970-01-01 02:00"), "{text}");
        assert!(
            lines[1].contains("1h00m") && lines[1].contains("4m05s"),
            "{text}"
        );
        assert!(lines[1].contains("3/56"), "{text}");
        assert!(lines[3].contains("demo@bbbbbb"), "{text}");
        // One run of `other`: no digest.
        assert!(
            lines[5].contains("other ") && !lines[5].contains("other@"),
            "{text}"
        );
        assert!(
            lines[6].trim_start().starts_with("sweeptop run --resume"),
            "{text}"
        );
    }
}
