//! The failure vocabulary: what went wrong ([`FailureKind`]), where we saw it
//! ([`FailureSource`]), and the record a failed cell carries ([`Failure`]).
//!
//! The kind names are a contract (`results.jsonl` `failure.kind`, plan pattern
//! entries), so `as_str`, `parse` and serde all read the same table.

use serde::{Deserialize, Serialize};

/// Why a cell (or a server) failed. Serialized in snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    CudaIllegalInstruction,
    CudaIllegalAddress,
    CudaOom,
    DeviceAssert,
    NcclError,
    NoKernelImage,
    TritonError,
    /// Any other CUDA runtime or driver error (`cudaErrorLaunchFailure`,
    /// `CUDA_ERROR_*`, `CUDA error: …`, Xid, ECC): the GPU faulted in a way
    /// no more specific kind names.
    CudaError,
    SignalCrash,
    OomKilled,
    ContextOverflow,
    ServerExited,
    StartupFailed,
    StartupTimeout,
    RequestTimeout,
    Stalled,
    HttpError,
    ZeroTokens,
    ConnectionError,
    /// Requests returned fewer tokens than asked (a warning on an `ok` cell,
    /// or the failure with `short_requests = "fail"`).
    ShortOutput,
    /// The client's TTFT and the server's own differ by more than the plan
    /// allows: the client or the network distorted the measurement (a warning).
    ClockGap,
    /// A cell meant to run on a cold cache found its prompts in the server's
    /// prefix cache (a warning).
    CacheHit,
    /// The repetitions of a cell (`repeats`) spread more than the plan allows:
    /// its median is not a number to compare closely (a warning).
    Noisy,
    /// The server's `usage.completion_tokens` disagrees with what it streamed
    /// (more than `max_tokens`, or fewer than the chunks that carried text):
    /// the streamed count is used (a warning); a request that streams far
    /// more than it asked for fails.
    UsageMismatch,
    /// The prompts the server counted (`usage.prompt_tokens`) missed the
    /// cell's target by more than the slack (a warning), or went over the
    /// server's own context limit (the failure).
    PromptMismatch,
    /// A request's prompt and output together went past the server's
    /// context for one request: a server that goes on by dropping old
    /// tokens (llama.cpp's context shift) measured a different request than
    /// the one asked (a warning).
    ContextShift,
    /// Requests whose text chunks arrived faster than a stream can be
    /// produced: a busy client read them together, so their per-request
    /// rates are not measurements and are left out (a warning).
    ClientStarved,
    /// A prepare step the config needs (a model copied into place) failed:
    /// its server was not launched.
    PrepareFailed,
}

/// One row per kind: (kind, snake_case name, grid badge, human words).
/// The single source for `as_str`, `parse`, `badge` and `describe`.
const KIND_TABLE: [(FailureKind, &str, &str, &str); 28] = [
    (
        FailureKind::CudaIllegalInstruction,
        "cuda_illegal_instruction",
        "ILL-INSTR",
        "CUDA illegal instruction",
    ),
    (
        FailureKind::CudaIllegalAddress,
        "cuda_illegal_address",
        "ILL-ADDR",
        "CUDA illegal memory access",
    ),
    (
        FailureKind::CudaOom,
        "cuda_oom",
        "OOM",
        "CUDA out of memory",
    ),
    (
        FailureKind::DeviceAssert,
        "device_assert",
        "ASSERT",
        "CUDA device-side assert",
    ),
    (FailureKind::NcclError, "nccl_error", "NCCL", "NCCL error"),
    (
        FailureKind::NoKernelImage,
        "no_kernel_image",
        "NO-KERNEL",
        "no kernel image for this GPU",
    ),
    (
        FailureKind::TritonError,
        "triton_error",
        "TRITON",
        "Triton error",
    ),
    (
        FailureKind::CudaError,
        "cuda_error",
        "CUDA-ERR",
        "CUDA error",
    ),
    (
        FailureKind::SignalCrash,
        "signal_crash",
        "SIGNAL",
        "crashed on a signal",
    ),
    (
        FailureKind::OomKilled,
        "oom_killed",
        "OOM-KILL",
        "killed for lack of host memory",
    ),
    (
        FailureKind::ContextOverflow,
        "context_overflow",
        "CTX 400",
        "context overflow",
    ),
    (
        FailureKind::ServerExited,
        "server_exited",
        "EXITED",
        "server exited",
    ),
    (
        FailureKind::StartupFailed,
        "startup_failed",
        "START-ERR",
        "server failed to start",
    ),
    (
        FailureKind::StartupTimeout,
        "startup_timeout",
        "START-TMO",
        "server start timed out",
    ),
    (
        FailureKind::RequestTimeout,
        "request_timeout",
        "REQ-TMO",
        "request timed out",
    ),
    (
        FailureKind::Stalled,
        "stalled",
        "STALL",
        "stalled: no tokens arriving",
    ),
    (FailureKind::HttpError, "http_error", "HTTP", "HTTP error"),
    (
        FailureKind::ZeroTokens,
        "zero_tokens",
        "0-TOK",
        "zero tokens generated",
    ),
    (
        FailureKind::ConnectionError,
        "connection_error",
        "CONN",
        "connection error",
    ),
    (
        FailureKind::ShortOutput,
        "short_output",
        "SHORT",
        "fewer tokens than asked",
    ),
    (
        FailureKind::ClockGap,
        "clock_gap",
        "GAP",
        "client and server TTFT disagree",
    ),
    (
        FailureKind::CacheHit,
        "cache_hit",
        "CACHED",
        "cold prompts hit the prefix cache",
    ),
    (
        FailureKind::Noisy,
        "noisy",
        "NOISY",
        "repetitions disagree more than the plan allows",
    ),
    (
        FailureKind::UsageMismatch,
        "usage_mismatch",
        "USAGE",
        "the server's token count disagrees with its stream",
    ),
    (
        FailureKind::PromptMismatch,
        "prompt_mismatch",
        "PROMPT",
        "prompts off their target length",
    ),
    (
        FailureKind::ContextShift,
        "context_shift",
        "CTX-SHIFT",
        "requests ran past the context (old tokens dropped)",
    ),
    (
        FailureKind::ClientStarved,
        "client_starved",
        "STARVED",
        "the client read streams in bursts (rates left out)",
    ),
    (
        FailureKind::PrepareFailed,
        "prepare_failed",
        "PREP-ERR",
        "a prepare step failed (server not launched)",
    ),
];

impl FailureKind {
    /// Every kind, in declaration order.
    pub const ALL: [FailureKind; 28] = [
        FailureKind::CudaIllegalInstruction,
        FailureKind::CudaIllegalAddress,
        FailureKind::CudaOom,
        FailureKind::DeviceAssert,
        FailureKind::NcclError,
        FailureKind::NoKernelImage,
        FailureKind::TritonError,
        FailureKind::CudaError,
        FailureKind::SignalCrash,
        FailureKind::OomKilled,
        FailureKind::ContextOverflow,
        FailureKind::ServerExited,
        FailureKind::StartupFailed,
        FailureKind::StartupTimeout,
        FailureKind::RequestTimeout,
        FailureKind::Stalled,
        FailureKind::HttpError,
        FailureKind::ZeroTokens,
        FailureKind::ConnectionError,
        FailureKind::ShortOutput,
        FailureKind::ClockGap,
        FailureKind::CacheHit,
        FailureKind::Noisy,
        FailureKind::UsageMismatch,
        FailureKind::PromptMismatch,
        FailureKind::ContextShift,
        FailureKind::ClientStarved,
        FailureKind::PrepareFailed,
    ];

    fn row(self) -> &'static (FailureKind, &'static str, &'static str, &'static str) {
        // KIND_TABLE is in declaration order, so the discriminant is the index;
        // the test `table_rows_are_in_declaration_order` keeps that true.
        &KIND_TABLE[self as usize]
    }

    /// The snake_case name, identical to the serde form.
    pub fn as_str(self) -> &'static str {
        self.row().1
    }

    /// Inverse of [`FailureKind::as_str`]; surrounding whitespace is ignored.
    pub fn parse(s: &str) -> Option<FailureKind> {
        let s = s.trim();
        KIND_TABLE.iter().find(|row| row.1 == s).map(|row| row.0)
    }

    /// Short badge for a grid cell (at most 9 characters).
    pub fn badge(self) -> &'static str {
        self.row().2
    }

    /// Human words for a status line or a report.
    pub fn describe(self) -> &'static str {
        self.row().3
    }

    /// True for the kinds that mean the server process itself is broken (GPU
    /// faults and crashes), so the server must be restarted before the next
    /// cell. `ServerExited` is not included: it is the fallback when no cause
    /// is known, and the process is already gone.
    /// How bad a failure is, for what stays on the alert line: 3 the server
    /// crashed (GPU faults, signals, the OOM killer), 2 it died or stopped
    /// answering, 1 a request-level failure (context overflow, HTTP error)
    /// or a warning.
    pub fn severity(self) -> u8 {
        if self.is_fatal_server_error() {
            return 3;
        }
        match self {
            FailureKind::ServerExited
            | FailureKind::StartupFailed
            | FailureKind::StartupTimeout
            | FailureKind::PrepareFailed
            | FailureKind::Stalled
            | FailureKind::RequestTimeout
            | FailureKind::ZeroTokens => 2,
            _ => 1,
        }
    }

    pub fn is_fatal_server_error(self) -> bool {
        matches!(
            self,
            FailureKind::CudaIllegalInstruction
                | FailureKind::CudaIllegalAddress
                | FailureKind::CudaOom
                | FailureKind::DeviceAssert
                | FailureKind::NcclError
                | FailureKind::NoKernelImage
                | FailureKind::TritonError
                | FailureKind::CudaError
                | FailureKind::SignalCrash
                | FailureKind::OomKilled
        )
    }
}

impl std::fmt::Display for FailureKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where the failure was observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureSource {
    ServerLog,
    Http,
    Preflight,
    Client,
    Exit,
}

impl FailureSource {
    /// The snake_case name, identical to the serde form.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureSource::ServerLog => "server_log",
            FailureSource::Http => "http",
            FailureSource::Preflight => "preflight",
            FailureSource::Client => "client",
            FailureSource::Exit => "exit",
        }
    }
}

/// Numbers pulled from a context-overflow message, when present.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ContextNumbers {
    /// The model's context length (N).
    pub limit: Option<u64>,
    /// Tokens in the prompt (P).
    pub prompt_tokens: Option<u64>,
    /// Tokens asked for as output (M).
    pub output_tokens: Option<u64>,
    /// The total the server says was requested (T).
    pub total_tokens: Option<u64>,
}

impl ContextNumbers {
    /// True when no number was found.
    pub fn is_empty(&self) -> bool {
        *self == ContextNumbers::default()
    }

    /// Tokens the request needed: the server's total, else prompt + output,
    /// else the prompt alone.
    pub fn requested(&self) -> Option<u64> {
        self.total_tokens
            .or_else(|| match (self.prompt_tokens, self.output_tokens) {
                (Some(p), Some(m)) => Some(p.saturating_add(m)),
                _ => None,
            })
            .or(self.prompt_tokens)
    }

    /// Grid text such as `ctx 400: 33,012 > 32,768`; with fewer numbers it
    /// degrades to `ctx 400: max_tokens 40,000 > 32,768`, `ctx 400: 33,012
    /// tokens`, `ctx 400: limit 32,768` or just `ctx 400`.
    pub fn summary(&self, status: Option<u16>) -> String {
        let head = match status {
            Some(s) => format!("ctx {s}"),
            None => "ctx".to_string(),
        };
        match (self.requested(), self.output_tokens, self.limit) {
            (Some(r), _, Some(n)) => format!("{head}: {} > {}", thousands(r), thousands(n)),
            (None, Some(m), Some(n)) => {
                format!("{head}: max_tokens {} > {}", thousands(m), thousands(n))
            }
            (Some(r), _, None) => format!("{head}: {} tokens", thousands(r)),
            (None, _, Some(n)) => format!("{head}: limit {}", thousands(n)),
            (None, Some(m), None) => format!("{head}: max_tokens {}", thousands(m)),
            (None, None, None) => head,
        }
    }
}

/// `33012` -> `33,012`.
pub fn thousands(n: impl Into<u128>) -> String {
    let n: u128 = n.into();
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The record a failed cell carries (`failure` in `results.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: FailureKind,
    pub source: FailureSource,
    pub message: String,
    /// The lines that prove it: log lines around the cause, or the HTTP body.
    pub evidence: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextNumbers>,
}

impl Failure {
    /// A failure with no evidence lines and no overflow numbers (add them with
    /// [`Failure::with_evidence`] and [`Failure::with_context`]).
    pub fn new(kind: FailureKind, source: FailureSource, message: impl Into<String>) -> Failure {
        Failure {
            kind,
            source,
            message: message.into(),
            evidence: Vec::new(),
            context: None,
        }
    }

    pub fn with_evidence(mut self, evidence: Vec<String>) -> Failure {
        self.evidence = evidence;
        self
    }

    pub fn with_context(mut self, context: Option<ContextNumbers>) -> Failure {
        self.context = context;
        self
    }

    /// The short text a grid cell shows: the kind's badge, or for a context
    /// overflow with numbers, `ctx 400: 32,808 > 32,768`.
    pub fn label(&self) -> String {
        match (&self.context, self.kind) {
            (Some(n), FailureKind::ContextOverflow) => {
                n.summary((self.source == FailureSource::Http).then_some(400))
            }
            _ => self.kind.badge().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_rows_are_in_declaration_order() {
        for (i, kind) in FailureKind::ALL.iter().enumerate() {
            assert_eq!(KIND_TABLE[i].0, *kind);
            assert_eq!(*kind as usize, i);
        }
    }

    #[test]
    fn as_str_matches_serde_and_parse_inverts_it() {
        for kind in FailureKind::ALL {
            let json = serde_json::to_string(&kind).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
            assert_eq!(FailureKind::parse(kind.as_str()), Some(kind));
            let back: FailureKind = serde_json::from_str(&json).unwrap_or(FailureKind::Stalled);
            assert_eq!(back, kind);
        }
        assert_eq!(FailureKind::parse("nope"), None);
        assert_eq!(FailureKind::parse(""), None);
        assert_eq!(
            FailureKind::parse(" cuda_oom\n"),
            Some(FailureKind::CudaOom)
        );
    }

    #[test]
    fn badges_are_short_and_unique() {
        let mut seen = std::collections::HashSet::new();
        for kind in FailureKind::ALL {
            assert!(kind.badge().chars().count() <= 9, "{kind:?}");
            assert!(
                seen.insert(kind.badge()),
                "duplicate badge {}",
                kind.badge()
            );
            assert!(!kind.describe().is_empty());
        }
        assert_eq!(FailureKind::CudaIllegalInstruction.badge(), "ILL-INSTR");
        assert_eq!(FailureKind::ContextOverflow.badge(), "CTX 400");
        assert_eq!(FailureKind::ZeroTokens.badge(), "0-TOK");
        assert_eq!(
            FailureKind::CudaIllegalInstruction.describe(),
            "CUDA illegal instruction"
        );
        assert_eq!(FailureKind::ContextOverflow.describe(), "context overflow");
    }

    #[test]
    fn fatal_server_errors_are_the_gpu_and_crash_kinds() {
        let fatal: Vec<_> = FailureKind::ALL
            .into_iter()
            .filter(|k| k.is_fatal_server_error())
            .collect();
        assert_eq!(fatal.len(), 10);
        assert!(FailureKind::CudaIllegalInstruction.is_fatal_server_error());
        assert!(FailureKind::OomKilled.is_fatal_server_error());
        assert!(!FailureKind::ContextOverflow.is_fatal_server_error());
        assert!(!FailureKind::HttpError.is_fatal_server_error());
        assert!(!FailureKind::ServerExited.is_fatal_server_error());
    }

    #[test]
    fn summary_formats_and_degrades() {
        let full = ContextNumbers {
            limit: Some(32768),
            prompt_tokens: Some(32756),
            output_tokens: Some(256),
            total_tokens: Some(33012),
        };
        assert_eq!(full.summary(Some(400)), "ctx 400: 33,012 > 32,768");
        let pm = ContextNumbers {
            total_tokens: None,
            ..full
        };
        assert_eq!(pm.summary(Some(400)), "ctx 400: 33,012 > 32,768");
        let p = ContextNumbers {
            limit: Some(32768),
            prompt_tokens: Some(40000),
            ..Default::default()
        };
        assert_eq!(p.summary(Some(422)), "ctx 422: 40,000 > 32,768");
        let m = ContextNumbers {
            limit: Some(32768),
            output_tokens: Some(40000),
            ..Default::default()
        };
        assert_eq!(m.summary(Some(400)), "ctx 400: max_tokens 40,000 > 32,768");
        let n = ContextNumbers {
            limit: Some(4096),
            ..Default::default()
        };
        assert_eq!(n.summary(Some(400)), "ctx 400: limit 4,096");
        let t = ContextNumbers {
            total_tokens: Some(5000),
            ..Default::default()
        };
        assert_eq!(t.summary(None), "ctx: 5,000 tokens");
        assert_eq!(ContextNumbers::default().summary(Some(400)), "ctx 400");
        assert_eq!(ContextNumbers::default().summary(None), "ctx");
        assert!(ContextNumbers::default().is_empty());
        let huge = ContextNumbers {
            prompt_tokens: Some(u64::MAX),
            output_tokens: Some(5),
            limit: Some(1),
            total_tokens: None,
        };
        assert!(huge.summary(Some(400)).starts_with("ctx 400: 18,446,744"));
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0u64), "0");
        assert_eq!(thousands(999u64), "999");
        assert_eq!(thousands(1000u64), "1,000");
        assert_eq!(thousands(32768u64), "32,768");
        assert_eq!(thousands(1234567u64), "1,234,567");
    }

    #[test]
    fn source_names_match_serde() {
        for s in [
            FailureSource::ServerLog,
            FailureSource::Http,
            FailureSource::Preflight,
            FailureSource::Client,
            FailureSource::Exit,
        ] {
            assert_eq!(
                serde_json::to_string(&s).unwrap_or_default(),
                format!("\"{}\"", s.as_str())
            );
        }
    }

    #[test]
    fn failure_serializes_without_null_context() {
        let f = Failure::new(FailureKind::CudaOom, FailureSource::ServerLog, "m")
            .with_evidence(vec!["a".into()]);
        let s = serde_json::to_string(&f).unwrap_or_default();
        assert_eq!(
            s,
            r#"{"kind":"cuda_oom","source":"server_log","message":"m","evidence":["a"]}"#
        );
        let back: Option<Failure> = serde_json::from_str(&s).ok();
        assert_eq!(back, Some(f));
    }
}
