//! The run directory: frozen plan, append-only `results.jsonl` (fsynced per cell),
//! `events.jsonl`, server logs, and reading runs back for resume, export and `open`.

mod requests;

pub use requests::{read_requests, RequestsWriter};

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::model::{CellRecord, Event, GpuSnapshot, RunMeta, RunState, Timestamp};

pub const RESULTS: &str = "results.jsonl";
pub const EVENTS: &str = "events.jsonl";
pub const GPU: &str = "gpu.jsonl";
pub const PLAN: &str = "plan.toml";
pub const META: &str = "run.json";
pub const SERVER_PID: &str = "server.pid";
pub const LOGS: &str = "logs";
pub const REQUESTS: &str = "requests";

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

/// An open run directory that results are appended to.
pub struct RunDir {
    pub path: PathBuf,
    results: File,
    events: BufWriter<File>,
}

impl RunDir {
    /// Create a new run directory for a plan; refuses a directory that already
    /// holds results (that is what `--resume` is for).
    pub fn create(path: &Path, plan_name: &str, plan_source: &str) -> Result<RunDir, StoreError> {
        if path.join(RESULTS).exists() {
            return Err(StoreError::Invalid(format!(
                "{} already holds a run; continue it with `sweeptop run --resume {}`",
                path.display(),
                path.display()
            )));
        }
        fs::create_dir_all(path.join(LOGS)).map_err(io_err(path))?;
        let plan_path = path.join(PLAN);
        write_synced(&plan_path, plan_source.as_bytes())?;
        let meta = RunMeta {
            plan: plan_name.to_string(),
            started_at: Timestamp::now(),
            sweeptop_version: env!("CARGO_PKG_VERSION").to_string(),
            state: RunState::Running,
            pid: std::process::id(),
            finished_at: None,
        };
        write_meta(path, &meta)?;
        let run = RunDir::open_files(path)?;
        // Make the new files' directory entries durable too.
        if let Ok(d) = File::open(path) {
            let _ = d.sync_all();
        }
        Ok(run)
    }

    /// Reopen a run directory to continue it. A torn last line of `results.jsonl`
    /// (a crash mid-write) is cut off so that cell runs again.
    pub fn reopen(path: &Path) -> Result<RunDir, StoreError> {
        if !path.join(PLAN).exists() {
            return Err(StoreError::Invalid(format!(
                "{} is not a run directory (no {PLAN})",
                path.display()
            )));
        }
        repair_tail(&path.join(RESULTS))?;
        if let Ok(mut meta) = read_meta(path) {
            meta.state = RunState::Running;
            meta.pid = std::process::id();
            meta.finished_at = None;
            write_meta(path, &meta)?;
        }
        fs::create_dir_all(path.join(LOGS)).map_err(io_err(path))?;
        RunDir::open_files(path)
    }

    fn open_files(path: &Path) -> Result<RunDir, StoreError> {
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
        })
    }

    /// Append one finished cell and make it durable before returning.
    pub fn append_result(&mut self, record: &CellRecord) -> Result<(), StoreError> {
        let mut line = serde_json::to_vec(record)
            .map_err(|e| StoreError::Invalid(format!("cannot encode result: {e}")))?;
        line.push(b'\n');
        let p = self.path.join(RESULTS);
        self.results.write_all(&line).map_err(io_err(&p))?;
        self.results.sync_data().map_err(io_err(&p))?;
        Ok(())
    }

    /// Record an event (not log lines or GPU samples: those have their own files).
    pub fn append_event(&mut self, event: &Event) -> Result<(), StoreError> {
        let p = self.path.join(EVENTS);
        serde_json::to_writer(&mut self.events, event)
            .map_err(|e| StoreError::Invalid(format!("cannot encode event: {e}")))?;
        self.events.write_all(b"\n").map_err(io_err(&p))?;
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

    pub fn set_state(&self, state: RunState) -> Result<(), StoreError> {
        let mut meta = read_meta(&self.path)?;
        meta.state = state;
        if state != RunState::Running {
            meta.finished_at = Some(Timestamp::now());
        }
        write_meta(&self.path, &meta)
    }

    /// Remember the process group of the running server and its leader's start
    /// time (0 when unknown), so a later `--resume` can stop it if this process
    /// is killed, and never a process that reused the number.
    pub fn record_server(&self, pgid: u32, start: u64) -> Result<(), StoreError> {
        write_synced(
            &self.path.join(SERVER_PID),
            format!("{pgid} {start}\n").as_bytes(),
        )
    }

    pub fn clear_server(&self) {
        let _ = fs::remove_file(self.path.join(SERVER_PID));
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
        if serde_json::to_writer(&mut *f, snap).is_ok() {
            let _ = f.write_all(b"\n");
            let _ = f.flush();
        }
    }
}

/// The server process group an earlier run left recorded: (pgid, start time).
pub fn recorded_server(dir: &Path) -> Option<(u32, u64)> {
    let text = fs::read_to_string(dir.join(SERVER_PID)).ok()?;
    let mut it = text.split_whitespace();
    let pgid = it.next()?.parse().ok()?;
    let start = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    Some((pgid, start))
}

pub fn read_meta(dir: &Path) -> Result<RunMeta, StoreError> {
    let p = dir.join(META);
    let text = fs::read_to_string(&p).map_err(io_err(&p))?;
    serde_json::from_str(&text).map_err(|e| StoreError::Invalid(format!("{}: {e}", p.display())))
}

fn write_meta(dir: &Path, meta: &RunMeta) -> Result<(), StoreError> {
    let text = serde_json::to_string_pretty(meta)
        .map_err(|e| StoreError::Invalid(format!("cannot encode run.json: {e}")))?;
    // Write-then-rename so a crash never leaves a half-written run.json.
    let tmp = dir.join(".run.json.tmp");
    write_synced(&tmp, text.as_bytes())?;
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
}

pub fn read_results(dir: &Path) -> Result<Results, StoreError> {
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
pub fn read_events(dir: &Path) -> Vec<Event> {
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
        let mut run = RunDir::open_files(&dir).unwrap();
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
}
