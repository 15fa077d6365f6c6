//! Whether a shard is alive, and where it stands: the heartbeat a running
//! shard rewrites (its host and pid), read with its lock and its `run.json`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{HEARTBEAT, HEARTBEAT_S, HEARTBEAT_STALE_S};
use crate::model::{text, Event, Level, RunState, Timestamp};
use crate::store::error::NotAShard;
use crate::store::lock::is_locked;
use crate::store::meta::read_meta;
use crate::store::shared::{FileWork, FILE_DEADLINE};
use crate::store::PLAN;

/// `heartbeat` in a shard's run directory.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Heartbeat {
    pub host: String,
    pub pid: u32,
    pub at: Timestamp,
    /// The Slurm job and array task running it, when it runs under Slurm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<String>,
}

/// Rewrite the heartbeat (best effort: it only tells others we are alive).
pub fn beat(run_dir: &Path, beat: &Heartbeat) {
    if let Ok(text) = text::to_json_string(beat) {
        let tmp = run_dir.join(".heartbeat.tmp");
        if fs::write(&tmp, text).is_ok() {
            let _ = fs::rename(&tmp, run_dir.join(HEARTBEAT));
        }
    }
}

pub fn read_heartbeat(run_dir: &Path) -> Option<Heartbeat> {
    serde_json::from_str(&fs::read_to_string(run_dir.join(HEARTBEAT)).ok()?).ok()
}

/// This machine's short host name: Slurm's node name when it runs the
/// process, else the kernel's.
pub fn host_name() -> String {
    std::env::var("SLURMD_NODENAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().split('.').next().unwrap_or("").to_string())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "?".into())
}

/// Where a shard stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ShardState {
    /// No run directory yet (queued, or never submitted).
    Pending,
    Running {
        host: String,
    },
    Finished,
    /// Stopped (a signal, a time limit, `q`), saying so: resume continues it.
    Interrupted,
    /// Recorded as running, but its process is gone (killed, node lost).
    Died {
        host: Option<String>,
    },
    /// Something that is not this sweep's shard is in its place (see
    /// [`Foreign`]): the shard is not run, resumed or counted until it is
    /// moved away.
    Foreign {
        why: NotAShard,
    },
}

impl ShardState {
    pub fn text(&self) -> String {
        match self {
            ShardState::Pending => "pending".into(),
            ShardState::Running { host } => format!("running on {host}"),
            ShardState::Finished => "finished".into(),
            ShardState::Interrupted => "interrupted".into(),
            ShardState::Died { host: Some(h) } => format!("died (on {h})"),
            ShardState::Died { host: None } => "died".into(),
            ShardState::Foreign { why } => format!("not this sweep's ({why}): ignored"),
        }
    }

    pub fn is_running(&self) -> bool {
        matches!(self, ShardState::Running { .. })
    }
}

/// Whether a run directory's sweep is alive: its lock is held (a sweep on
/// this machine), or it is recorded as running and its heartbeat is fresh
/// (one on another machine).
pub fn shard_alive(run_dir: &Path) -> bool {
    if is_locked(run_dir) {
        return true;
    }
    if !read_meta(run_dir).is_ok_and(|m| m.state == RunState::Running) {
        return false;
    }
    let here = host_name();
    match read_heartbeat(run_dir) {
        // On this machine the process must be there too (a beat written
        // just before a kill is still fresh).
        Some(b) if b.host == here => pid_alive(b.pid) && heartbeat_age(run_dir) < HEARTBEAT_STALE_S,
        Some(_) => heartbeat_age(run_dir) < HEARTBEAT_STALE_S,
        None => false,
    }
}

fn pid_alive(pid: u32) -> bool {
    pid != 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// Seconds since the heartbeat was written (its file time, the shared
/// filesystem's clock), infinite without one.
fn heartbeat_age(run_dir: &Path) -> f64 {
    fs::metadata(run_dir.join(HEARTBEAT))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .map_or(f64::INFINITY, |d| d.as_secs_f64())
}

/// Where shard `run_dir` stands (a missing directory is pending).
pub fn shard_state(run_dir: &Path) -> ShardState {
    let host = read_heartbeat(run_dir).map(|b| b.host);
    if shard_alive(run_dir) {
        return ShardState::Running {
            host: host.unwrap_or_else(|| "?".into()),
        };
    }
    match read_meta(run_dir) {
        Ok(meta) => match meta.state {
            RunState::Running => ShardState::Died { host },
            RunState::Finished => ShardState::Finished,
            RunState::Interrupted => ShardState::Interrupted,
        },
        // Made, but killed before it said anything.
        Err(_) if run_dir.join(PLAN).exists() => ShardState::Died { host },
        Err(_) => ShardState::Pending,
    }
}

/// Rewrite the run's heartbeat every few seconds (its host, pid and Slurm
/// task), until aborted. The writing runs on a thread of its own with a
/// deadline: a run directory on a hung mount is a notice on `notices`,
/// once, and the sweep never waits on it.
pub fn spawn_heartbeat(
    run_dir: PathBuf,
    notices: tokio::sync::broadcast::Sender<crate::model::Event>,
) -> tokio::task::JoinHandle<()> {
    let slurm_job = match (
        std::env::var("SLURM_ARRAY_JOB_ID"),
        std::env::var("SLURM_ARRAY_TASK_ID"),
        std::env::var("SLURM_JOB_ID"),
    ) {
        (Ok(a), Ok(t), _) => Some(format!("{a}_{t}")),
        (_, _, Ok(j)) => Some(j),
        _ => None,
    };
    let host = host_name();
    let pid = std::process::id();
    tokio::spawn(async move {
        let mut work = FileWork::new("heartbeat");
        let mut stuck_said = false;
        let mut tick = tokio::time::interval(Duration::from_secs(HEARTBEAT_S));
        loop {
            tick.tick().await;
            let b = Heartbeat {
                host: host.clone(),
                pid,
                at: Timestamp::now(),
                slurm_job: slurm_job.clone(),
            };
            let dir = run_dir.clone();
            let stuck = work.run(FILE_DEADLINE, move || beat(&dir, &b)).await.err();
            let message = match (&stuck, stuck_said) {
                (Some(e), false) => format!(
                    "the heartbeat in {} is not written: {e}; viewers elsewhere may take the sweep for stopped",
                    run_dir.display()
                ),
                (None, true) => format!("the heartbeat in {} is written again", run_dir.display()),
                _ => continue,
            };
            stuck_said = stuck.is_some();
            let _ = notices.send(Event::Notice {
                at: Timestamp::now(),
                level: if stuck_said { Level::Warn } else { Level::Info },
                message,
            });
        }
    })
}
