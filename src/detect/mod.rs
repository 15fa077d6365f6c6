//! Failure detection: turns what an inference server prints and answers into
//! a [`FailureKind`] with the evidence that proves it.
//!
//! sweeptop exists so that a crashed server is never recorded as a 0 tok/s
//! measurement and a context overflow is never recorded as a bare "400". This
//! module is where those facts are recognised:
//! - [`LogPatterns`] / [`LogWatch`]: every server log line (SGLang, vLLM,
//!   llama.cpp, TGI) against one table of patterns; the first fatal cause and
//!   the lines around it, readiness, speculative decoding statistics.
//! - [`classify_http`] / [`classify_stream_error`]: HTTP error bodies, with
//!   the context-overflow numbers every server words differently.
//! - [`classify_exit`]: a server process that exited.
//! - [`classify_text`]: any text, for `sweeptop classify`.
//!
//! It never talks to the network and never panics on what a server sends.

mod exit;
mod explain;
mod http;
mod log;
mod text;
pub mod traceback;
mod validate;

#[cfg(test)]
mod fixtures;
#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::model::{ContextNumbers, Failure, FailureKind};

pub use exit::{classify_exit, exit_failure};
pub use explain::{explain, Explanation};
pub use http::{classify_http, classify_stream_error, context_numbers, is_overflow_message};
pub use log::{classify_line, LineClass, LogPatterns, LogWatch, EVIDENCE_CONTEXT, TAIL_KEEP};
pub use text::{clean_line, strip_ansi};
pub use validate::{
    cache_hit, clock_gap, looks_like_server_gone, request_failure, short_output, validate,
    warnings, zero_tokens, Checks, Measured, ServerHealth, Stall, Starved, UsageMismatch,
    LATE_READ_MS,
};

/// What `sweeptop classify` reports for a piece of text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    /// `None` when nothing matched.
    pub kind: Option<FailureKind>,
    /// The line (log) or body (HTTP) that proves it.
    pub evidence: Option<String>,
    /// Overflow numbers, for a context overflow.
    pub context: Option<ContextNumbers>,
    /// A one-line explanation: the HTTP message, or the kind in words with
    /// the overflow summary.
    pub message: Option<String>,
}

impl Classification {
    fn none() -> Classification {
        Classification {
            kind: None,
            evidence: None,
            context: None,
            message: None,
        }
    }

    fn from_http(failure: Failure, status: u16) -> Classification {
        let message = match &failure.context {
            Some(ctx) => format!("{} ({})", failure.message, ctx.summary(Some(status))),
            None => failure.message,
        };
        Classification {
            kind: Some(failure.kind),
            evidence: failure.evidence.into_iter().next(),
            context: failure.context,
            message: Some(message),
        }
    }
}

/// A JSON error body in `text`, as (status, body). Accepts the body alone,
/// an SSE `data:` line, or a `curl -i` style dump whose status line gives
/// the status when the body does not.
fn find_error_body(text: &str) -> Option<(u16, Cow<'_, str>)> {
    let trimmed = text.trim();
    let mut candidates: Vec<Cow<'_, str>> = vec![Cow::Borrowed(trimmed)];
    if let Some(rest) = trimmed.strip_prefix("data:") {
        candidates.push(Cow::Borrowed(rest.trim()));
    }
    if let (Some(start), Some(end)) = (trimmed.find('{'), trimmed.rfind('}')) {
        if start < end {
            let inner = &trimmed[start..=end];
            candidates.push(Cow::Borrowed(inner));
            // The OpenAI Python client prints a body as a Python dict:
            // `Error code: 404 - {'object': 'error', 'message': '…', 'code': 404}`.
            if let Some(json) = python_dict_as_json(inner) {
                candidates.push(Cow::Owned(json));
            }
        }
    }
    for body in candidates {
        let Ok(value) = serde_json::from_str::<Value>(&body) else {
            continue;
        };
        if !http::looks_like_error_body(&value) {
            continue;
        }
        let status = http::body_status(&value)
            .or_else(|| status_line(trimmed))
            .unwrap_or(400);
        return Some((status, body));
    }
    None
}

/// A Python dict literal (`{'a': 'b', "c": None, 'd': True}`) as JSON, or
/// `None` when it is not one: strings in either quote become JSON strings,
/// `None`/`True`/`False` their JSON words.
fn python_dict_as_json(s: &str) -> Option<String> {
    if !s.starts_with('{') || !s.contains('\'') {
        return None;
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push('"');
                while let Some(d) = chars.next() {
                    match d {
                        '\\' => {
                            let e = chars.next()?;
                            if e == '\'' {
                                out.push('\'');
                            } else {
                                out.push('\\');
                                out.push(e);
                            }
                        }
                        '"' if c == '\'' => out.push_str("\\\""),
                        d if d == c => break,
                        d => out.push(d),
                    }
                }
                out.push('"');
            }
            'N' | 'T' | 'F' => {
                let word: String = std::iter::once(c)
                    .chain(std::iter::from_fn(|| {
                        chars.next_if(|x| x.is_ascii_alphabetic())
                    }))
                    .collect();
                out.push_str(match word.as_str() {
                    "None" => "null",
                    "True" => "true",
                    "False" => "false",
                    _ => return None,
                });
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// `Internal Server Error` -> 500: a text that is nothing but an HTTP error
/// status's reason phrase.
fn reason_phrase_status(text: &str) -> Option<u16> {
    const REASONS: &[(&str, u16)] = &[
        ("bad request", 400),
        ("not found", 404),
        ("request timeout", 408),
        ("payload too large", 413),
        ("unprocessable entity", 422),
        ("too many requests", 429),
        ("internal server error", 500),
        ("bad gateway", 502),
        ("service unavailable", 503),
        ("gateway timeout", 504),
    ];
    REASONS
        .iter()
        .find(|(phrase, _)| text.eq_ignore_ascii_case(phrase))
        .map(|(_, status)| *status)
}

/// `HTTP/1.1 422 Unprocessable Entity` -> 422.
fn status_line(text: &str) -> Option<u16> {
    let first = text.lines().next()?.trim();
    let rest = first.strip_prefix("HTTP/")?;
    let code = rest.split_whitespace().nth(1)?;
    code.parse::<u16>().ok().filter(|c| (100..=599).contains(c))
}

/// Find the failure kind in arbitrary text: a log excerpt or an HTTP error
/// body. A JSON error body goes to the HTTP classifier (status from the
/// body's `code`, else a status line, else 400). Otherwise the lines go
/// through a [`LogWatch`]; a fatal log cause wins over an overflow message
/// in the same excerpt (a crash is the bigger news), and an overflow message
/// alone is classified like an HTTP body. `kind` is `None` when nothing
/// matched: a log without a cause is not an HTTP error.
pub fn classify_text(text: &str) -> Classification {
    classify_text_ended(text, None)
}

/// How the process whose log is classified ended, when the caller knows
/// (`sweeptop classify --exit-code N` / `--signal NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Ended {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl Ended {
    /// An exit that is a stop, not a failure: status 0, or SIGINT/SIGTERM/
    /// SIGHUP (also as a shell's 128+N or Python's −N).
    pub fn is_stop(self) -> bool {
        let signal = self.signal.or(match self.code {
            Some(c) if (129..=159).contains(&c) => Some(c - 128),
            Some(c) if (-31..=-1).contains(&c) => Some(-c),
            _ => None,
        });
        match signal {
            Some(s) => matches!(s, 1 | 2 | 15),
            None => self.code == Some(0),
        }
    }

    /// `exit code 1`, `killed by signal 11`.
    pub fn describe(self) -> String {
        match (self.code, self.signal) {
            (_, Some(s)) => format!("killed by signal {s}"),
            (Some(c), None) => format!("exit code {c}"),
            (None, None) => "ended".into(),
        }
    }
}

/// [`classify_text`] knowing how the process ended (`None`: not known). A
/// cause a pattern names wins; otherwise a stop (status 0, SIGINT, SIGTERM)
/// is no failure, and any other end is classified by its status, named by
/// the last exception printed.
pub fn classify_text_ended(text: &str, ended: Option<Ended>) -> Classification {
    if let Some((status, body)) = find_error_body(text) {
        return Classification::from_http(classify_http(status, &body), status);
    }

    let mut watch = LogWatch::new(Arc::new(LogPatterns::builtin()));
    for line in text.lines() {
        watch.push(line);
    }
    if let Some(failure) = watch.failure() {
        // A server-gone line names no cause: how the process ended does.
        let gone = failure.kind == FailureKind::ServerExited;
        let kind = match ended {
            Some(e) if gone && e.is_stop() => return Classification::none(),
            Some(e) if gone => classify_exit(e.code, e.signal, None, &watch.tail(TAIL_KEEP)),
            _ => failure.kind,
        };
        return Classification {
            kind: Some(kind),
            message: Some(kind.describe().to_string()),
            evidence: Some(failure.message),
            context: None,
        };
    }

    if let Some(line) = text.lines().find(|l| is_overflow_message(l)) {
        let line = clean_line(line);
        let status = status_line(text.trim()).unwrap_or(400);
        return Classification::from_http(classify_http(status, &line), status);
    }
    // A body that is only a status's reason phrase (what a web framework
    // answers on an unhandled error).
    if let Some(status) = reason_phrase_status(text.trim()) {
        return Classification::from_http(classify_http(status, text.trim()), status);
    }
    let lines: Vec<String> = text.lines().map(clean_line).collect();
    if let Some(ended) = ended {
        if ended.is_stop() {
            return Classification {
                message: Some(format!("stopped ({}): not a failure", ended.describe())),
                ..Classification::none()
            };
        }
        let f = exit_failure(
            ended.code,
            ended.signal,
            "the server exited",
            &ended.describe(),
            &lines,
        );
        return Classification {
            kind: Some(f.kind),
            evidence: f.evidence.last().cloned(),
            message: Some(f.message),
            context: None,
        };
    }
    // No pattern knows it, but a traceback or `terminate called` names it,
    // unless the server served on after it or was being stopped.
    match traceback::judge(&lines) {
        Some(traceback::Verdict::Crash(e)) => Classification {
            kind: Some(FailureKind::ServerExited),
            message: Some(e.line.clone()),
            evidence: Some(e.line),
            context: None,
        },
        _ => Classification::none(),
    }
}
