//! The event stream: everything the engine tells the rest of the program. The
//! store persists it (`events.jsonl`), every view folds over it.

use serde::{Deserialize, Serialize};

use super::{CellRecord, GpuSnapshot, ServerMeta, Timestamp};

/// One thing that happened in a sweep. Persisted to `events.jsonl` except `Log`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    SweepStarted {
        at: Timestamp,
        plan: String,
        run_dir: String,
        configs: usize,
        cells: usize,
        already_done: usize,
    },
    ConfigStarting {
        at: Timestamp,
        config: String,
        phase: String,
        index: usize,
        total: usize,
        command: String,
        attempt: u32,
        /// The GPUs it runs on (picked at launch for `auto:N`); empty when unknown.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        gpus: Vec<u32>,
    },
    ServerReady {
        at: Timestamp,
        config: String,
        pid: u32,
        after_s: f64,
        context_limit: Option<u64>,
        model: String,
        /// What was benchmarked (absent in runs recorded before it was).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        server: Option<Box<ServerMeta>>,
    },
    CellStarted {
        at: Timestamp,
        cell: String,
        config: String,
    },
    CellFinished {
        at: Timestamp,
        record: Box<CellRecord>,
    },
    ServerExited {
        at: Timestamp,
        config: String,
        code: Option<i32>,
        signal: Option<i32>,
    },
    ServerStopped {
        at: Timestamp,
        config: String,
        /// The last signal it took: SIGINT, SIGTERM or SIGKILL (or "exited").
        how: String,
        after_s: f64,
    },
    /// A user action (key, attach client or signal), recorded as it was taken.
    Action {
        at: Timestamp,
        action: String,
        target: Option<String>,
        source: String,
    },
    Paused {
        at: Timestamp,
    },
    Resumed {
        at: Timestamp,
    },
    Notice {
        at: Timestamp,
        level: Level,
        message: String,
    },
    /// How many attached views watch the sweep (not recorded; sent when it
    /// changes).
    Viewers {
        count: u32,
    },
    /// A GPU telemetry sample (kept in `gpu.jsonl`, not `events.jsonl`).
    Gpu {
        snapshot: GpuSnapshot,
    },
    Log {
        config: String,
        line: String,
        mark: LogMark,
    },
    /// A prepare step starts (its target is missing or not whole).
    PrepareStarted {
        at: Timestamp,
        step: String,
        command: String,
        creates: Vec<String>,
        /// The size `creates` has when whole, when known.
        expect_bytes: Option<u64>,
        /// The configs waiting for it.
        configs: Vec<String>,
    },
    /// How far a running step is: the size of what it creates. Sent every
    /// second to the views; every tenth is `recorded` in `events.jsonl`
    /// (and printed by the line views).
    PrepareProgress {
        at: Timestamp,
        step: String,
        bytes: u64,
        expect_bytes: Option<u64>,
        /// Bytes per second over the last few seconds.
        rate_bps: f64,
        recorded: bool,
    },
    /// A step ended: `present` (already in place, not run), `done`, or
    /// `failed` (with why).
    PrepareEnded {
        at: Timestamp,
        step: String,
        outcome: PrepareOutcome,
        bytes: u64,
        duration_s: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        /// The configs that needed it.
        configs: Vec<String>,
    },
    SweepFinished {
        at: Timestamp,
        ok: usize,
        failed: usize,
        skipped: usize,
    },
    SweepInterrupted {
        at: Timestamp,
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

/// How a prepare step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrepareOutcome {
    /// Its target was in place and whole: not run.
    Present,
    Done,
    Failed,
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
        !matches!(
            self,
            Event::Log { .. }
                | Event::Gpu { .. }
                | Event::Viewers { .. }
                | Event::PrepareProgress {
                    recorded: false,
                    ..
                }
        )
    }

    /// The time the event carries (log lines and GPU samples carry none).
    pub fn at(&self) -> Option<Timestamp> {
        Some(match self {
            Event::SweepStarted { at, .. }
            | Event::ConfigStarting { at, .. }
            | Event::ServerReady { at, .. }
            | Event::CellStarted { at, .. }
            | Event::CellFinished { at, .. }
            | Event::ServerExited { at, .. }
            | Event::ServerStopped { at, .. }
            | Event::Action { at, .. }
            | Event::Paused { at }
            | Event::Resumed { at }
            | Event::Notice { at, .. }
            | Event::PrepareStarted { at, .. }
            | Event::PrepareProgress { at, .. }
            | Event::PrepareEnded { at, .. }
            | Event::SweepFinished { at, .. }
            | Event::SweepInterrupted { at, .. } => *at,
            Event::Gpu { .. } | Event::Log { .. } | Event::Viewers { .. } => return None,
        })
    }
}

/// Whose lines a prepare step's output is in the log pane: `prepare:qwen`.
pub fn prepare_log_name(step: &str) -> String {
    format!("prepare:{step}")
}

/// How a process ended, in words: "killed by SIGKILL", "exit code 1".
pub fn describe_exit(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (_, Some(s)) => format!("killed by {}", signal_name(s)),
        (Some(c), None) => format!("exit code {c}"),
        (None, None) => "exited".into(),
    }
}

/// `SIGKILL`, or `signal 42` for a number that names no signal.
pub fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_in_words() {
        assert_eq!(describe_exit(None, Some(9)), "killed by SIGKILL");
        assert_eq!(describe_exit(Some(1), None), "exit code 1");
        assert_eq!(describe_exit(None, None), "exited");
        assert_eq!(signal_name(11), "SIGSEGV");
        assert_eq!(signal_name(99), "signal 99");
    }

    #[test]
    fn the_wire_form_is_unchanged() {
        let at = Timestamp::parse("2026-12-03T08:16:24.123Z").unwrap();
        let ev = Event::Paused { at };
        let json = serde_json::to_string(&ev).unwrap();
        assert_eq!(
            json,
            r#"{"event":"paused","at":"2026-12-03T08:16:24.123Z"}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&json).unwrap(), ev);
        assert_eq!(ev.at(), Some(at));
    }
}
