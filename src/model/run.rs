//! What `run.json` says about a run: its plan, when it started, and its
//! [`RunState`].

use std::fmt;

use serde::{Deserialize, Serialize};

use super::Timestamp;

/// Where a run stands. A run whose process died without saying so is recorded
/// as `Running` with a dead pid; readers that can tell (`ls`) show it as
/// `Interrupted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Running,
    Finished,
    Interrupted,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Finished => "finished",
            RunState::Interrupted => "interrupted",
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `run.json`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunMeta {
    pub plan: String,
    pub started_at: Timestamp,
    pub sweeptop_version: String,
    pub state: RunState,
    pub pid: u32,
    #[serde(default)]
    pub finished_at: Option<Timestamp>,
    /// The clock chunks were timed on (the kernel's receive time, or when
    /// read); absent in runs made before it was said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timing_clock: Option<super::Clock>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_are_written_as_before() {
        for s in [RunState::Running, RunState::Finished, RunState::Interrupted] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{s}\""));
        }
        let meta: RunMeta = serde_json::from_str(
            r#"{"plan":"demo","started_at":"2026-12-03T08:16:24.123Z","sweeptop_version":"0.1.0","state":"interrupted","pid":42}"#,
        )
        .unwrap();
        assert_eq!(meta.state, RunState::Interrupted);
        assert_eq!(meta.finished_at, None);
    }
}
