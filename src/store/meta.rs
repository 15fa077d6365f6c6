//! `run.json`: what a run is (its plan's name, when it started, which
//! sweeptop) and where it stands, written whole and renamed into place; and,
//! when it is missing or unreadable, what the directory tells of it.

use std::fs;
use std::path::Path;

use super::crash::crash_point;
use super::error::{io_err, Invalid, StoreError};
use super::file::{read_lines, write_synced};
use super::{EVENTS, META, PLAN, RESULTS};
use crate::model::{text, CellRecord, Event, RunMeta, RunState, Timestamp};

/// Where `run.json` is written before it is renamed into place.
pub(super) const META_TMP: &str = ".run.json.tmp";

/// Whether `dir` holds (the start of) a run.
pub fn is_run_dir(dir: &Path) -> bool {
    [PLAN, EVENTS, RESULTS].iter().any(|f| dir.join(f).exists())
}

/// `run.json`, or, when it is missing or unreadable, what the directory says
/// of it (see [`rebuild_meta`]); `None` only for a directory that holds no run.
pub fn run_meta(dir: &Path) -> Option<RunMeta> {
    read_meta(dir)
        .ok()
        .or_else(|| is_run_dir(dir).then(|| rebuild_meta(dir)))
}

/// `run.json` as the directory tells it: the plan's name from `plan.toml`,
/// the start from the first event or result (else the plan's file time), and
/// `interrupted`, since no process said it finished.
pub fn rebuild_meta(dir: &Path) -> RunMeta {
    let plan = fs::read_to_string(dir.join(PLAN))
        .ok()
        .and_then(|s| s.parse::<toml::Table>().ok())
        .and_then(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_string))
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let first_event = read_lines::<Event>(&dir.join(EVENTS)).find_map(|e| e.at());
    let first_result = read_lines::<CellRecord>(&dir.join(RESULTS))
        .map(|r| r.started_at)
        .min();
    let plan_time = fs::metadata(dir.join(PLAN))
        .and_then(|m| m.modified())
        .ok()
        .map(Timestamp::from_system_time);
    let started_at = [first_event, first_result, plan_time]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or_else(Timestamp::now);
    RunMeta {
        plan,
        started_at,
        sweeptop_version: env!("CARGO_PKG_VERSION").to_string(),
        state: RunState::Interrupted,
        pid: 0,
        finished_at: None,
        timing_clock: None,
    }
}

pub fn read_meta(dir: &Path) -> Result<RunMeta, StoreError> {
    let p = dir.join(META);
    let text = fs::read_to_string(&p).map_err(io_err(&p))?;
    serde_json::from_str(&text).map_err(Invalid::unreadable(&p))
}

pub(super) fn write_meta(dir: &Path, meta: &RunMeta) -> Result<(), StoreError> {
    let text = text::to_json_pretty(meta).map_err(Invalid::encode(META))?;
    // Write-then-rename so a crash never leaves a half-written run.json.
    let tmp = dir.join(META_TMP);
    write_synced(&tmp, text.as_bytes())?;
    crash_point("meta.renaming");
    let p = dir.join(META);
    fs::rename(&tmp, &p).map_err(io_err(&p))
}
