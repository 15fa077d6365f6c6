//! The event stream: everything the engine tells the rest of the program. The
//! store persists it, the headless printer and the dashboard fold over it.

use serde::{Deserialize, Serialize};

use crate::store::CellRecord;

/// One thing that happened in a sweep. Persisted to `events.jsonl` except `Log`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    SweepStarted {
        at: String,
        plan: String,
        run_dir: String,
        configs: usize,
        cells: usize,
        already_done: usize,
    },
    ConfigStarting {
        at: String,
        config: String,
        phase: String,
        index: usize,
        total: usize,
        command: String,
        attempt: u32,
    },
    ServerReady {
        at: String,
        config: String,
        pid: u32,
        after_s: f64,
        context_limit: Option<u64>,
        model: String,
    },
    CellStarted {
        at: String,
        cell: String,
        config: String,
    },
    CellFinished {
        at: String,
        record: Box<CellRecord>,
    },
    ServerExited {
        at: String,
        config: String,
        code: Option<i32>,
        signal: Option<i32>,
    },
    ServerStopped {
        at: String,
        config: String,
        /// The last signal it took: SIGINT, SIGTERM or SIGKILL (or "exited").
        how: String,
        after_s: f64,
    },
    /// A user action (key, attach client or signal), recorded as it was taken.
    Action {
        at: String,
        action: String,
        target: Option<String>,
        source: String,
    },
    Paused {
        at: String,
    },
    Resumed {
        at: String,
    },
    Notice {
        at: String,
        level: Level,
        message: String,
    },
    /// A GPU telemetry sample (kept in `gpu.jsonl`, not `events.jsonl`).
    Gpu {
        snapshot: crate::gpu::GpuSnapshot,
    },
    Log {
        config: String,
        line: String,
        mark: LogMark,
    },
    SweepFinished {
        at: String,
        ok: usize,
        failed: usize,
        skipped: usize,
    },
    SweepInterrupted {
        at: String,
        reason: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// How a log line was classified, for highlighting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogMark {
    Plain,
    Failure,
    Ready,
}

impl Event {
    /// Whether the event belongs in `events.jsonl`.
    pub fn persisted(&self) -> bool {
        !matches!(self, Event::Log { .. } | Event::Gpu { .. })
    }
}

/// Now as RFC 3339 UTC with milliseconds.
pub fn now() -> String {
    let t = time::OffsetDateTime::now_utc();
    let f = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    t.format(&f)
        .unwrap_or_else(|_| t.unix_timestamp().to_string())
}

/// Now as a compact UTC stamp for directory names.
pub fn stamp() -> String {
    let t = time::OffsetDateTime::now_utc();
    let f = time::macros::format_description!("[year][month][day]-[hour][minute][second]");
    t.format(&f)
        .unwrap_or_else(|_| t.unix_timestamp().to_string())
}
