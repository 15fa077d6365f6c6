//! The streaming watcher over one server's output: the first fatal cause
//! with the lines around it, a bounded tail, readiness, the latest
//! speculative-decoding statistics.

use std::collections::VecDeque;
use std::sync::Arc;

use super::patterns::LogPatterns;
use super::LineClass;
use crate::detect::text::clean_stripped_into;
use crate::detect::{strip_ansi, traceback};
use crate::model::{Failure, FailureKind, FailureSource};

/// Lines kept for [`LogWatch::tail`] (and for the evidence before a cause).
pub const TAIL_KEEP: usize = 200;
/// Lines of context kept on each side of the causing line.
pub const EVIDENCE_CONTEXT: usize = 10;

#[derive(Debug, Clone)]
struct Cause {
    kind: FailureKind,
    /// A "server gone" line with no specific cause yet: a specific cause
    /// seen later replaces it, because the parent's "a child died" line can
    /// reach us before the child's traceback (separate pipes, separate
    /// processes).
    weak: bool,
    message: String,
    /// Lines around the cause, each with how many times it came in a row
    /// (the same text after its prefix: eight ranks, a repeated watchdog).
    evidence: Vec<(String, u32)>,
    /// Distinct lines still to keep after the cause.
    after_left: usize,
    /// False once a line that does not repeat the last kept one arrived
    /// after the window was full: nothing more is counted.
    open: bool,
}

impl Cause {
    /// Keep a line that followed the cause: a repeat of the last kept line
    /// only counts, so a window of ten shows ten different lines.
    fn follow(&mut self, line: &str) {
        if !self.open {
            return;
        }
        if let Some((last, n)) = self.evidence.last_mut() {
            if traceback::body(last) == traceback::body(line) {
                *n = n.saturating_add(1);
                return;
            }
        }
        if self.after_left == 0 {
            self.open = false;
            return;
        }
        self.evidence.push((line.to_string(), 1));
        self.after_left -= 1;
    }
}

/// Streaming watcher over one server's stdout+stderr lines. Keeps the first
/// fatal cause with the lines around it, a bounded tail, readiness and the
/// latest speculative decoding statistics.
#[derive(Debug, Clone)]
pub struct LogWatch {
    patterns: Arc<LogPatterns>,
    /// Ring of cleaned lines; buffers are reused once full.
    recent: VecDeque<String>,
    cause: Option<Cause>,
    gone: bool,
    ready: bool,
    accept_len: Option<f64>,
    draft_rate: Option<f64>,
    lines: u64,
}

impl LogWatch {
    pub fn new(patterns: Arc<LogPatterns>) -> LogWatch {
        LogWatch {
            patterns,
            recent: VecDeque::with_capacity(TAIL_KEEP),
            cause: None,
            gone: false,
            ready: false,
            accept_len: None,
            draft_rate: None,
            lines: 0,
        }
    }

    /// Classify one line and remember what matters. The first fatal cause
    /// wins: NCCL watchdog noise after an illegal instruction, or the same
    /// error from eight ranks, does not replace it.
    pub fn push(&mut self, line: &str) -> LineClass {
        let stripped = strip_ansi(line);
        let class = self.patterns.classify_stripped(&stripped);
        self.lines = self.lines.saturating_add(1);

        // Reuse the oldest buffer once the ring is full.
        let mut cleaned = if self.recent.len() >= TAIL_KEEP {
            self.recent.pop_front().unwrap_or_default()
        } else {
            String::new()
        };
        clean_stripped_into(&mut cleaned, &stripped);

        let new_cause = match &class {
            LineClass::Fatal(kind) => match &self.cause {
                None => Some((*kind, false)),
                Some(c) if c.weak => Some((*kind, false)),
                Some(_) => None,
            },
            LineClass::ServerGone => {
                self.gone = true;
                self.cause
                    .is_none()
                    .then_some((FailureKind::ServerExited, true))
            }
            LineClass::Ready => {
                self.ready = true;
                None
            }
            LineClass::SpecStats { accept_len } => {
                self.accept_len = Some(*accept_len);
                None
            }
            LineClass::DraftAcceptance { rate } => {
                self.draft_rate = Some(*rate);
                None
            }
            LineClass::Plain => None,
        };

        if let Some((kind, weak)) = new_cause {
            let mut evidence = before_context(&self.recent);
            evidence.push((cleaned.clone(), 1));
            self.cause = Some(Cause {
                kind,
                weak,
                message: cleaned.clone(),
                evidence,
                after_left: EVIDENCE_CONTEXT,
                open: true,
            });
        } else if let Some(cause) = &mut self.cause {
            cause.follow(&cleaned);
        }

        self.recent.push_back(cleaned);
        class
    }

    /// The first fatal cause, if any. A "server gone" line with no specific
    /// cause reads as [`FailureKind::ServerExited`].
    pub fn first_fatal(&self) -> Option<FailureKind> {
        self.cause.as_ref().map(|c| c.kind)
    }

    /// The first fatal cause as a failure record: the cleaned line as the
    /// message and up to 10 different lines on each side (as pushed so far)
    /// as evidence, a line repeated in a row shown once with `(×N)`.
    pub fn failure(&self) -> Option<Failure> {
        self.cause.as_ref().map(|c| {
            let evidence = c
                .evidence
                .iter()
                .map(|(line, n)| match n {
                    1 => line.clone(),
                    n => format!("{line} (×{n})"),
                })
                .collect();
            Failure::new(c.kind, FailureSource::ServerLog, c.message.clone())
                .with_evidence(evidence)
        })
    }

    /// The last `n` lines (cleaned), oldest first; at most [`TAIL_KEEP`].
    pub fn tail(&self, n: usize) -> Vec<String> {
        let skip = self.recent.len().saturating_sub(n);
        self.recent.iter().skip(skip).cloned().collect()
    }

    /// The latest SGLang/vLLM mean acceptance length seen.
    pub fn last_accept_len(&self) -> Option<f64> {
        self.accept_len
    }

    /// The latest llama.cpp draft acceptance rate seen (a fraction).
    pub fn last_draft_acceptance(&self) -> Option<f64> {
        self.draft_rate
    }

    /// True once a ready line was seen (a hint; see [`LineClass::Ready`]).
    pub fn saw_ready(&self) -> bool {
        self.ready
    }

    /// True once the server said it is gone (engine dead, child died).
    pub fn server_gone(&self) -> bool {
        self.gone
    }

    /// Lines pushed so far.
    pub fn lines_seen(&self) -> u64 {
        self.lines
    }
}

/// Up to [`EVIDENCE_CONTEXT`] different lines before a cause, oldest first,
/// lines repeated in a row counted once: the context of a cause that follows
/// forty watchdog lines is what came before them, not the watchdog.
fn before_context(recent: &VecDeque<String>) -> Vec<(String, u32)> {
    let mut runs = traceback::runs(
        (0..recent.len()).rev(),
        |i| recent[i].as_str(),
        EVIDENCE_CONTEXT,
    );
    runs.reverse();
    runs.into_iter()
        .map(|(first, last)| {
            let n = u32::try_from(last - first + 1).unwrap_or(u32::MAX);
            (recent[first].clone(), n)
        })
        .collect()
}
