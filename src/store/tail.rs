//! Following a sweep directory's shards through their files, as a viewer
//! must when they run on other machines (no socket reaches between them):
//! every [`TAIL_POLL`], the new lines of each shard's `events.jsonl`, server
//! logs and `gpu.jsonl`, a bounded chunk of each file at a time; and whether
//! the sweep has ended.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use super::events::is_shards_own;
use super::results::read_results;
use super::sweep::{read_heartbeat, shard_dirs, ShardState, Sweep, SHARDS};
use super::{EVENTS, GPU, LOGS};
use crate::model::{Event, GpuSnapshot, LogMark, Status, Timestamp};

/// How often the shards' files are read.
pub const TAIL_POLL: Duration = Duration::from_millis(500);
/// How often which shards are the sweep's is judged again (their plans
/// hashed, their `shard.json` read) when no entry came or went: one that
/// did changes its folder's time and is seen at the next poll.
const SWEEP_REFRESH: Duration = Duration::from_secs(5);
/// Most bytes read from one file per poll (a burst of log lines is cut).
const TAIL_CHUNK: u64 = 1 << 20;
/// How far back in a shard's `gpu.jsonl` a new viewer starts (its last samples).
const GPU_TAIL: u64 = 64 << 10;

/// A sweep directory's shards, followed from where their files ended when
/// the viewer came.
pub struct SweepTail {
    dir: PathBuf,
    /// Per file: how far it has been read.
    offsets: HashMap<PathBuf, u64>,
    /// The sweep as last judged: not every poll (see [`SWEEP_REFRESH`]).
    judged: Option<Judged>,
}

struct Judged {
    sweep: Option<Sweep>,
    at: Instant,
    listing: [Option<SystemTime>; 2],
}

/// When the sweep directory's and its `shards/` listings last changed.
fn listing(dir: &Path) -> [Option<SystemTime>; 2] {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    [modified(dir), modified(&dir.join(SHARDS))]
}

/// A shard's newest GPU sample and the host it was taken on (its
/// heartbeat's, else `shard N`).
pub struct ShardGpu {
    pub host: String,
    pub snapshot: GpuSnapshot,
}

impl SweepTail {
    /// Following from the files' current ends (`gpu.jsonl` from its last
    /// samples, so the GPU panel is not empty until the next one).
    pub fn new(dir: &Path) -> SweepTail {
        let mut offsets = HashMap::new();
        for (_, d) in shard_dirs(dir) {
            for f in followed_files(&d) {
                let len = std::fs::metadata(&f).map_or(0, |m| m.len());
                offsets.insert(f, len);
            }
            let gpu = d.join(GPU);
            let len = std::fs::metadata(&gpu).map_or(0, |m| m.len());
            offsets.insert(gpu, len.saturating_sub(GPU_TAIL));
        }
        SweepTail {
            dir: dir.to_path_buf(),
            offsets,
            judged: None,
        }
    }

    /// The sweep, judged again when an entry came or went, or every
    /// [`SWEEP_REFRESH`].
    fn sweep(&mut self) -> Option<&Sweep> {
        let now = listing(&self.dir);
        let fresh = self
            .judged
            .as_ref()
            .is_some_and(|j| j.listing == now && j.at.elapsed() < SWEEP_REFRESH);
        if !fresh {
            self.judged = Some(Judged {
                sweep: Sweep::open(&self.dir),
                at: Instant::now(),
                listing: now,
            });
        }
        self.judged.as_ref()?.sweep.as_ref()
    }

    /// The sweep's own shard run directories, by index.
    fn shards(&mut self) -> Vec<(u32, PathBuf)> {
        self.sweep().map(|s| s.shards.clone()).unwrap_or_default()
    }

    /// Each shard's newest GPU sample since the last poll (a partial first
    /// line after a jump to the file's tail does not read, and is skipped).
    pub fn poll_gpus(&mut self) -> Vec<ShardGpu> {
        let mut out = Vec::new();
        for (i, d) in self.shards() {
            let newest = self
                .new_lines(&d.join(GPU))
                .iter()
                .rev()
                .find_map(|l| serde_json::from_str::<GpuSnapshot>(l).ok());
            if let Some(snapshot) = newest {
                let host = read_heartbeat(&d).map_or_else(|| format!("shard {i}"), |b| b.host);
                out.push(ShardGpu { host, snapshot });
            }
        }
        out
    }

    /// What the shards wrote since the last poll, as events (server log
    /// lines too), each with its shard: shard by shard, its events, then its
    /// logs' lines. A shard's own start and end are not the sweep's.
    pub fn poll_events(&mut self) -> Vec<(u32, Event)> {
        let mut out = Vec::new();
        for (i, d) in self.shards() {
            for line in self.new_lines(&d.join(EVENTS)) {
                match serde_json::from_str::<Event>(&line) {
                    Ok(ev) if !is_shards_own(&ev) => out.push((i, ev)),
                    _ => {}
                }
            }
            for f in followed_files(&d).into_iter().skip(1) {
                let Some(config) = f
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .filter(|_| f.extension().is_some_and(|e| e == "log"))
                    .map(str::to_string)
                else {
                    continue;
                };
                for line in self.new_lines(&f) {
                    let config = config.clone();
                    let mark = LogMark::Plain;
                    out.push((i, Event::Log { config, line, mark }));
                }
            }
        }
        out
    }

    /// How the sweep ended, once no shard runs or waits to: finished when
    /// every shard has, else interrupted.
    pub fn ended(&mut self) -> Option<Event> {
        let sweep = self.sweep()?;
        let states: Vec<_> = (1..=sweep.meta.shards).map(|i| sweep.state(i)).collect();
        if states
            .iter()
            .any(|s| s.is_running() || *s == ShardState::Pending)
        {
            return None;
        }
        let at = Timestamp::now();
        if states.iter().all(|s| *s == ShardState::Finished) {
            let results = read_results(&self.dir).unwrap_or_default();
            let count = |st: Status| results.records.iter().filter(|r| r.status == st).count();
            return Some(Event::SweepFinished {
                at,
                ok: count(Status::Ok),
                failed: count(Status::Failed),
                skipped: count(Status::Skipped),
            });
        }
        Some(Event::SweepInterrupted {
            at,
            reason: format!(
                "no shard is running; continue with `sweeptop slurm --resume {}`",
                self.dir.display()
            ),
        })
    }

    /// Complete new lines of `path` since the last read; nothing from a
    /// file that is not a regular one (a FIFO would never end), opened
    /// without waiting on it.
    fn new_lines(&mut self, path: &Path) -> Vec<String> {
        let at = self.offsets.get(path).copied().unwrap_or(0);
        let Ok(mut f) = super::shared::open_regular(path) else {
            return Vec::new();
        };
        let len = f.metadata().map_or(0, |m| m.len());
        let at = if len < at { 0 } else { at };
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(at)).is_err() || f.take(TAIL_CHUNK).read_to_end(&mut buf).is_err()
        {
            return Vec::new();
        }
        let end = match buf.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            // One line longer than a chunk: skip it.
            None if buf.len() as u64 >= TAIL_CHUNK => buf.len(),
            None => 0,
        };
        self.offsets.insert(path.to_path_buf(), at + end as u64);
        String::from_utf8_lossy(&buf[..end])
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// A shard's files that are followed line by line: its events first, then
/// its server logs (`<config>.log`; a capped log's newest-lines segments,
/// `.log.1` and `.log.2`, are not followed).
fn followed_files(shard_dir: &Path) -> Vec<PathBuf> {
    let mut v = vec![shard_dir.join(EVENTS)];
    if let Ok(entries) = std::fs::read_dir(shard_dir.join(LOGS)) {
        v.extend(
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "log")),
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::sweep::shard_dir;
    use super::*;

    #[test]
    fn a_fifo_among_a_shards_files_is_skipped_without_waiting() {
        let dir = std::env::temp_dir().join(format!("sweeptop-tail-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let shard = shard_dir(&dir, 0);
        std::fs::create_dir_all(shard.join(LOGS)).unwrap();
        for f in [shard.join(EVENTS), shard.join(LOGS).join("a.log")] {
            let c = std::ffi::CString::new(f.as_os_str().as_encoded_bytes()).unwrap();
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        }
        let mut tail = SweepTail::new(&dir);
        assert!(tail.poll_events().is_empty());
        assert!(tail.poll_gpus().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
