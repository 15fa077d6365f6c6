//! The runs under a folder (`./runs` by default) and where each stands:
//! what `ls` lists, and where `attach` finds the newest running sweep. A
//! sweep directory is one entry, standing as its shards do.

use std::path::{Path, PathBuf};

use super::file::sha256_file;
use super::lock::is_locked;
use super::meta::run_meta;
use super::sweep::{queued_tasks, Foreign, ShardState, Sweep, SweepMeta};
use super::{EVENTS, PLAN, RESULTS};
use crate::model::{covered_s, Event, RunState, Timestamp};

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
    /// Seconds it was at work (so far, while running): its active spans,
    /// not the time between a run and its resume.
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
    let spans = active_spans(dir, state == RunState::Running);
    Some(ListedRun {
        dir: dir.to_path_buf(),
        plan: meta.plan,
        state,
        live,
        started_at: meta.started_at,
        ended_at,
        ran_s: ran_s(&spans, meta.started_at, ended_at),
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
    // Shards run side by side: the sweep ran while any of them did.
    let spans: Vec<Span> = own
        .iter()
        .flat_map(|(i, d)| {
            let running = shards.iter().any(|(j, s)| j == i && s.is_running());
            active_spans(d, running)
        })
        .collect();
    ListedRun {
        plan: meta.plan.clone(),
        state,
        live: state == RunState::Running,
        started_at: meta.created_at,
        ended_at,
        ran_s: ran_s(&spans, meta.created_at, ended_at),
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

/// A stretch of time a run was at work: a (re)start to its end.
type Span = (Timestamp, Timestamp);

/// Seconds a run was at work: its active spans, overlaps counted once, so
/// the days between a run and its `--resume` are not. A run that recorded
/// no start (made before its events were kept) ran from `started_at` to
/// `ended_at`, or to now while running.
fn ran_s(spans: &[Span], started_at: Timestamp, ended_at: Option<Timestamp>) -> f64 {
    if spans.is_empty() {
        let end = ended_at.unwrap_or_else(Timestamp::now);
        return end.seconds_since(started_at).max(0.0);
    }
    covered_s(spans.iter().copied())
}

/// A run directory's active spans from its `events.jsonl`: each start or
/// resume to its finish or interruption. A start with no end of its own (the
/// process was killed) ends at the run's last event before the next start;
/// the last one, if open, ends now while `running`, else at the last write.
fn active_spans(dir: &Path, running: bool) -> Vec<Span> {
    let events = super::file::read_lines::<Event>(&dir.join(EVENTS));
    let mut spans = Vec::new();
    let mut open: Option<Timestamp> = None;
    let mut last: Option<Timestamp> = None;
    for ev in events {
        let Some(at) = ev.at() else { continue };
        match ev {
            Event::SweepStarted { .. } => {
                if let Some(from) = open.replace(at) {
                    spans.push((from, last.unwrap_or(from)));
                }
            }
            Event::SweepFinished { .. } | Event::SweepInterrupted { .. } => {
                if let Some(from) = open.take() {
                    spans.push((from, at));
                }
            }
            _ => {}
        }
        last = last.max(Some(at));
    }
    if let Some(from) = open {
        let end = if running {
            Timestamp::now()
        } else {
            last_write(dir).max(last).unwrap_or(from)
        };
        spans.push((from, end));
    }
    spans
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RunMeta;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_unix_ms(1_748_772_000_000 + s * 1000)
    }

    fn started(s: i64) -> Event {
        Event::SweepStarted {
            at: at(s),
            plan: "demo".into(),
            run_dir: "runs/demo".into(),
            configs: 1,
            cells: 2,
            already_done: 0,
        }
    }

    fn finished(s: i64) -> Event {
        Event::SweepFinished {
            at: at(s),
            ok: 1,
            failed: 1,
            skipped: 0,
        }
    }

    #[test]
    fn a_resumed_run_ran_for_its_active_spans_not_the_days_between() {
        let dir = std::env::temp_dir().join(format!("sweeptop-ls-ran-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let three_days = 3 * 24 * 3600;
        {
            let mut run = super::super::RunDir::create(&dir, "demo", "name = \"demo\"\n").unwrap();
            // 100 s, then `--resume --retry failed` three days later: 50 s.
            for ev in [
                started(0),
                finished(100),
                started(three_days),
                finished(three_days + 50),
            ] {
                run.append_event(&ev).unwrap();
            }
        }
        let meta = RunMeta {
            plan: "demo".into(),
            started_at: at(0),
            sweeptop_version: "0.1.0".into(),
            state: RunState::Finished,
            pid: 0,
            finished_at: Some(at(three_days + 50)),
            timing_clock: None,
        };
        super::super::meta::write_meta(&dir, &meta).unwrap();
        let listed = listed_run(&dir, |_| false).expect("a run");
        assert_eq!(listed.state, RunState::Finished);
        assert_eq!(listed.ran_s, 150.0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_killed_span_ends_at_its_last_event_and_overlaps_count_once() {
        let dir = std::env::temp_dir().join(format!("sweeptop-ls-spans-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        {
            let mut run = super::super::RunDir::create(&dir, "demo", "name = \"demo\"\n").unwrap();
            // Killed 40 s in (no end recorded), resumed later for 10 s.
            for ev in [
                started(0),
                Event::Notice {
                    at: at(40),
                    level: crate::model::Level::Warn,
                    message: "last sign of life".into(),
                },
                started(5000),
                finished(5010),
            ] {
                run.append_event(&ev).unwrap();
            }
        }
        let spans = active_spans(&dir, false);
        assert_eq!(spans, vec![(at(0), at(40)), (at(5000), at(5010))]);
        assert_eq!(ran_s(&spans, at(0), None), 50.0);
        // Shards side by side: the time any of them ran.
        let shards = [(at(0), at(100)), (at(50), at(120)), (at(200), at(210))];
        assert_eq!(ran_s(&shards, at(0), None), 130.0);
        // Nothing recorded: first start to the end.
        assert_eq!(ran_s(&[], at(0), Some(at(30))), 30.0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
