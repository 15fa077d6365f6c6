//! A config's server log on disk, capped at `limits.log_max_mb`: its head
//! (the first half of the cap: start-up, the model load, the first errors)
//! stays in `<config>.log`, which then says where the rest went; the newest
//! lines go to two segments, `<config>.log.1` and `<config>.log.2`, a quarter
//! of the cap each, the older one emptied when the newer is full. A flooding
//! server never fills the disk; the classifier still sees every line (it
//! reads them before they are written here).
//!
//! The file is written by a thread of its own ([`LogSink`]): a run directory
//! on a disk that stalls never holds up the pipe readers (so never the
//! server's own writes), the classifier, or the runtime. While the disk does
//! not keep up, lines beyond [`SINK_MAX_QUEUED`] bytes are left out of the file
//! (classified all the same), and the file says how many where they were.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// How many bytes of lines may wait for a disk that stalls before lines are
/// left out of the file.
pub const SINK_MAX_QUEUED: u64 = 64 << 20;
/// How often lines that trickle in are flushed to the file (what `attach` and
/// `open` read).
const SINK_FLUSH_EVERY: Duration = Duration::from_millis(500);
/// Queued bytes past which the writer is woken before its next flush: lines
/// that trickle in are written in one go each flush, not one wake-up each.
const SINK_WAKE_QUEUED: u64 = 1 << 20;

/// What a log file says when its head is full, and the notice the sweep
/// gives, once each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cut {
    /// The head is full: later lines go to the segments.
    HeadFull,
    /// The segments are full too: the oldest lines after the head are gone.
    Dropping,
}

/// Bytes in MiB as the plan gives them: `512`, or `0.5` below one.
fn mib(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        (bytes >> 20).to_string()
    } else {
        format!("{:.1}", bytes as f64 / f64::from(1u32 << 20))
    }
}

pub struct LogFile {
    path: PathBuf,
    /// The cap in bytes (0: none).
    max: u64,
    head: BufWriter<File>,
    head_bytes: u64,
    tail: Option<Segment>,
    dropping: bool,
}

/// The segment the newest lines are written to.
struct Segment {
    file: BufWriter<File>,
    /// 1 or 2.
    index: u8,
    bytes: u64,
}

impl LogFile {
    /// The log at `path` (appended to: a relaunched server's lines follow
    /// the last one's), capped at `max_bytes` (0: never cut).
    pub fn open(path: &Path, max_bytes: u64) -> std::io::Result<LogFile> {
        let file = File::options().create(true).append(true).open(path)?;
        let head_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(LogFile {
            path: path.to_path_buf(),
            max: max_bytes,
            head: BufWriter::with_capacity(64 << 10, file),
            head_bytes,
            tail: None,
            dropping: false,
        })
    }

    fn segment_path(&self, index: u8) -> PathBuf {
        let mut name = self.path.as_os_str().to_owned();
        name.push(format!(".{index}"));
        PathBuf::from(name)
    }

    /// Write one line (without its newline). What was cut, the first time
    /// the head fills and the first time old lines are dropped.
    pub fn write_line(&mut self, raw: &[u8]) -> std::io::Result<Option<Cut>> {
        let len = raw.len() as u64 + 1;
        if self.max == 0 || (self.tail.is_none() && self.head_bytes + len <= self.max / 2) {
            self.head.write_all(raw)?;
            self.head.write_all(b"\n")?;
            self.head_bytes += len;
            return Ok(None);
        }
        let mut cut = None;
        if self.tail.is_none() {
            let name = |i| {
                self.segment_path(i)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            };
            let note = format!(
                "[sweeptop: this log reached half of limits.log_max_mb ({} MB): later lines are in {} and {}, which keep the newest {} MB]\n",
                mib(self.max),
                name(1),
                name(2),
                mib(self.max / 2)
            );
            self.head.write_all(note.as_bytes())?;
            self.head.flush()?;
            self.tail = Some(self.start_segment(1)?);
            cut = Some(Cut::HeadFull);
        }
        let quarter = (self.max / 4).max(1);
        let full = self
            .tail
            .as_ref()
            .is_some_and(|t| t.bytes > 0 && t.bytes + len > quarter);
        if full {
            let next = self.tail.as_ref().map_or(1, |t| 3 - t.index);
            if let Some(t) = self.tail.as_mut() {
                t.file.flush()?;
            }
            // Emptying the older segment drops its lines: said once.
            if !self.dropping && self.segment_path(next).exists() {
                self.dropping = true;
                cut = Some(Cut::Dropping);
            }
            self.tail = Some(self.start_segment(next)?);
        }
        if let Some(t) = self.tail.as_mut() {
            t.file.write_all(raw)?;
            t.file.write_all(b"\n")?;
            t.bytes += len;
        }
        Ok(cut)
    }

    /// A segment emptied for the newest lines.
    fn start_segment(&self, index: u8) -> std::io::Result<Segment> {
        let file = File::create(self.segment_path(index))?;
        Ok(Segment {
            file: BufWriter::with_capacity(64 << 10, file),
            index,
            bytes: 0,
        })
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.head.flush()?;
        if let Some(t) = self.tail.as_mut() {
            t.file.flush()?;
        }
        Ok(())
    }
}

/// A config's server log written on a thread of its own.
pub struct LogSink {
    lines: std_mpsc::Sender<SinkJob>,
    shared: Arc<SinkShared>,
    /// The writer: it sleeps until its next flush unless woken.
    writer: std::thread::Thread,
}

enum SinkJob {
    Line(Vec<u8>),
    /// Answered once everything sent before is written and flushed.
    Settle(oneshot::Sender<()>),
}

#[derive(Default)]
struct SinkShared {
    queued_bytes: AtomicU64,
    /// The sink is gone: write what is queued and end.
    closed: AtomicBool,
    /// Lines left out while the queue was full, not yet said in the file.
    left_out: AtomicU64,
    /// What the file cut, and problems writing it, for the sweep to tell.
    cuts: Mutex<Vec<Cut>>,
    problems: Mutex<Vec<String>>,
}

impl LogSink {
    /// The log at `path`, capped at `max_bytes`, its first line `first`
    /// (which launch this is): opened and written on a thread named
    /// `server-log`. A file that cannot be opened is a problem to tell, not
    /// a reason not to launch: the classifier reads the lines either way.
    pub fn start(path: &Path, max_bytes: u64, first: &str) -> std::io::Result<LogSink> {
        let (lines, rx) = std_mpsc::channel();
        let shared = Arc::new(SinkShared::default());
        let s = shared.clone();
        let path = path.to_path_buf();
        let first = first.as_bytes().to_vec();
        let writer = std::thread::Builder::new()
            .name("server-log".into())
            .spawn(move || sink_work(&path, max_bytes, &first, &rx, &s))?
            .thread()
            .clone();
        Ok(LogSink {
            lines,
            shared,
            writer,
        })
    }

    /// Queue one line (without its newline); never waits.
    pub fn line(&self, raw: &[u8]) {
        let len = raw.len() as u64 + 1;
        let queued = self.shared.queued_bytes.fetch_add(len, Ordering::SeqCst);
        if queued + len > SINK_MAX_QUEUED || self.lines.send(SinkJob::Line(raw.to_vec())).is_err() {
            self.shared.queued_bytes.fetch_sub(len, Ordering::SeqCst);
            self.shared.left_out.fetch_add(1, Ordering::SeqCst);
        } else if queued + len > SINK_WAKE_QUEUED {
            self.writer.unpark();
        }
    }

    /// Wait, at most `limit`, until every line queued before is in the file.
    pub async fn settle(&self, limit: Duration) -> bool {
        let (tx, rx) = oneshot::channel();
        if self.lines.send(SinkJob::Settle(tx)).is_err() {
            return false;
        }
        self.writer.unpark();
        matches!(tokio::time::timeout(limit, rx).await, Ok(Ok(())))
    }

    /// What the file cut since the last call, each said once.
    pub fn take_cuts(&self) -> Vec<Cut> {
        std::mem::take(&mut *self.shared.cuts.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Problems writing the file since the last call.
    pub fn take_problems(&self) -> Vec<String> {
        std::mem::take(
            &mut *self
                .shared
                .problems
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        )
    }
}

impl Drop for LogSink {
    fn drop(&mut self) {
        self.shared.closed.store(true, Ordering::SeqCst);
        self.writer.unpark();
    }
}

fn sink_work(
    path: &Path,
    max_bytes: u64,
    first: &[u8],
    jobs: &std_mpsc::Receiver<SinkJob>,
    shared: &SinkShared,
) {
    let problem = |e: std::io::Error| {
        shared
            .problems
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!(
                "the server log {} is not written: {e}",
                path.display()
            ));
    };
    let mut file = match LogFile::open(path, max_bytes) {
        Ok(f) => Some(f),
        Err(e) => {
            problem(e);
            None
        }
    };
    let write = |file: &mut Option<LogFile>, raw: &[u8]| {
        let Some(f) = file.as_mut() else { return };
        match f.write_line(raw) {
            Ok(cut) => {
                if let Some(cut) = cut {
                    shared
                        .cuts
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(cut);
                }
            }
            Err(e) => {
                problem(e);
                *file = None;
            }
        }
    };
    write(&mut file, first);
    let mut flushed = Instant::now();
    loop {
        // Asleep until the next flush unless woken (a settle, a queue
        // growing, the end): no wake-up per line.
        std::thread::park_timeout(SINK_FLUSH_EVERY.saturating_sub(flushed.elapsed()));
        let closed = shared.closed.load(Ordering::SeqCst);
        let left_out = shared.left_out.swap(0, Ordering::SeqCst);
        if left_out > 0 {
            let note = format!(
                "[sweeptop: {left_out} line(s) left out here: the disk did not keep up (every line was classified)]"
            );
            write(&mut file, note.as_bytes());
        }
        let mut gone = closed;
        loop {
            match jobs.try_recv() {
                Ok(SinkJob::Line(raw)) => {
                    write(&mut file, &raw);
                    shared
                        .queued_bytes
                        .fetch_sub(raw.len() as u64 + 1, Ordering::SeqCst);
                }
                Ok(SinkJob::Settle(done)) => {
                    if let Some(f) = file.as_mut() {
                        let _ = f.flush();
                    }
                    flushed = Instant::now();
                    let _ = done.send(());
                }
                Err(std_mpsc::TryRecvError::Empty) => break,
                Err(std_mpsc::TryRecvError::Disconnected) => {
                    gone = true;
                    break;
                }
            }
        }
        if gone {
            break;
        }
        if flushed.elapsed() >= SINK_FLUSH_EVERY {
            if let Some(f) = file.as_mut() {
                let _ = f.flush();
            }
            flushed = Instant::now();
        }
    }
    if let Some(f) = file.as_mut() {
        let _ = f.flush();
    }
}

impl Cut {
    /// The notice, for the config whose log this is.
    pub fn notice(&self, config: &str, max_bytes: u64) -> String {
        let mb = max_bytes >> 20;
        match self {
            Cut::HeadFull => format!(
                "{config}: the server log reached half of limits.log_max_mb ({mb} MB): its head stays in logs/{config}.log, the newest lines go to logs/{config}.log.1 and .2"
            ),
            Cut::Dropping => format!(
                "{config}: the server log is over limits.log_max_mb ({mb} MB): the oldest lines after its head are dropped (every line is still classified)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh scratch directory for one test.
    fn scratch(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("sweeptop-logfile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn size(p: &Path) -> u64 {
        std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
    }

    #[test]
    fn a_flood_keeps_the_head_and_the_newest_lines_within_the_cap() {
        let dir = scratch("flood");
        let path = dir.join("c.log");
        let max = 4096;
        let mut log = LogFile::open(&path, max).unwrap();
        let mut cuts = Vec::new();
        for i in 0..2000 {
            if let Some(c) = log.write_line(format!("line {i:05}").as_bytes()).unwrap() {
                cuts.push((i, c));
            }
        }
        log.flush().unwrap();
        assert_eq!(cuts.len(), 2, "{cuts:?}");
        assert_eq!(cuts[0].1, Cut::HeadFull);
        assert_eq!(cuts[1].1, Cut::Dropping);
        let (one, two) = (dir.join("c.log.1"), dir.join("c.log.2"));
        let total = size(&path) + size(&one) + size(&two);
        assert!(
            total <= max + 300,
            "{total} bytes on disk for a cap of {max}"
        );
        // The head starts at the first line and says where the rest went.
        let head = std::fs::read_to_string(&path).unwrap();
        assert!(head.starts_with("line 00000\n"), "{head}");
        assert!(
            head.contains("later lines are in c.log.1 and c.log.2"),
            "{head}"
        );
        // The newest line is kept, in the segment written last.
        let newest = [&one, &two]
            .iter()
            .map(|p| std::fs::read_to_string(p).unwrap())
            .find(|t| t.ends_with("line 01999\n"));
        assert!(newest.is_some());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_cap_writes_everything_to_one_file() {
        let dir = scratch("nocap");
        let path = dir.join("c.log");
        let mut log = LogFile::open(&path, 0).unwrap();
        for _ in 0..1000 {
            assert_eq!(log.write_line(b"0123456789").unwrap(), None);
        }
        log.flush().unwrap();
        assert_eq!(size(&path), 11_000);
        assert!(!dir.join("c.log.1").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
