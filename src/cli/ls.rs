//! `sweeptop ls [DIR] [--json]`: run directories, newest first, with their
//! state, start, age, how long they ran, cells done and failed, and the
//! command to attach, resume or export each. Runs of one plan name whose
//! plan files differ are told apart by a short digest of the plan.

use std::path::{Path, PathBuf};

use super::Result;
use crate::model::{RunState, Status, Timestamp};
use crate::plan::Plan;
use crate::store::{self, sweep};

#[derive(clap::Args, Debug)]
pub struct LsArgs {
    /// Where runs are (default ./runs).
    #[arg(default_value = "runs")]
    dir: PathBuf,
    /// The list as JSON (one object per run, newest first).
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
    /// When it stopped: finished, or its last write when interrupted; none
    /// while running.
    pub ended_at: Option<Timestamp>,
    /// Seconds it ran (so far, while running).
    pub ran_s: f64,
    /// SHA-256 of its `plan.toml` (hex), to tell runs of one plan name apart.
    pub plan_sha256: Option<String>,
    pub done: usize,
    pub total: Option<usize>,
    pub failed: usize,
    pub command: String,
    /// A sweep directory's shards (`sweeptop slurm`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shards: Option<Vec<ShardInfo>>,
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

/// A sweep directory: running while a shard runs or waits for its first
/// start, finished when every shard has, interrupted otherwise.
fn sweep_info(dir: &Path) -> Option<RunInfo> {
    let meta = sweep::read_sweep(dir).ok()?;
    let plan = Plan::load(&dir.join(store::PLAN)).ok();
    let mut results = store::read_results(dir).ok().unwrap_or_default();
    if let Some(plan) = &plan {
        results.only_cells(plan.cells.iter().map(|c| c.id.as_str()));
    }
    let shards: Vec<ShardInfo> = (1..=meta.shards)
        .map(|i| {
            let d = sweep::shard_dir(dir, i);
            let total = plan.as_ref().map_or(0, |p| {
                crate::plan::Shard::new(i, meta.shards).map_or(0, |s| p.shard(s).cells.len())
            });
            let left = plan
                .as_ref()
                .map_or(0, |p| super::slurm::cells_left(p, meta.shards, i, &d));
            ShardInfo {
                index: i,
                state: sweep::shard_state(&d),
                done: total - left.min(total),
                total,
            }
        })
        .collect();
    // A shard not started yet waits for its task, unless Slurm says the
    // task is gone (cancelled before it started).
    let pending = shards.iter().any(|s| s.state == sweep::ShardState::Pending);
    let waiting = pending
        && match super::slurm::queued_tasks(&meta) {
            Some(queued) => shards
                .iter()
                .any(|s| s.state == sweep::ShardState::Pending && queued.contains(&s.index)),
            None => true,
        };
    let state = if shards.iter().any(|s| s.state.is_running()) || waiting {
        RunState::Running
    } else if shards
        .iter()
        .all(|s| s.state == sweep::ShardState::Finished)
    {
        RunState::Finished
    } else {
        RunState::Interrupted
    };
    let command = match state {
        RunState::Running => format!("sweeptop attach {}", dir.display()),
        RunState::Finished => format!("sweeptop export {} --format md", dir.display()),
        RunState::Interrupted => format!("sweeptop slurm --resume {}", dir.display()),
    };
    let ended_at = (state != RunState::Running)
        .then(|| {
            sweep::shard_dirs(dir)
                .iter()
                .filter_map(|(_, d)| last_write(d))
                .max()
        })
        .flatten();
    let ran_s = ended_at
        .unwrap_or_else(Timestamp::now)
        .seconds_since(meta.created_at)
        .max(0.0);
    Some(RunInfo {
        dir: dir.to_path_buf(),
        plan: meta.plan,
        state,
        live: state == RunState::Running,
        started_at: meta.created_at,
        ended_at,
        ran_s,
        plan_sha256: store::sha256_file(&dir.join(store::PLAN)).ok(),
        done: results.records.len(),
        total: plan.map(|p| p.cells.len()),
        failed: results
            .records
            .iter()
            .filter(|r| r.status == Status::Failed)
            .count(),
        command,
        shards: Some(shards),
    })
}

fn run_info(dir: &Path) -> Option<RunInfo> {
    if sweep::is_sweep_dir(dir) {
        return sweep_info(dir);
    }
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
    let ended_at = match state {
        RunState::Running => None,
        RunState::Finished => meta.finished_at.or_else(|| last_write(dir)),
        RunState::Interrupted => last_write(dir),
    };
    let ran_s = ended_at
        .unwrap_or_else(Timestamp::now)
        .seconds_since(meta.started_at)
        .max(0.0);
    Some(RunInfo {
        dir: dir.to_path_buf(),
        plan: meta.plan,
        state,
        live,
        started_at: meta.started_at,
        ended_at,
        ran_s,
        plan_sha256: store::sha256_file(&dir.join(store::PLAN)).ok(),
        done: results.records.len(),
        total,
        failed: results
            .records
            .iter()
            .filter(|r| r.status == Status::Failed)
            .count(),
        command,
        shards: None,
    })
}

/// The newest write to the run's events or results: when an interrupted run
/// last did something.
fn last_write(dir: &Path) -> Option<Timestamp> {
    [store::EVENTS, store::RESULTS]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok()?.modified().ok())
        .max()
        .map(Timestamp::from_system_time)
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
    // A sweep directory is listed itself, with its shards.
    let runs = match sweep::is_sweep_dir(&args.dir) {
        true => sweep_info(&args.dir).into_iter().collect(),
        false => list_runs(&args.dir),
    };
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
        shas.entry(r.plan.as_str())
            .or_default()
            .insert(r.plan_sha256.as_deref().unwrap_or(""));
    }
    let plan_name = |r: &RunInfo| match (&r.plan_sha256, shas.get(r.plan.as_str())) {
        (Some(sha), Some(set)) if set.len() > 1 => {
            format!("{}@{}", r.plan, &sha[..sha.len().min(6)])
        }
        _ => r.plan.clone(),
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
            r.state.as_str(),
            plan_name(r),
            r.started_at.minute_text(),
            crate::model::span_text(now.seconds_since(r.started_at)),
            crate::model::span_text(r.ran_s),
            format!("{}/{}", r.done, total),
            r.failed,
            r.dir.display(),
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
    }
    crate::model::text::display_lines(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(plan: &str, sha: &str, state: RunState, started_min: i64) -> RunInfo {
        RunInfo {
            dir: PathBuf::from(format!("runs/{plan}-{started_min}")),
            plan: plan.into(),
            state,
            live: false,
            started_at: Timestamp::from_unix_ms(started_min * 60_000),
            ended_at: None,
            ran_s: 245.0,
            plan_sha256: Some(sha.into()),
            done: 3,
            total: Some(56),
            failed: 1,
            command: "sweeptop run --resume x".into(),
            shards: None,
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
