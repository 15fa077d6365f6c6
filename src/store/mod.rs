//! The run directory: frozen plan, append-only `results.jsonl` (fsynced per cell),
//! `events.jsonl`, server logs, and reading runs back for resume, export and `open`.

mod requests;
pub mod sweep;

pub use requests::{read_requests, RequestsWriter};

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::model::text;
use crate::model::{CellRecord, Event, GpuSnapshot, RunMeta, RunState, Timestamp};

pub const RESULTS: &str = "results.jsonl";
pub const EVENTS: &str = "events.jsonl";
pub const GPU: &str = "gpu.jsonl";
pub const PLAN: &str = "plan.toml";
pub const META: &str = "run.json";
pub const SERVER_PID: &str = "server.pid";
pub const LOGS: &str = "logs";
pub const REQUESTS: &str = "requests";
/// Held (`flock`) by the one sweep writing to the directory, for its whole
/// life; the kernel lets go of it when that process dies, however it dies.
pub const LOCK: &str = "run.lock";
/// What `--detach` writes into a new run directory before the sweep starts.
pub const DETACH_LOG: &str = "sweeptop.log";
const META_TMP: &str = ".run.json.tmp";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{0}")]
    Invalid(String),
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Where the crash-consistency test kills the process (`SWEEPTOP_CRASH_AT=
/// POINT[:N]`, the N-th time the point is reached, 1 by default): SIGKILL,
/// as `kill -9` would, at the worst moments of writing the run directory.
/// Without the variable this is one load of a cached `None`.
/// The SHA-256 of a file, in hex (what `sha256sum` prints).
pub fn sha256_file(path: &Path) -> io::Result<String> {
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let mut file = File::open(path)?;
    io::copy(&mut file, &mut hasher)?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

pub fn crash_point(point: &str) {
    if crash_due(point) {
        die();
    }
}

/// [`crash_point`] in the middle of a write: half of `bytes` reaches the
/// file, then the process dies.
fn crash_torn(point: &str, w: &mut impl Write, bytes: &[u8]) {
    if crash_due(point) {
        let _ = w.write_all(&bytes[..bytes.len() / 2]);
        let _ = w.flush();
        die();
    }
}

fn crash_due(point: &str) -> bool {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static AT: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static HITS: AtomicU64 = AtomicU64::new(0);
    let at = AT.get_or_init(|| {
        let v = std::env::var("SWEEPTOP_CRASH_AT").ok()?;
        let (name, n) = v.split_once(':').unwrap_or((&v, "1"));
        Some((name.to_string(), n.parse().unwrap_or(1)))
    });
    at.as_ref()
        .is_some_and(|(name, n)| name == point && HITS.fetch_add(1, Ordering::SeqCst) + 1 == *n)
}

fn die() {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::SIGKILL);
    // SIGKILL cannot be caught; this is never reached.
    std::process::abort();
}

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
        fs::create_dir_all(path.join(LOGS)).map_err(io_err(path))?;
        let plan_path = path.join(PLAN);
        write_synced(&plan_path, plan_source.as_bytes())?;
        crash_point("created.plan");
        let meta = RunMeta {
            plan: plan_name.to_string(),
            started_at: Timestamp::now(),
            sweeptop_version: env!("CARGO_PKG_VERSION").to_string(),
            state: RunState::Running,
            pid: std::process::id(),
            finished_at: None,
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
            return Err(StoreError::Invalid(format!(
                "{} is not a run directory (no {PLAN})",
                path.display()
            )));
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
            ..before.clone()
        };
        write_meta(path, &meta)?;
        fs::create_dir_all(path.join(LOGS)).map_err(io_err(path))?;
        let mut run = RunDir::open_files(path, lock, Some(before))?;
        run.repairs = repairs;
        Ok(run)
    }

    fn open_files(path: &Path, lock: File, before: Option<RunMeta>) -> Result<RunDir, StoreError> {
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
        let mut line = text::to_json_line(record)
            .map_err(|e| StoreError::Invalid(format!("cannot encode result: {e}")))?;
        line.push(b'\n');
        let p = self.path.join(RESULTS);
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
        let mut line = text::to_json_line(event)
            .map_err(|e| StoreError::Invalid(format!("cannot encode event: {e}")))?;
        line.push(b'\n');
        crash_torn("events.torn", &mut self.events, &line);
        self.events.write_all(&line).map_err(io_err(&p))?;
        self.events.flush().map_err(io_err(&p))?;
        Ok(())
    }

    /// Where a cell's raw per-request timelines go (`requests/<cell>.jsonl`),
    /// written as requests finish, so any metric can be recomputed later.
    pub fn requests_writer(&self, cell: &str) -> Result<RequestsWriter, StoreError> {
        RequestsWriter::create(
            self.path
                .join(REQUESTS)
                .join(format!("{}.jsonl", cell.replace('/', "__"))),
        )
    }

    pub fn log_path(&self, config: &str) -> PathBuf {
        self.path.join(LOGS).join(format!("{config}.log"))
    }

    /// A line of sweeptop's own in a config's server log (which launch this
    /// is, with its command). Best effort: the log is evidence, not results.
    pub fn note_in_log(&self, config: &str, line: &str) {
        if let Ok(mut f) = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(config))
        {
            let _ = writeln!(f, "{line}");
        }
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

/// `gpu.jsonl`: the GPU samples of a sweep, at most one line per 10 s so a
/// day-long sweep stays small. Write errors are ignored (the samples are
/// telemetry, not results).
pub struct GpuLog {
    out: Option<BufWriter<File>>,
    last_ms: Option<u64>,
}

impl GpuLog {
    /// At most one line per this many milliseconds.
    pub const EVERY_MS: u64 = 10_000;

    pub fn open(dir: &Path) -> GpuLog {
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(GPU))
            .ok()
            .map(BufWriter::new);
        GpuLog { out, last_ms: None }
    }

    pub fn keep(&mut self, snap: &GpuSnapshot) {
        let Some(f) = self.out.as_mut() else { return };
        if self
            .last_ms
            .is_some_and(|l| snap.at_ms < l + Self::EVERY_MS)
        {
            return;
        }
        self.last_ms = Some(snap.at_ms);
        if text::write_json_line(&mut *f, snap).is_ok() {
            let _ = f.write_all(b"\n");
            let _ = f.flush();
        }
    }
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
        return Err(StoreError::Invalid(format!(
            "{} already holds a run; continue it with `sweeptop run --resume {}`",
            path.display(),
            path.display()
        )));
    }
    match foreign_entry(path)? {
        Some(other) => Err(StoreError::Invalid(format!(
            "{} is not empty ({other} is there) and holds no sweeptop run; \
             name a new directory with --out (it is created for you)",
            path.display()
        ))),
        None => Ok(()),
    }
}

/// The first entry of `dir` that a new run may not share its directory with
/// (anything but what `--detach` wrote, and `shard.json`); `None` when there is none or `dir`
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
        if name != DETACH_LOG && name != LOCK && name != sweep::SHARD {
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

/// Take the run directory's lock, or say who holds it.
fn lock(dir: &Path) -> Result<File, StoreError> {
    let p = dir.join(LOCK);
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(io_err(&p))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(fs::TryLockError::WouldBlock) => Err(StoreError::Invalid(format!(
            "a sweep is already running in {}: attach with `sweeptop attach {}`",
            dir.display(),
            dir.display()
        ))),
        Err(fs::TryLockError::Error(e)) => Err(io_err(&p)(e)),
    }
}

/// Whether a live sweep holds the directory's lock.
pub fn is_locked(dir: &Path) -> bool {
    let Ok(f) = File::open(dir.join(LOCK)) else {
        return false;
    };
    matches!(f.try_lock_shared(), Err(fs::TryLockError::WouldBlock))
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
    }
}

pub fn read_meta(dir: &Path) -> Result<RunMeta, StoreError> {
    let p = dir.join(META);
    let text = fs::read_to_string(&p).map_err(io_err(&p))?;
    serde_json::from_str(&text).map_err(|e| StoreError::Invalid(format!("{}: {e}", p.display())))
}

fn write_meta(dir: &Path, meta: &RunMeta) -> Result<(), StoreError> {
    let text = text::to_json_pretty(meta)
        .map_err(|e| StoreError::Invalid(format!("cannot encode run.json: {e}")))?;
    // Write-then-rename so a crash never leaves a half-written run.json.
    let tmp = dir.join(META_TMP);
    write_synced(&tmp, text.as_bytes())?;
    crash_point("meta.renaming");
    let p = dir.join(META);
    fs::rename(&tmp, &p).map_err(io_err(&p))
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut f = File::create(path).map_err(io_err(path))?;
    f.write_all(bytes).map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))
}

/// Cut a partial last line (no trailing newline) off an append-only file.
fn repair_tail(path: &Path) -> Result<(), StoreError> {
    let Ok(mut f) = OpenOptions::new().read(true).write(true).open(path) else {
        return Ok(());
    };
    let len = f.metadata().map_err(io_err(path))?.len();
    if len == 0 {
        return Ok(());
    }
    // Scan back from the end for the last newline.
    let mut pos = len;
    let mut buf = [0u8; 4096];
    let mut keep = 0u64;
    'outer: while pos > 0 {
        let n = (pos as usize).min(buf.len());
        pos -= n as u64;
        f.seek(SeekFrom::Start(pos)).map_err(io_err(path))?;
        std::io::Read::read_exact(&mut f, &mut buf[..n]).map_err(io_err(path))?;
        for i in (0..n).rev() {
            if buf[i] == b'\n' {
                keep = pos + i as u64 + 1;
                break 'outer;
            }
        }
    }
    if keep != len {
        f.set_len(keep).map_err(io_err(path))?;
        f.sync_all().map_err(io_err(path))?;
    }
    Ok(())
}

/// Results read back from a run: the last record per cell wins (a retried cell
/// appends a new line). Unreadable lines are reported, never fatal.
#[derive(Debug, Default)]
pub struct Results {
    pub records: Vec<CellRecord>,
    pub problems: Vec<String>,
}

impl Results {
    pub fn get(&self, cell: &str) -> Option<&CellRecord> {
        self.records.iter().find(|r| r.cell == cell)
    }

    /// Keep only the records of `cells` (the plan's): a record of a cell the
    /// plan does not have (a hand edit, another plan's line) is not this run's
    /// result. What was dropped is told in `problems`.
    pub fn only_cells<'a>(&mut self, cells: impl IntoIterator<Item = &'a str>) {
        let cells: std::collections::HashSet<&str> = cells.into_iter().collect();
        let before = self.records.len();
        self.records.retain(|r| cells.contains(r.cell.as_str()));
        let dropped = before - self.records.len();
        if dropped > 0 {
            self.problems.push(format!(
                "{dropped} record(s) in {RESULTS} are for cells the plan does not have; they are ignored"
            ));
        }
    }
}

pub fn read_results(dir: &Path) -> Result<Results, StoreError> {
    if sweep::is_sweep_dir(dir) {
        return sweep::read_results(dir);
    }
    let p = dir.join(RESULTS);
    let f = match File::open(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Results::default()),
        Err(e) => return Err(io_err(&p)(e)),
    };
    let mut out = Results::default();
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    let reader = BufReader::new(f);
    let mut lines = reader.split(b'\n').enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let line = line.map_err(io_err(&p))?;
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        match serde_json::from_slice::<CellRecord>(&line) {
            // An `ok` without tokens (a hand edit, an older bug) is no result.
            Ok(r) if !r.holds_invariant() => out.problems.push(format!(
                "{}:{}: cell {} is recorded as ok without tokens; the record is ignored and the cell will run again",
                p.display(),
                i + 1,
                r.cell
            )),
            Ok(r) => match index.get(&r.cell) {
                Some(&at) => out.records[at] = r,
                None => {
                    index.insert(r.cell.clone(), out.records.len());
                    out.records.push(r);
                }
            },
            Err(e) => {
                let last = lines.peek().is_none();
                out.problems.push(format!(
                    "{}:{}: {} ({e})",
                    p.display(),
                    i + 1,
                    if last {
                        "torn last line, the cell will run again"
                    } else {
                        "unreadable result line skipped"
                    }
                ));
            }
        }
    }
    Ok(out)
}

/// The events recorded in a run directory (unreadable lines skipped: a newer
/// version's event kinds, or a torn last line).
/// What each config benchmarked, from its last launch's `server_ready`
/// event (configs from runs recorded before it was kept are absent).
pub fn read_servers(dir: &Path) -> std::collections::BTreeMap<String, crate::model::ServerMeta> {
    read_events(dir)
        .into_iter()
        .filter_map(|ev| match ev {
            Event::ServerReady {
                config,
                server: Some(meta),
                ..
            } => Some((config, *meta)),
            _ => None,
        })
        .collect()
}

pub fn read_events(dir: &Path) -> Vec<Event> {
    if sweep::is_sweep_dir(dir) {
        return sweep::read_events(dir);
    }
    read_lines(&dir.join(EVENTS)).collect()
}

/// The last `keep` GPU samples kept in `gpu.jsonl`.
pub fn read_gpu(dir: &Path, keep: usize) -> Vec<GpuSnapshot> {
    let mut last = std::collections::VecDeque::with_capacity(keep);
    for snap in read_lines(&dir.join(GPU)) {
        if last.len() == keep {
            last.pop_front();
        }
        last.push_back(snap);
    }
    last.into()
}

/// Whether `dir` holds (the start of) a run.
pub fn is_run_dir(dir: &Path) -> bool {
    [PLAN, EVENTS, RESULTS].iter().any(|f| dir.join(f).exists())
}

/// Every line of a JSON-lines file that parses, read as it goes (a torn or
/// foreign line is skipped; a missing file is empty).
fn read_lines<T: serde::de::DeserializeOwned>(path: &Path) -> impl Iterator<Item = T> {
    File::open(path)
        .ok()
        .map(BufReader::new)
        .into_iter()
        .flat_map(|r| r.lines().map_while(Result::ok))
        .filter_map(|l| serde_json::from_str(&l).ok())
}

/// Default run directory: `runs/<plan>-<UTC timestamp>`.
pub fn default_dir(plan_name: &str) -> PathBuf {
    PathBuf::from("runs").join(format!("{plan_name}-{}", Timestamp::now().compact()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Status;

    fn record(cell: &str, status: Status) -> CellRecord {
        CellRecord {
            cell: cell.into(),
            config: "c".into(),
            phase: "p".into(),
            workload: "w".into(),
            context_tokens: 1024,
            concurrency: 1,
            status,
            failure: None,
            metrics: None,
            started_at: Timestamp::from_unix_ms(0),
            finished_at: Timestamp::from_unix_ms(1000),
            warnings: Vec::new(),
            repetitions: Vec::new(),
            spread: None,
            beside: Vec::new(),
            gpus: Vec::new(),
        }
    }

    #[test]
    fn appends_reads_and_repairs_a_torn_tail() {
        let dir = std::env::temp_dir().join(format!("sweeptop-store-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut run = RunDir::create(&dir, "demo", "name = \"demo\"\n").unwrap();
        run.append_result(&record("a", Status::Skipped)).unwrap();
        run.append_result(&record("b", Status::Skipped)).unwrap();
        drop(run);
        // A crash mid-write leaves half a line.
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.join(RESULTS))
            .unwrap();
        f.write_all(b"{\"cell\":\"c\",\"sta").unwrap();
        drop(f);
        let r = read_results(&dir).unwrap();
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.problems.len(), 1);
        assert!(r.problems[0].contains("torn last line"), "{:?}", r.problems);

        let mut run = RunDir::reopen(&dir).unwrap();
        run.append_result(&record("c", Status::Skipped)).unwrap();
        let r = read_results(&dir).unwrap();
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let cells: Vec<_> = r.records.iter().map(|r| r.cell.as_str()).collect();
        assert_eq!(cells, ["a", "b", "c"]);
        // Creating over an existing run is refused.
        assert!(RunDir::create(&dir, "demo", "").is_err());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_full_disk_is_a_clear_error_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("sweeptop-store3-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut run = RunDir::create(&dir, "demo", "").unwrap();
        run.append_result(&record("a", Status::Skipped)).unwrap();
        drop(run);
        // Stand in for a full disk: /dev/full fails every write with ENOSPC.
        let kept = fs::read(dir.join(RESULTS)).unwrap();
        fs::rename(dir.join(RESULTS), dir.join("kept.jsonl")).unwrap();
        std::os::unix::fs::symlink("/dev/full", dir.join(RESULTS)).unwrap();
        let mut run = RunDir::open_files(&dir, lock(&dir).unwrap(), None).unwrap();
        let err = run
            .append_result(&record("b", Status::Skipped))
            .unwrap_err()
            .to_string();
        assert!(err.contains("results.jsonl"), "{err}");
        assert!(err.to_lowercase().contains("no space"), "{err}");
        // What was recorded before is untouched.
        assert_eq!(fs::read(dir.join("kept.jsonl")).unwrap(), kept);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn last_record_per_cell_wins() {
        let dir = std::env::temp_dir().join(format!("sweeptop-store2-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let mut run = RunDir::create(&dir, "demo", "").unwrap();
        run.append_result(&record("a", Status::Skipped)).unwrap();
        run.append_result(&record("a", Status::Failed)).unwrap();
        let r = read_results(&dir).unwrap();
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.records[0].status, Status::Failed);
        let _ = fs::remove_dir_all(&dir);
    }

    fn fresh(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sweeptop-store-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn mode(p: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_missing_or_corrupt_run_json_is_rebuilt_on_resume() {
        for damage in ["missing", "corrupt", "empty"] {
            let dir = fresh(&format!("meta-{damage}"));
            let mut run = RunDir::create(&dir, "demo", "name = \"demo\"\n").unwrap();
            let mut r = record("a", Status::Skipped);
            r.started_at = Timestamp::from_unix_ms(1_000_000);
            run.append_result(&r).unwrap();
            drop(run);
            // As a kill -9 before the first rename left it.
            fs::write(dir.join(META_TMP), "{\"plan\":").unwrap();
            match damage {
                "missing" => fs::remove_file(dir.join(META)).unwrap(),
                "corrupt" => fs::write(dir.join(META), "{\"plan\": 12").unwrap(),
                _ => fs::write(dir.join(META), "").unwrap(),
            }
            // Listed as a run still, with what the directory tells.
            let seen = run_meta(&dir).expect("a run");
            assert_eq!(seen.plan, "demo");
            assert_eq!(seen.state, RunState::Interrupted);
            let run = RunDir::reopen(&dir).unwrap();
            assert_eq!(run.repairs.len(), 1, "{damage}: {:?}", run.repairs);
            assert!(run.repairs[0].contains("rebuilt"), "{:?}", run.repairs);
            assert!(!dir.join(META_TMP).exists());
            let meta = read_meta(&dir).unwrap();
            assert_eq!(meta.plan, "demo");
            assert_eq!(meta.state, RunState::Running);
            assert!(meta.started_at <= Timestamp::from_unix_ms(1_000_000));
            run.set_state(RunState::Finished).unwrap();
            assert_eq!(read_meta(&dir).unwrap().state, RunState::Finished);
            let _ = fs::remove_dir_all(&dir);
        }
    }

    #[test]
    fn a_new_run_refuses_a_foreign_directory_and_keeps_the_users_permissions() {
        use std::os::unix::fs::PermissionsExt;
        // Something else's directory: refused, untouched.
        let dir = fresh("foreign");
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("notes.txt"), "mine").unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).unwrap();
        let err = RunDir::create(&dir, "demo", "").err().unwrap().to_string();
        assert!(
            err.contains("not empty") && err.contains("notes.txt"),
            "{err}"
        );
        assert_eq!(mode(&dir), 0o1777);
        assert!(!dir.join(PLAN).exists());
        // An empty one the user made: used, its permissions kept (a shared
        // temporary directory keeps its sticky bit and world access).
        fs::remove_file(dir.join("notes.txt")).unwrap();
        let run = RunDir::create(&dir, "demo", "").unwrap();
        assert_eq!(mode(&dir), 0o1777);
        drop(run);
        let _ = fs::remove_dir_all(&dir);
        // One made here is its owner's alone.
        let dir = fresh("made");
        let run = RunDir::create(&dir.join("run"), "demo", "").unwrap();
        assert_eq!(mode(&dir.join("run")), 0o700);
        drop(run);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn one_sweep_per_directory_and_the_loser_writes_nothing() {
        let dir = fresh("lock");
        let run = RunDir::create(&dir, "demo", "").unwrap();
        assert!(is_locked(&dir));
        let meta_before = fs::read(dir.join(META)).unwrap();
        // No control socket is needed for the guard: the lock is held.
        let err = RunDir::reopen(&dir).err().unwrap().to_string();
        assert!(err.contains("already running"), "{err}");
        let err = RunDir::create(&dir, "demo", "").err().unwrap().to_string();
        assert!(err.contains("already holds a run"), "{err}");
        assert_eq!(fs::read(dir.join(META)).unwrap(), meta_before);
        // The owner gone (however it died), the directory can be resumed.
        drop(run);
        assert!(!is_locked(&dir));
        let again = RunDir::reopen(&dir).unwrap();
        assert!(is_locked(&dir));
        drop(again);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn resuming_a_finished_run_that_records_nothing_keeps_its_end() {
        let dir = fresh("finished");
        let mut run = RunDir::create(&dir, "demo", "").unwrap();
        run.append_result(&record("a", Status::Skipped)).unwrap();
        run.set_state(RunState::Finished).unwrap();
        drop(run);
        let before = read_meta(&dir).unwrap();
        let run = RunDir::reopen(&dir).unwrap();
        assert_eq!(read_meta(&dir).unwrap().state, RunState::Running);
        run.set_state(RunState::Finished).unwrap();
        assert_eq!(read_meta(&dir).unwrap(), before);
        drop(run);
        // A resume that records a cell has a new end.
        let mut run = RunDir::reopen(&dir).unwrap();
        run.append_result(&record("b", Status::Skipped)).unwrap();
        run.set_state(RunState::Finished).unwrap();
        assert_ne!(read_meta(&dir).unwrap().finished_at, before.finished_at);
        drop(run);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_ok_without_tokens_and_foreign_cells_are_not_results() {
        let dir = fresh("invalid");
        let mut run = RunDir::create(&dir, "demo", "").unwrap();
        run.append_result(&record("a", Status::Skipped)).unwrap();
        // A hand edit: "ok" with no metrics.
        run.append_result(&record("b", Status::Ok)).unwrap();
        run.append_result(&record("elsewhere", Status::Skipped))
            .unwrap();
        let mut r = read_results(&dir).unwrap();
        let cells: Vec<_> = r.records.iter().map(|r| r.cell.as_str()).collect();
        assert_eq!(cells, ["a", "elsewhere"]);
        assert!(
            r.problems[0].contains("ok without tokens"),
            "{:?}",
            r.problems
        );
        r.only_cells(["a", "b"]);
        let cells: Vec<_> = r.records.iter().map(|r| r.cell.as_str()).collect();
        assert_eq!(cells, ["a"]);
        assert!(r.problems[1].contains("1 record(s)"), "{:?}", r.problems);
        drop(run);
        let _ = fs::remove_dir_all(&dir);
    }
}
