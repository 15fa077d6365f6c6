//! A run directory as a view: its events folded, then its results (the record
//! of truth), then the GPU samples kept in `gpu.jsonl`. `open`, `export`, a
//! resumed sweep's dashboard and an attached viewer's start all begin here.
//! The files are read through [`crate::store`].

use std::path::Path;
use std::sync::Arc;

use super::state::{ViewState, GPU_HISTORY};
use crate::model::{CellRecord, Event};
use crate::plan::{Plan, PlanError, ShardError};
use crate::store;

/// The view of a recorded run. Unreadable lines are skipped (a torn tail, a
/// newer version's events); a directory that is not a run is an error.
pub fn load_run(dir: &Path) -> Result<ViewState, store::StoreError> {
    if !store::is_run_dir(dir) && store::sweep::Sweep::open(dir).is_none() {
        let dir = dir.to_path_buf();
        return Err(store::Invalid::NotARun { dir }.into());
    }
    let plan = plan_of_run(dir).ok().map(Arc::new);
    let mut view = ViewState::new(plan);
    view.run_dir = dir.display().to_string();
    for ev in store::read_events(dir) {
        view.apply(&ev);
    }
    for snapshot in store::read_gpu(dir, GPU_HISTORY) {
        view.apply(&Event::Gpu { snapshot });
    }
    let mut results = store::read_results(dir)?;
    if let Some(plan) = &view.plan {
        results.only_cells(plan.cells.iter().map(|c| c.id.as_str()));
    }
    for r in results.records {
        view.record(r);
    }
    Ok(view)
}

/// Why a run directory's plan cannot be read: its `plan.toml`, its
/// `shard.json`, or the shard that file names. Each says what its cause says.
#[derive(Debug, thiserror::Error)]
pub enum RunPlanError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    ShardFile(#[from] store::StoreError),
    /// The shard `shard.json` names is not one of this plan's.
    #[error(transparent)]
    Shard(#[from] ShardError),
}

/// A run directory's plan: its frozen `plan.toml`, narrowed to the shard it
/// runs when it is a shard of a sweep (`shard.json`). A sweep directory's is
/// the whole plan.
pub fn plan_of_run(dir: &Path) -> Result<Plan, RunPlanError> {
    // Shards run by hand into one folder: the plan they all run a part of.
    if !store::is_run_dir(dir) {
        if let Some(sweep) = store::sweep::Sweep::open(dir) {
            return Ok(Plan::load(&sweep.plan)?);
        }
    }
    let plan = Plan::load(&dir.join(store::PLAN))?;
    match store::sweep::read_shard(dir)? {
        Some(s) => {
            let shard = crate::plan::Shard::new(s.index, s.count)?;
            Ok(plan.shard(shard))
        }
        None => Ok(plan),
    }
}

/// How long before a signal's quit a failure may be recorded and still be
/// the signal's doing (a job's cancellation signals the server too, and its
/// exit can be seen before the sweep's own handler runs).
pub const SIGNAL_WINDOW_MS: i64 = 2_000;

/// Cells whose latest record is a failure that the stop of a run made: a
/// failure recorded once the sweep was told to quit (or, for a quit by a
/// signal, which reaches the server too under a batch scheduler, just
/// before), in a session that ended interrupted. They are no measurement, so
/// a resumed run measures them again.
pub fn cut_short(events: &[Event], results: &store::Results) -> Vec<String> {
    use crate::model::{Status, Timestamp};
    let mut out: Vec<String> = Vec::new();
    let mut quit: Option<Timestamp> = None;
    let mut failed: Vec<(&str, Timestamp)> = Vec::new();
    for ev in events {
        match ev {
            Event::SweepStarted { .. } | Event::SweepFinished { .. } => {
                quit = None;
                failed.clear();
            }
            Event::Action {
                at, action, source, ..
            } if action == "quit" && quit.is_none() => {
                let early = if source.starts_with("signal ") {
                    SIGNAL_WINDOW_MS
                } else {
                    0
                };
                quit = Some(Timestamp::from_unix_ms(at.unix_ms() - early));
            }
            Event::CellFinished { record, .. } if record.status == Status::Failed => {
                failed.push((record.cell.as_str(), record.finished_at));
            }
            Event::SweepInterrupted { .. } => {
                if let Some(from) = quit {
                    for (cell, at) in &failed {
                        let latest = results
                            .get(cell)
                            .is_some_and(|r| r.status == Status::Failed && r.finished_at == *at);
                        if *at >= from && latest && !out.iter().any(|c| c == cell) {
                            out.push((*cell).to_string());
                        }
                    }
                }
                quit = None;
                failed.clear();
            }
            _ => {}
        }
    }
    out
}

/// Cells whose latest record is a failed prepare step: nothing was measured
/// (a step that failed at boot, in a bare environment, or on a source not
/// mounted yet), so a resumed run tries them again.
pub fn unprepared(results: &store::Results) -> Vec<String> {
    let mut out: Vec<String> = results
        .records
        .iter()
        .filter(|r| {
            r.failure
                .as_ref()
                .is_some_and(|f| f.kind == crate::model::FailureKind::PrepareFailed)
        })
        .map(|r| r.cell.clone())
        .collect();
    out.sort();
    out
}

/// The cells of `plan` a resume of `dir` measures: those with no record
/// yet, those the last stop cut short, and those whose prepare step failed.
pub fn cells_left(plan: &Plan, dir: &Path) -> Vec<String> {
    let mut results = store::read_results(dir).unwrap_or_default();
    results.only_cells(plan.cells.iter().map(|c| c.id.as_str()));
    let cut = cut_short(&store::read_events(dir), &results);
    let unprepared = unprepared(&results);
    plan.cells
        .iter()
        .filter(|c| {
            results.get(&c.id).is_none() || cut.contains(&c.id) || unprepared.contains(&c.id)
        })
        .map(|c| c.id.clone())
        .collect()
}

/// The view of a set of records alone (exports of a plan and its results).
pub fn from_records(plan: Option<Arc<Plan>>, records: &[CellRecord]) -> ViewState {
    let mut view = ViewState::new(plan);
    for r in records {
        view.record(r.clone());
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Status, Timestamp};

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_unix_ms(ms)
    }

    fn record(cell: &str, status: Status, ms: i64) -> CellRecord {
        let mut r = crate::model::sample_record(cell, status, "stopped");
        r.finished_at = at(ms);
        r
    }

    fn finished(r: &CellRecord) -> Event {
        Event::CellFinished {
            at: r.finished_at,
            record: Box::new(r.clone()),
        }
    }

    fn quit(ms: i64, source: &str) -> Event {
        Event::Action {
            at: at(ms),
            action: "quit".into(),
            target: None,
            source: source.into(),
        }
    }

    fn started(ms: i64) -> Event {
        Event::SweepStarted {
            at: at(ms),
            plan: "p".into(),
            run_dir: "r".into(),
            configs: 1,
            cells: 4,
            already_done: 0,
        }
    }

    fn interrupted(ms: i64) -> Event {
        Event::SweepInterrupted {
            at: at(ms),
            reason: "quit".into(),
        }
    }

    #[test]
    fn failures_made_by_the_stop_are_measured_again() {
        let crash = record("crashed", Status::Failed, 1_000);
        let early = record("killed-with-us", Status::Failed, 9_000);
        let after = record("after-quit", Status::Failed, 10_100);
        let later = record("never-ran", Status::Failed, 10_200);
        let events = vec![
            started(0),
            finished(&crash),
            finished(&early),
            quit(10_000, "signal SIGTERM"),
            finished(&after),
            finished(&later),
            interrupted(10_300),
        ];
        let results = store::Results {
            records: vec![crash.clone(), early.clone(), after.clone(), later.clone()],
            problems: vec![],
        };
        // A crash long before the signal is a result; one within the
        // signal's window and those after the quit are not.
        assert_eq!(
            cut_short(&events, &results),
            vec!["killed-with-us", "after-quit", "never-ran"]
        );
        // A quit from a key: only what failed after it.
        let mut by_key = events.clone();
        by_key[3] = quit(10_000, "key");
        assert_eq!(
            cut_short(&by_key, &results),
            vec!["after-quit", "never-ran"]
        );
        // A cell measured again since (a later record) is left alone, and a
        // session that finished had nothing cut short.
        let results2 = store::Results {
            records: vec![record("after-quit", Status::Ok, 20_000), later.clone()],
            problems: vec![],
        };
        assert_eq!(cut_short(&events, &results2), vec!["never-ran"]);
        let done = vec![started(0), quit(10_000, "key"), finished(&after)];
        assert!(cut_short(&done, &results).is_empty());
    }
}
