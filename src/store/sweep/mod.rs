//! A sweep directory: one plan spread over shards that run on different
//! machines (a Slurm job array), on a filesystem they all see.
//!
//! ```text
//! SWEEP/
//!   plan.toml        the frozen plan (every shard runs a part of it)
//!   sweep.json       shards count, the submissions (job ids, shards, times)
//!   sweep.sbatch     the batch script each array task runs
//!   slurm/           Slurm's output files, %A_%a.out
//!   shards/<i>/      shard i's run directory (made when its task starts)
//! ```
//!
//! A shard's run directory is an ordinary one plus `shard.json` (which shard
//! of how many, written when the run is made, so `run --resume` keeps to it)
//! and `heartbeat` (the host and pid running it, rewritten every few seconds:
//! a sweep on another machine is alive while its heartbeat is fresh).
//!
//! Here: the sweep's and a shard's files; which subdirectories are its
//! shards in `shards.rs`, heartbeats and a shard's state in `heartbeat.rs`,
//! what Slurm still queues in `queue.rs`.
//!
//! Reading a sweep directory back ([`super::read_results`],
//! [`super::read_events`]) merges its shards: every shard's results (the last
//! record of a cell wins, by when it finished) and events (in time order), so
//! `open`, `export`, `report` and `compare` see one grid.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{io_err, Invalid, StoreError};
use super::file::write_synced;
use super::PLAN;
use crate::model::{text, Timestamp};

mod heartbeat;
mod queue;
mod shards;
#[cfg(test)]
mod tests;

pub use super::error::NotAShard;
pub use heartbeat::{
    beat, host_name, read_heartbeat, shard_alive, shard_state, spawn_heartbeat, Heartbeat,
    ShardState,
};
pub use queue::queued_tasks;
pub use shards::{foreign_in_sweep, Foreign, Sweep};

pub const SWEEP: &str = "sweep.json";
pub const SHARDS: &str = "shards";
pub const SBATCH: &str = "sweep.sbatch";
pub const SLURM_OUT: &str = "slurm";
pub use super::SHARD;
/// In a shard's run directory: who runs it, rewritten every [`HEARTBEAT_S`].
pub const HEARTBEAT: &str = "heartbeat";
/// How often a running shard rewrites its heartbeat.
pub const HEARTBEAT_S: u64 = 5;
/// A heartbeat older than this is a shard whose process is gone.
pub const HEARTBEAT_STALE_S: f64 = 30.0;

/// `sweep.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SweepMeta {
    pub plan: String,
    pub shards: u32,
    pub created_at: Timestamp,
    /// The sweeptop each task runs (an absolute path).
    pub sweeptop: String,
    #[serde(default)]
    pub submissions: Vec<Submission>,
}

/// One `sbatch` of the sweep's array.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Submission {
    pub job_id: String,
    /// The array's task ids (= shard indices).
    pub shards: Vec<u32>,
    pub submitted_at: Timestamp,
}

/// `shard.json` in a shard's run directory.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ShardFile {
    pub index: u32,
    pub count: u32,
}

/// Whether `dir` is a sweep directory (it has `sweep.json`).
pub fn is_sweep_dir(dir: &Path) -> bool {
    dir.join(SWEEP).is_file()
}

pub fn shard_dir(sweep: &Path, index: u32) -> PathBuf {
    sweep.join(SHARDS).join(index.to_string())
}

pub fn read_sweep(dir: &Path) -> Result<SweepMeta, StoreError> {
    let p = dir.join(SWEEP);
    let text = fs::read_to_string(&p).map_err(io_err(&p))?;
    serde_json::from_str(&text).map_err(Invalid::unreadable(&p))
}

/// Write `sweep.json` (write, then rename: never half-written).
pub fn write_sweep(dir: &Path, meta: &SweepMeta) -> Result<(), StoreError> {
    let text = text::to_json_pretty(meta).map_err(Invalid::encode(SWEEP))?;
    let tmp = dir.join(".sweep.json.tmp");
    write_synced(&tmp, text.as_bytes())?;
    let p = dir.join(SWEEP);
    fs::rename(&tmp, &p).map_err(io_err(&p))
}

/// Add a submission (`sbatch`'s job id, the shards its array runs) to
/// `sweep.json`.
pub fn record_submission(dir: &Path, job: &str, shards: &[u32]) -> Result<(), StoreError> {
    let mut meta = read_sweep(dir)?;
    meta.submissions.push(Submission {
        job_id: job.to_string(),
        shards: shards.to_vec(),
        submitted_at: Timestamp::now(),
    });
    write_sweep(dir, &meta)
}

/// Make a new sweep directory with the frozen plan; an existing one that
/// holds anything is refused.
pub fn create_sweep(dir: &Path, plan_source: &str, meta: &SweepMeta) -> Result<(), StoreError> {
    if dir.exists() {
        let empty = fs::read_dir(dir).map_err(io_err(dir))?.next().is_none();
        if !empty {
            return Err(Invalid::SweepExists {
                dir: dir.to_path_buf(),
            }
            .into());
        }
    }
    for d in [dir.to_path_buf(), dir.join(SHARDS), dir.join(SLURM_OUT)] {
        fs::create_dir_all(&d).map_err(io_err(&d))?;
    }
    write_synced(&dir.join(PLAN), plan_source.as_bytes())?;
    write_sweep(dir, meta)
}

pub fn write_shard(run_dir: &Path, shard: ShardFile) -> Result<(), StoreError> {
    let text = text::to_json_pretty(&shard).map_err(Invalid::encode(SHARD))?;
    write_synced(&run_dir.join(SHARD), text.as_bytes())
}

/// The shard a run directory runs, if it is a shard's; a `shard.json` that
/// does not read is an error (running the whole plan instead would run other
/// shards' configs twice).
pub fn read_shard(run_dir: &Path) -> Result<Option<ShardFile>, StoreError> {
    let p = run_dir.join(SHARD);
    match fs::read_to_string(&p) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(Invalid::unreadable(&p)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io_err(&p)(e)),
    }
}

/// The shard run directories of a sweep that exist and are its own, by
/// index (see [`Sweep`]; a directory that is no sweep has none).
pub fn shard_dirs(sweep: &Path) -> Vec<(u32, PathBuf)> {
    Sweep::open(sweep).map(|s| s.shards).unwrap_or_default()
}
