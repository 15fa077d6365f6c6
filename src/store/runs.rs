//! The runs under a folder (`./runs` by default) and where each stands:
//! what `ls` lists, and where `attach` finds the newest running sweep. A
//! sweep directory is one entry, standing as its shards do.

use std::path::{Path, PathBuf};

use super::file::sha256_file;
use super::lock::is_locked;
use super::meta::run_meta;
use super::sweep::{queued_tasks, Foreign, ShardState, Sweep, SweepMeta};
use super::{EVENTS, PLAN, RESULTS};
use crate::model::{RunState, Timestamp};

/// One run directory (or sweep directory) and where it stands.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ListedRun {
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
    /// A sweep directory's `sweep.json` and its shards.
    #[serde(skip)]
    pub sweep: Option<ListedSweep>,
}

/// A sweep directory's record and where each of its shards stands.
#[derive(Debug, Clone)]
pub struct ListedSweep {
    pub meta: SweepMeta,
    /// Every shard of the sweep, by index from 1.
    pub shards: Vec<(u32, ShardState)>,
    /// Where each shard's run directory is (or will be), by index.
    pub dirs: Vec<(u32, PathBuf)>,
    /// What is among the shards but is none of them: ignored, and told.
    pub foreign: Vec<Foreign>,
    /// The plan every shard runs a part of.
    pub plan: PathBuf,
    /// Made by `sweeptop slurm` (else shards run by hand into one folder).
    pub slurm: bool,
}

/// Run directories under `root`, newest first. `answers` tells whether a
/// sweep answers on a run directory's control socket.
pub fn list_runs(root: &Path, answers: impl Fn(&Path) -> bool) -> Vec<ListedRun> {
    let mut runs: Vec<ListedRun> = std::fs::read_dir(root)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| listed_run(&e.path(), &answers))
                .collect()
        })
        .unwrap_or_default();
    runs.sort_by_key(|r| std::cmp::Reverse(r.started_at));
    runs
}

/// `dir` as listed, when it holds a run or is a sweep directory.
fn listed_run(dir: &Path, answers: impl Fn(&Path) -> bool) -> Option<ListedRun> {
    if let Some(sweep) = Sweep::open(dir) {
        return Some(listed_sweep(sweep));
    }
    let meta = run_meta(dir)?;
    let live = answers(dir) || is_locked(dir);
    let state = match meta.state {
        _ if live => RunState::Running,
        // Recorded as running but nothing answers: it was killed.
        RunState::Running => RunState::Interrupted,
        s => s,
    };
    let ended_at = match state {
        RunState::Running => None,
        RunState::Finished => meta.finished_at.or_else(|| last_write(dir)),
        RunState::Interrupted => last_write(dir),
    };
    Some(ListedRun {
        dir: dir.to_path_buf(),
        plan: meta.plan,
        state,
        live,
        started_at: meta.started_at,
        ended_at,
        ran_s: ran_s(meta.started_at, ended_at),
        plan_sha256: sha256_file(&dir.join(PLAN)).ok(),
        sweep: None,
    })
}

/// A sweep directory: running while a shard runs or waits for its first
/// start, finished when every shard has, interrupted otherwise (a shard
/// with something foreign in its place has not finished).
pub fn listed_sweep(sweep: Sweep) -> ListedRun {
    let shards: Vec<(u32, ShardState)> = (1..=sweep.meta.shards)
        .map(|i| (i, sweep.state(i)))
        .collect();
    let dirs: Vec<(u32, PathBuf)> = (1..=sweep.meta.shards)
        .filter_map(|i| Some((i, sweep.shard_path(i)?)))
        .collect();
    let Sweep {
        dir,
        meta,
        plan,
        slurm,
        shards: own,
        foreign,
    } = sweep;
    // A shard not started yet waits for its task, unless Slurm says the
    // task is gone (cancelled before it started); shards run by hand wait
    // for no one.
    let pending = shards.iter().any(|(_, s)| *s == ShardState::Pending);
    let waiting = pending
        && slurm
        && match queued_tasks(&meta) {
            Some(queued) => shards
                .iter()
                .any(|(i, s)| *s == ShardState::Pending && queued.contains(i)),
            None => true,
        };
    let state = if shards.iter().any(|(_, s)| s.is_running()) || waiting {
        RunState::Running
    } else if shards.iter().all(|(_, s)| *s == ShardState::Finished) {
        RunState::Finished
    } else {
        RunState::Interrupted
    };
    let ended_at = (state != RunState::Running)
        .then(|| own.iter().filter_map(|(_, d)| last_write(d)).max())
        .flatten();
    ListedRun {
        plan: meta.plan.clone(),
        state,
        live: state == RunState::Running,
        started_at: meta.created_at,
        ended_at,
        ran_s: ran_s(meta.created_at, ended_at),
        plan_sha256: sha256_file(&plan).ok(),
        dir,
        sweep: Some(ListedSweep {
            meta,
            shards,
            dirs,
            foreign,
            plan,
            slurm,
        }),
    }
}

/// Seconds from `started_at` to `ended_at`, or to now while running.
fn ran_s(started_at: Timestamp, ended_at: Option<Timestamp>) -> f64 {
    ended_at
        .unwrap_or_else(Timestamp::now)
        .seconds_since(started_at)
        .max(0.0)
}

/// The newest write to the run's events or results: when an interrupted run
/// last did something.
fn last_write(dir: &Path) -> Option<Timestamp> {
    [EVENTS, RESULTS]
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok()?.modified().ok())
        .max()
        .map(Timestamp::from_system_time)
}
