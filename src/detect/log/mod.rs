//! Server log classification: the one table of log patterns ([`table`]),
//! its compiled form ([`LogPatterns`]) and the streaming watcher over one
//! server's output ([`LogWatch`]).
//!
//! Every line of every server goes through [`LogPatterns::classify`], so the
//! common case (a benign line) must cost one pass of a literal automaton and
//! no allocation. Only lines that contain one of the table's literals run the
//! regexes of the entries that own those literals.

mod patterns;
mod table;
mod watch;

use crate::model::FailureKind;
pub use patterns::LogPatterns;
pub use watch::{LogWatch, EVIDENCE_CONTEXT, TAIL_KEEP};

/// What one log line means.
#[derive(Debug, Clone, PartialEq)]
pub enum LineClass {
    /// Nothing we act on.
    Plain,
    /// A fatal cause.
    Fatal(FailureKind),
    /// The server says it is ready (SGLang's "fired up", uvicorn's "Application
    /// startup complete.", llama.cpp's "server is listening on"). A hint only:
    /// SGLang prints the uvicorn line before its warm-up finished, and
    /// llama.cpp listens before the model is loaded, so readiness still needs
    /// the health check.
    Ready,
    /// Speculative decoding: mean accepted tokens per verify step (SGLang
    /// `accept len`, vLLM `Mean acceptance length`). Always >= 1 by definition.
    SpecStats { accept_len: f64 },
    /// llama.cpp's `draft acceptance = R (A accepted / D generated)`: a
    /// fraction of drafted tokens accepted, in [0, 1]. It is kept apart from
    /// [`LineClass::SpecStats`] because the line does not say how many verify
    /// steps there were, so tokens per step cannot be derived from it, and
    /// mixing a rate into the `accept_len` column would mislead.
    DraftAcceptance { rate: f64 },
    /// The server is gone even if HTTP still answers: vLLM `EngineDeadError`,
    /// `Engine loop is not running`, `Engine core proc ... died unexpectedly`;
    /// SGLang `Received sigquit from a child process`.
    ServerGone,
}

/// Classify a single line with the builtin table; for callers without a plan.
pub fn classify_line(line: &str) -> LineClass {
    LogPatterns::builtin().classify(line)
}

#[cfg(test)]
mod tests;
