//! A run directory as a view: its events folded, then its results (the record
//! of truth), then the GPU samples kept in `gpu.jsonl`. `open`, `export`, a
//! resumed sweep's dashboard and an attached viewer's start all begin here.
//! The files are read through [`crate::store`].

use std::path::Path;
use std::sync::Arc;

use super::state::{ViewState, GPU_HISTORY};
use crate::model::{CellRecord, Event};
use crate::plan::Plan;
use crate::store;

/// The view of a recorded run. Unreadable lines are skipped (a torn tail, a
/// newer version's events); a directory that is not a run is an error.
pub fn load_run(dir: &Path) -> Result<ViewState, store::StoreError> {
    if !store::is_run_dir(dir) {
        return Err(store::StoreError::Invalid(format!(
            "{} is not a run directory (no {}, {} or {})",
            dir.display(),
            store::PLAN,
            store::EVENTS,
            store::RESULTS
        )));
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

/// A run directory's plan: its frozen `plan.toml`, narrowed to the shard it
/// runs when it is a shard of a sweep (`shard.json`). A sweep directory's is
/// the whole plan.
pub fn plan_of_run(dir: &Path) -> Result<Plan, String> {
    let plan = Plan::load(&dir.join(store::PLAN)).map_err(|e| e.to_string())?;
    match store::sweep::read_shard(dir).map_err(|e| e.to_string())? {
        Some(s) => Ok(plan.shard(crate::plan::Shard::new(s.index, s.count)?)),
        None => Ok(plan),
    }
}

/// The view of a set of records alone (exports of a plan and its results).
pub fn from_records(plan: Option<Arc<Plan>>, records: &[CellRecord]) -> ViewState {
    let mut view = ViewState::new(plan);
    for r in records {
        view.record(r.clone());
    }
    view
}
