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
//! Reading a sweep directory back ([`super::read_results`],
//! [`super::read_events`]) merges its shards: every shard's results (the last
//! record of a cell wins, by when it finished) and events (in time order), so
//! `open`, `export`, `report` and `compare` see one grid.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{io_err, Invalid, StoreError};
use super::file::write_synced;
use super::lock::is_locked;
use super::meta::read_meta;
use super::PLAN;
use crate::model::{text, RunState, Timestamp};

pub const SWEEP: &str = "sweep.json";
pub const SHARDS: &str = "shards";
pub const SBATCH: &str = "sweep.sbatch";
pub const SLURM_OUT: &str = "slurm";
/// In a shard's run directory: which shard it is.
pub const SHARD: &str = "shard.json";
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

/// The shard run directories of a sweep that exist and are its own, by
/// index (see [`Sweep`]; a directory that is no sweep has none).
pub fn shard_dirs(sweep: &Path) -> Vec<(u32, PathBuf)> {
    Sweep::open(sweep).map(|s| s.shards).unwrap_or_default()
}

/// Something where a sweep's shards are that is not one of them: a symbolic
/// link (to another run, or a loop), a file, a name that is no shard number,
/// a run of another plan or of another shard. It is never read, resumed
/// into or counted; it is told.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Foreign {
    pub path: PathBuf,
    /// The shard whose place it takes, when its name is one of the sweep's.
    pub index: Option<u32>,
    pub why: String,
}

impl Foreign {
    /// The notice for it: what it is, and that it is ignored.
    pub fn notice(&self) -> String {
        format!(
            "{} is not a shard of this sweep ({}): it is ignored",
            self.path.display(),
            self.why
        )
    }
}

/// A sweep directory read back: one made by `sweeptop slurm` (`sweep.json`,
/// shard i in `shards/<i>/`), or a folder of shard runs made by hand
/// (`run PLAN --shard i/N --out DIR/<name>` for each i, on any machines),
/// whose subdirectories' `shard.json` say which shard each is.
///
/// A shard is a real directory (not a symbolic link) whose `shard.json`
/// names its place (its index, and the sweep's count of shards) and whose
/// frozen plan is the sweep's (same SHA-256); a directory the run is still
/// being made in (nothing in it yet) is its shard too. Anything else is
/// [`Foreign`].
#[derive(Debug, Clone)]
pub struct Sweep {
    pub dir: PathBuf,
    /// `sweep.json`, or for shards run by hand what their runs say (the
    /// plan's name, their count, the first start).
    pub meta: SweepMeta,
    /// The plan every shard runs a part of.
    pub plan: PathBuf,
    /// Made by `sweeptop slurm`: shard i's run directory is `shards/<i>`.
    pub slurm: bool,
    /// The sweep's own shard run directories, by index.
    pub shards: Vec<(u32, PathBuf)>,
    pub foreign: Vec<Foreign>,
}

/// What a shard run says it is (its `shard.json` and its plan's SHA-256),
/// or why it cannot say.
type Said = Result<(ShardFile, Option<String>), String>;

/// What a shard of a sweep must be.
struct Expect {
    count: u32,
    /// The SHA-256 of the sweep's plan, when it reads.
    plan_sha256: Option<String>,
}

impl Sweep {
    /// `dir` as a sweep directory; `None` when it is not one (a run
    /// directory, or a folder with no shard run in it).
    pub fn open(dir: &Path) -> Option<Sweep> {
        if is_sweep_dir(dir) {
            return Some(Sweep::open_slurm(dir));
        }
        if super::is_run_dir(dir) {
            return None;
        }
        Sweep::open_by_hand(dir)
    }

    fn open_slurm(dir: &Path) -> Sweep {
        let meta = read_sweep(dir).unwrap_or_else(|_| SweepMeta {
            plan: String::new(),
            shards: 0,
            created_at: Timestamp::from_unix_ms(0),
            sweeptop: String::new(),
            submissions: Vec::new(),
        });
        let plan = dir.join(PLAN);
        let expect = Expect {
            count: meta.shards,
            plan_sha256: super::sha256_file(&plan).ok(),
        };
        let mut shards = Vec::new();
        let mut foreign = Vec::new();
        let mut entries: Vec<PathBuf> = fs::read_dir(dir.join(SHARDS))
            .map(|e| e.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        entries.sort();
        for path in entries {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let index = name
                .parse::<u32>()
                .ok()
                .filter(|i| (1..=meta.shards).contains(i) && i.to_string() == name);
            let judged = match index {
                None => Err(format!(
                    "a shard is named by its number, 1 to {}",
                    meta.shards
                )),
                Some(i) => judge(&path, &expect).and_then(|found| match found {
                    Some(s) if s.index != i => Err(format!(
                        "its {SHARD} says it is shard {}/{}",
                        s.index, s.count
                    )),
                    _ => Ok(()),
                }),
            };
            match (judged, index) {
                (Ok(()), Some(i)) => shards.push((i, path)),
                (Err(why), index) => foreign.push(Foreign { path, index, why }),
                (Ok(()), None) => {}
            }
        }
        shards.sort_by_key(|(i, _)| *i);
        Sweep {
            dir: dir.to_path_buf(),
            meta,
            plan,
            slurm: true,
            shards,
            foreign,
        }
    }

    /// A folder whose subdirectories are shard runs: the sweep is the plan
    /// and count most of them share (the first in name order on a tie); a
    /// shard run of another, a second run of one shard, a link to a shard
    /// run, are foreign. A subdirectory that holds no shard is not looked at.
    fn open_by_hand(dir: &Path) -> Option<Sweep> {
        let mut entries: Vec<PathBuf> = fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join(SHARD).is_file())
            .collect();
        entries.sort();
        // Each candidate with what it says it is.
        let mut found: Vec<(PathBuf, Said)> = entries
            .into_iter()
            .map(|path| {
                let said = read_shard(&path)
                    .map_err(|e| e.to_string())
                    .and_then(|s| s.ok_or_else(|| format!("no {SHARD}")))
                    .map(|s| (s, super::sha256_file(&path.join(PLAN)).ok()));
                (path, said)
            })
            .collect();
        let mut votes: Vec<((u32, Option<String>), usize)> = Vec::new();
        for (path, said) in &found {
            if let (Ok((s, sha)), false) = (said, is_link(path)) {
                let key = (s.count, sha.clone());
                match votes.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, n)) => *n += 1,
                    None => votes.push((key, 1)),
                }
            }
        }
        let most = votes.iter().map(|(_, n)| *n).max()?;
        let (count, plan_sha256) = votes.into_iter().find(|(_, n)| *n == most)?.0;
        let expect = Expect { count, plan_sha256 };
        let mut shards: Vec<(u32, PathBuf)> = Vec::new();
        let mut foreign = Vec::new();
        for (path, said) in found.drain(..) {
            let index = said.as_ref().ok().map(|(s, _)| s.index);
            let judged = judge(&path, &expect).and_then(|s| {
                let i = s.map_or(0, |s| s.index);
                match shards.iter().find(|(j, _)| *j == i) {
                    Some((_, first)) => {
                        Err(format!("shard {i}/{count} is already {}", first.display()))
                    }
                    None => Ok(i),
                }
            });
            match judged {
                Ok(i) => shards.push((i, path)),
                Err(why) => foreign.push(Foreign { path, index, why }),
            }
        }
        shards.sort_by_key(|(i, _)| *i);
        let metas: Vec<_> = shards
            .iter()
            .filter_map(|(_, d)| super::run_meta(d))
            .collect();
        let meta = SweepMeta {
            plan: metas.first().map(|m| m.plan.clone()).unwrap_or_default(),
            shards: count,
            created_at: metas
                .iter()
                .map(|m| m.started_at)
                .min()
                .unwrap_or_else(|| Timestamp::from_unix_ms(0)),
            sweeptop: String::new(),
            submissions: Vec::new(),
        };
        Some(Sweep {
            dir: dir.to_path_buf(),
            meta,
            plan: shards.first()?.1.join(PLAN),
            slurm: false,
            shards,
            foreign,
        })
    }

    /// Shard `index`'s run directory, or where its task makes it (a Slurm
    /// sweep's `shards/<i>`); `None` when something foreign is in its place,
    /// or a folder of shards run by hand lacks it.
    pub fn shard_path(&self, index: u32) -> Option<PathBuf> {
        if let Some((_, d)) = self.shards.iter().find(|(i, _)| *i == index) {
            return Some(d.clone());
        }
        let taken = self.foreign.iter().any(|f| f.index == Some(index));
        (self.slurm && !taken).then(|| shard_dir(&self.dir, index))
    }

    /// Where shard `index` stands.
    pub fn state(&self, index: u32) -> ShardState {
        if let Some(f) = self.foreign.iter().find(|f| f.index == Some(index)) {
            if !self.shards.iter().any(|(i, _)| *i == index) {
                return ShardState::Foreign { why: f.why.clone() };
            }
        }
        self.shard_path(index)
            .map_or(ShardState::Pending, |d| shard_state(&d))
    }

    /// One line per foreign entry: what it is, and that it is ignored.
    pub fn notices(&self) -> Vec<String> {
        self.foreign.iter().map(Foreign::notice).collect()
    }
}

fn is_link(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether `path` may be a shard of a sweep that expects `expect`: a real
/// directory, whose `shard.json` (when written) is of a sweep of that many
/// shards, and whose plan (when written) is the sweep's. What it says it is,
/// or why it is not one.
fn judge(path: &Path, expect: &Expect) -> Result<Option<ShardFile>, String> {
    let m = fs::symlink_metadata(path).map_err(|e| format!("cannot be read: {e}"))?;
    if m.file_type().is_symlink() {
        return Err(match fs::read_link(path) {
            Ok(to) => format!("a symbolic link to {}", to.display()),
            Err(_) => "a symbolic link".into(),
        });
    }
    if !m.is_dir() {
        return Err("not a directory".into());
    }
    let shard = read_shard(path).map_err(|e| e.to_string())?;
    let plan = path.join(PLAN);
    match &shard {
        Some(s) if s.count != expect.count => {
            return Err(format!(
                "its {SHARD} says shard {}/{}, and this sweep has {} shards",
                s.index, s.count, expect.count
            ))
        }
        Some(_) => {}
        // A run being made says which shard it is before it holds a plan.
        None if plan.exists() => return Err(format!("a run that is no shard (no {SHARD})")),
        None => {}
    }
    if let (Some(want), Ok(have)) = (&expect.plan_sha256, super::sha256_file(&plan)) {
        if *want != have {
            return Err(format!(
                "a run of another plan (its {PLAN} is not the sweep's)"
            ));
        }
    }
    Ok(shard)
}

/// A run directory that is in a Slurm sweep's `shards/` but is not one of
/// its shards (a symbolic link to another run, another plan's run…): it must
/// not be resumed as the shard whose place it takes.
pub fn foreign_in_sweep(run_dir: &Path) -> Option<Foreign> {
    let name = run_dir.file_name()?;
    let shards = run_dir.parent()?;
    if shards.file_name()? != SHARDS {
        return None;
    }
    let sweep = shards.parent()?;
    let sweep = if sweep.as_os_str().is_empty() {
        Path::new(".")
    } else {
        sweep
    };
    if !is_sweep_dir(sweep) {
        return None;
    }
    let entry = shards.join(name);
    Sweep::open_slurm(sweep)
        .foreign
        .into_iter()
        .find(|f| f.path.file_name() == entry.file_name())
}

/// Array tasks of the sweep's jobs that Slurm still has queued or running
/// (`JOB_TASK` → the task id); `None` when `squeue` cannot say (not a
/// Slurm machine).
pub fn queued_tasks(meta: &SweepMeta) -> Option<HashSet<u32>> {
    let jobs: Vec<&str> = meta.submissions.iter().map(|s| s.job_id.as_str()).collect();
    let mut out = HashSet::new();
    if jobs.is_empty() {
        return Some(out);
    }
    let o = std::process::Command::new("squeue")
        .args(["-h", "-r", "-o", "%i %T", "-j", &jobs.join(",")])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let mut words = line.split_whitespace();
        let (Some(id), Some(state)) = (words.next(), words.next()) else {
            continue;
        };
        // A task whose process is ending is judged by its files.
        if matches!(
            state,
            "COMPLETING" | "COMPLETED" | "CANCELLED" | "FAILED" | "TIMEOUT"
        ) {
            continue;
        }
        if let Some(task) = id.split_once('_').and_then(|(_, t)| t.parse::<u32>().ok()) {
            out.insert(task);
        }
    }
    Some(out)
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
        why: String,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{CellRecord, Status};

    fn record(cell: &str, finished_ms: i64, status: Status) -> CellRecord {
        let mut r = crate::model::sample_record(cell, status, "stopped");
        r.finished_at = Timestamp::from_unix_ms(finished_ms);
        r
    }

    fn append(dir: &Path, r: &CellRecord) {
        use std::io::Write;
        fs::create_dir_all(dir).unwrap();
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(super::super::RESULTS))
            .unwrap();
        writeln!(f, "{}", serde_json::to_string(r).unwrap()).unwrap();
    }

    #[test]
    fn shards_merge_into_one_set_of_results_the_last_record_winning() {
        let d = std::env::temp_dir().join(format!("sweeptop-sweep-merge-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        let meta = SweepMeta {
            plan: "p".into(),
            shards: 2,
            created_at: Timestamp::from_unix_ms(0),
            sweeptop: "/bin/sweeptop".into(),
            submissions: vec![],
        };
        create_sweep(&d, "name = \"p\"\n", &meta).unwrap();
        assert!(is_sweep_dir(&d));
        assert_eq!(read_sweep(&d).unwrap(), meta);
        // A second create is refused.
        assert!(create_sweep(&d, "", &meta).is_err());
        append(&shard_dir(&d, 1), &record("a", 10, Status::Skipped));
        append(&shard_dir(&d, 2), &record("b", 20, Status::Skipped));
        // `a` measured again later, in another shard's directory.
        append(&shard_dir(&d, 2), &record("a", 30, Status::Skipped));
        append(&shard_dir(&d, 1), &record("c", 5, Status::Skipped));
        let r = super::super::read_results(&d).unwrap();
        let cells: Vec<(&str, i64)> = r
            .records
            .iter()
            .map(|r| (r.cell.as_str(), r.finished_at.unix_ms()))
            .collect();
        assert_eq!(cells, vec![("c", 5), ("a", 30), ("b", 20)]);
        // The generic reader dispatches to the merge.
        assert_eq!(super::super::read_results(&d).unwrap().records.len(), 3);
        assert_eq!(shard_state(&shard_dir(&d, 3)), ShardState::Pending);
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_shard_file_reads_back_and_a_bad_one_is_an_error() {
        let d = std::env::temp_dir().join(format!("sweeptop-shard-file-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        assert_eq!(read_shard(&d).unwrap(), None);
        write_shard(&d, ShardFile { index: 2, count: 3 }).unwrap();
        assert_eq!(
            read_shard(&d).unwrap(),
            Some(ShardFile { index: 2, count: 3 })
        );
        fs::write(d.join(SHARD), "{").unwrap();
        assert!(read_shard(&d).is_err());
        // A heartbeat of another machine is alive while fresh, if the run
        // says it is running.
        fs::write(
            d.join(super::super::META),
            r#"{"plan":"p","started_at":"2026-12-03T08:16:24.123Z","sweeptop_version":"0","state":"running","pid":1}"#,
        )
        .unwrap();
        beat(
            &d,
            &Heartbeat {
                host: "elsewhere-node".into(),
                pid: 1,
                at: Timestamp::now(),
                slurm_job: None,
            },
        );
        assert!(shard_alive(&d));
        assert_eq!(
            shard_state(&d),
            ShardState::Running {
                host: "elsewhere-node".into()
            }
        );
        fs::write(
            d.join(super::super::META),
            r#"{"plan":"p","started_at":"2026-12-03T08:16:24.123Z","sweeptop_version":"0","state":"finished","pid":1}"#,
        )
        .unwrap();
        assert!(!shard_alive(&d));
        assert_eq!(shard_state(&d), ShardState::Finished);
        // Recorded as running, on this machine, by a process that is gone
        // (its beat still fresh): died, and where.
        fs::write(
            d.join(super::super::META),
            r#"{"plan":"p","started_at":"2026-12-03T08:16:24.123Z","sweeptop_version":"0","state":"running","pid":0}"#,
        )
        .unwrap();
        beat(
            &d,
            &Heartbeat {
                host: host_name(),
                pid: 0,
                at: Timestamp::now(),
                slurm_job: None,
            },
        );
        assert_eq!(
            shard_state(&d),
            ShardState::Died {
                host: Some(host_name())
            }
        );
        // Another machine's beat gone stale: died too.
        beat(
            &d,
            &Heartbeat {
                host: "elsewhere-node".into(),
                pid: 1,
                at: Timestamp::now(),
                slurm_job: None,
            },
        );
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
        fs::File::options()
            .write(true)
            .open(d.join(HEARTBEAT))
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert!(!shard_alive(&d));
        assert!(matches!(shard_state(&d), ShardState::Died { .. }));
        fs::remove_dir_all(&d).unwrap();
    }
}
