//! Making and reopening a run directory, and the one open run that results,
//! events, server log notes and the running servers' process groups are
//! written to while a sweep runs.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::crash::{crash_point, crash_torn, stall_point};
use super::error::{io_err, Invalid, StoreError};
use super::file::{repair_tail, write_synced};
use super::lock::lock;
use super::meta::{read_meta, rebuild_meta, write_meta, META_TMP};
use super::requests::RequestsWriter;
use super::sweep::{write_shard, ShardFile};
use super::{DETACH_LOG, EVENTS, LOCK, LOGS, PLAN, PLAN_TMP, REQUESTS, RESULTS, SERVER_PID, SHARD};
use crate::model::{text, CellRecord, Clock, Event, RunMeta, RunState, Timestamp};

/// An open run directory that results are appended to. It holds the
/// directory's lock until dropped: one sweep per directory.
pub struct RunDir {
    pub path: PathBuf,
    results: File,
    events: BufWriter<File>,
    _lock: File,
    /// `run.json` as the resumed run left it: a resume that records nothing
    /// leaves a finished run's end as it was.
    before: Option<RunMeta>,
    appended: bool,
    /// What was repaired on opening (a rebuilt `run.json`), to be told.
    pub repairs: Vec<String>,
}

impl RunDir {
    /// Create a new run directory for one shard of a plan: which shard is
    /// recorded first, so a run directory never holds a plan without saying
    /// which part of it is its own.
    pub fn create_shard(
        path: &Path,
        plan_name: &str,
        plan_source: &str,
        shard: ShardFile,
    ) -> Result<RunDir, StoreError> {
        check_new_run_dir(path)?;
        make_run_dir(path)?;
        write_shard(path, shard)?;
        RunDir::create(path, plan_name, plan_source)
    }

    /// Create a new run directory for a plan. The directory may exist if it
    /// is empty (or holds only what `--detach` wrote); a directory that holds
    /// a run is refused (that is what `--resume` is for), and so is one that
    /// holds anything else. Only a directory made here is made private (0700):
    /// the permissions of one the user made stay as they are.
    pub fn create(path: &Path, plan_name: &str, plan_source: &str) -> Result<RunDir, StoreError> {
        check_new_run_dir(path)?;
        make_run_dir(path)?;
        let lock = lock(path)?;
        // Another sweep may have won the race for this directory.
        check_new_run_dir(path)?;
        // The plan lands whole or not at all: a sweep killed before it is
        // there leaves a directory a new run may still be started in.
        let tmp = path.join(PLAN_TMP);
        write_synced(&tmp, plan_source.as_bytes())?;
        crash_point("created.plan_unrenamed");
        fs::rename(&tmp, path.join(PLAN)).map_err(io_err(path))?;
        crash_point("created.plan");
        fs::create_dir_all(path.join(LOGS)).map_err(io_err(path))?;
        let meta = RunMeta {
            plan: plan_name.to_string(),
            started_at: Timestamp::now(),
            sweeptop_version: env!("CARGO_PKG_VERSION").to_string(),
            state: RunState::Running,
            pid: std::process::id(),
            finished_at: None,
            timing_clock: Some(Clock::in_use()),
        };
        write_meta(path, &meta)?;
        let run = RunDir::open_files(path, lock, None)?;
        // Make the new files' directory entries durable too.
        if let Ok(d) = File::open(path) {
            let _ = d.sync_all();
        }
        Ok(run)
    }

    /// Reopen a run directory to continue it, once no other sweep holds it.
    /// A torn last line of `results.jsonl` (a crash mid-write) is cut off so
    /// that cell runs again; a missing or unreadable `run.json` (a crash before
    /// its first write, a bad edit) is rebuilt from what the directory holds.
    pub fn reopen(path: &Path) -> Result<RunDir, StoreError> {
        if !path.join(PLAN).exists() {
            return Err(Invalid::NoPlan {
                dir: path.to_path_buf(),
            }
            .into());
        }
        let lock = lock(path)?;
        repair_tail(&path.join(RESULTS))?;
        let _ = fs::remove_file(path.join(META_TMP));
        let mut repairs = Vec::new();
        let before = match read_meta(path) {
            Ok(meta) => meta,
            Err(e) => {
                repairs.push(format!("{e}; rebuilt from the run directory"));
                rebuild_meta(path)
            }
        };
        let meta = RunMeta {
            state: RunState::Running,
            pid: std::process::id(),
            finished_at: None,
            timing_clock: Some(Clock::in_use()),
            ..before.clone()
        };
        write_meta(path, &meta)?;
        fs::create_dir_all(path.join(LOGS)).map_err(io_err(path))?;
        let mut run = RunDir::open_files(path, lock, Some(before))?;
        run.repairs = repairs;
        Ok(run)
    }

    pub(super) fn open_files(
        path: &Path,
        lock: File,
        before: Option<RunMeta>,
    ) -> Result<RunDir, StoreError> {
        let rp = path.join(RESULTS);
        let results = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&rp)
            .map_err(io_err(&rp))?;
        let ep = path.join(EVENTS);
        let events = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&ep)
            .map_err(io_err(&ep))?;
        Ok(RunDir {
            path: path.to_path_buf(),
            results,
            events: BufWriter::new(events),
            _lock: lock,
            before,
            appended: false,
            repairs: Vec::new(),
        })
    }

    /// Append one finished cell and make it durable before returning.
    pub fn append_result(&mut self, record: &CellRecord) -> Result<(), StoreError> {
        let mut line = text::to_json_line(record).map_err(Invalid::encode("result"))?;
        line.push(b'\n');
        let p = self.path.join(RESULTS);
        stall_point("results.write");
        crash_torn("results.torn", &mut self.results, &line);
        self.results.write_all(&line).map_err(io_err(&p))?;
        crash_point("results.unsynced");
        self.results.sync_data().map_err(io_err(&p))?;
        crash_point("results.synced");
        self.appended = true;
        Ok(())
    }

    /// Record an event (not log lines or GPU samples: those have their own files).
    pub fn append_event(&mut self, event: &Event) -> Result<(), StoreError> {
        let p = self.path.join(EVENTS);
        let mut line = text::to_json_line(event).map_err(Invalid::encode("event"))?;
        line.push(b'\n');
        crash_torn("events.torn", &mut self.events, &line);
        self.events.write_all(&line).map_err(io_err(&p))?;
        self.events.flush().map_err(io_err(&p))?;
        Ok(())
    }

    /// Where a cell's raw per-request timelines go (`requests/<cell>.jsonl`),
    /// written as requests finish, so any metric can be recomputed later.
    pub fn requests_writer(&self, cell: &str) -> Result<RequestsWriter, StoreError> {
        RequestsWriter::create(requests_path(&self.path, cell))
    }

    pub fn log_path(&self, config: &str) -> PathBuf {
        log_path(&self.path, config)
    }

    /// Record where the run stands. A resume of a finished run that recorded
    /// nothing leaves `run.json` as it was (its end time included).
    pub fn set_state(&self, state: RunState) -> Result<(), StoreError> {
        if let Some(before) = self
            .before
            .as_ref()
            .filter(|b| !self.appended && b.state == RunState::Finished)
        {
            return write_meta(&self.path, before);
        }
        let mut meta = read_meta(&self.path).unwrap_or_else(|_| rebuild_meta(&self.path));
        meta.state = state;
        if state != RunState::Running {
            meta.finished_at = Some(Timestamp::now());
        }
        write_meta(&self.path, &meta)
    }

    /// Remember the process groups of the running servers (several when
    /// configs run side by side) and each leader's start time (0 when
    /// unknown), so a later `--resume` can stop them if this process is
    /// killed, and never a process that reused the number. None: the file goes.
    pub fn record_servers(&self, servers: &[(u32, u64)]) -> Result<(), StoreError> {
        if servers.is_empty() {
            let _ = fs::remove_file(self.path.join(SERVER_PID));
            return Ok(());
        }
        let text: String = servers
            .iter()
            .map(|(pgid, start)| format!("{pgid} {start}\n"))
            .collect();
        write_synced(&self.path.join(SERVER_PID), text.as_bytes())
    }
}

/// A config's server log in the run directory at `run`.
pub fn log_path(run: &Path, config: &str) -> PathBuf {
    run.join(LOGS).join(format!("{config}.log"))
}

/// Where a cell's raw per-request records go in the run directory at `run`.
pub fn requests_path(run: &Path, cell: &str) -> PathBuf {
    run.join(REQUESTS)
        .join(format!("{}.jsonl", cell.replace('/', "__")))
}

/// The server process groups an earlier run left recorded: (pgid, start time).
pub fn recorded_servers(dir: &Path) -> Vec<(u32, u64)> {
    let Ok(text) = fs::read_to_string(dir.join(SERVER_PID)) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace();
            let pgid = it.next()?.parse().ok()?;
            let start = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
            Some((pgid, start))
        })
        .collect()
}

/// Whether a new run may be made at `path`: a directory that does not exist
/// yet, or one that is empty (but for what `--detach` wrote). One that holds a
/// run is for `--resume`; one that holds anything else is not ours.
pub fn check_new_run_dir(path: &Path) -> Result<(), StoreError> {
    if path.join(RESULTS).exists() || path.join(PLAN).exists() {
        return Err(Invalid::HoldsARun {
            dir: path.to_path_buf(),
        }
        .into());
    }
    match foreign_entry(path)? {
        Some(entry) => Err(Invalid::NotEmpty {
            dir: path.to_path_buf(),
            entry,
        }
        .into()),
        None => Ok(()),
    }
}

/// The first entry of `dir` that a new run may not share its directory with
/// (anything but what `--detach` wrote, `shard.json`, and a plan a killed
/// start never finished writing); `None` when there is none or `dir`
/// does not exist yet.
fn foreign_entry(dir: &Path) -> Result<Option<String>, StoreError> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err(dir)(e)),
    };
    for e in entries {
        let name = e.map_err(io_err(dir))?.file_name();
        let name = name.to_string_lossy();
        // A shard's run records which shard it is before it starts.
        if name != DETACH_LOG && name != LOCK && name != SHARD && name != PLAN_TMP {
            return Ok(Some(name.into_owned()));
        }
    }
    Ok(None)
}

/// Make a run directory: its parents as usual, the directory itself private
/// to its owner (0700) when it is made here. One that exists is left as it is.
pub fn make_run_dir(path: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::DirBuilderExt;
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(io_err(parent))?;
    }
    match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => Ok(()),
        Err(e) => Err(io_err(path)(e)),
    }
}

/// A directory a sweep began in and was stopped before its plan was
/// recorded: its lock or a half-written plan, and nothing of a run.
pub fn never_started(dir: &Path) -> bool {
    !dir.join(PLAN).exists()
        && (dir.join(LOCK).exists() || dir.join(PLAN_TMP).exists())
        && check_new_run_dir(dir).is_ok()
}

/// Default run directory: `runs/<plan>-<UTC timestamp>`.
pub fn default_dir(plan_name: &str) -> PathBuf {
    PathBuf::from("runs").join(format!("{plan_name}-{}", Timestamp::now().compact()))
}
