//! `gpu.jsonl`: the GPU samples of a sweep, at most one line per 10 s so a
//! day-long sweep stays small, and the last of them read back.

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;

use super::file::read_lines;
use super::GPU;
use crate::model::{text, GpuSnapshot};

/// Where a sweep keeps its GPU samples. Write errors are ignored (the
/// samples are telemetry, not results).
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

/// The last `keep` GPU samples kept in `gpu.jsonl`.
pub fn read_gpu(dir: &Path, keep: usize) -> Vec<GpuSnapshot> {
    let mut last = VecDeque::with_capacity(keep);
    for snap in read_lines(&dir.join(GPU)) {
        if last.len() == keep {
            last.pop_front();
        }
        last.push_back(snap);
    }
    last.into()
}
