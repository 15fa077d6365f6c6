//! TEMPORARY stand-in; replaced by the real classifier.
mod validate;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
pub use validate::{looks_like_server_gone, request_failure, validate, ServerHealth};

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
}
impl FailureKind {
    pub fn as_str(self) -> &'static str {
        "x"
    }
    pub fn parse(_s: &str) -> Option<FailureKind> {
        None
    }
    pub fn badge(self) -> &'static str {
        "X"
    }
    pub fn describe(self) -> &'static str {
        "x"
    }
    pub fn is_fatal_server_error(self) -> bool {
        true
    }
}
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureSource {
    ServerLog,
    Http,
    Preflight,
    Client,
    Exit,
}
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ContextNumbers {
    pub limit: Option<u64>,
    pub prompt_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub total_tokens: Option<u64>,
}
impl ContextNumbers {
    pub fn summary(&self, _status: Option<u16>) -> String {
        String::new()
    }
}
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub kind: FailureKind,
    pub source: FailureSource,
    pub message: String,
    pub evidence: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextNumbers>,
}
#[derive(Debug, Clone, PartialEq)]
pub enum LineClass {
    Plain,
    Fatal(FailureKind),
    Ready,
    SpecStats { accept_len: f64 },
    ServerGone,
}
pub struct LogPatterns;
impl LogPatterns {
    pub fn builtin() -> LogPatterns {
        LogPatterns
    }
    pub fn with_extra(_extra: &[(String, FailureKind)]) -> Result<LogPatterns, regex::Error> {
        Ok(LogPatterns)
    }
    pub fn classify(&self, line: &str) -> LineClass {
        if line.contains("illegal instruction was") {
            LineClass::Fatal(FailureKind::CudaIllegalInstruction)
        } else {
            LineClass::Plain
        }
    }
}
pub struct LogWatch {
    p: Arc<LogPatterns>,
    first: Option<FailureKind>,
    lines: Vec<String>,
}
impl LogWatch {
    pub fn new(patterns: Arc<LogPatterns>) -> LogWatch {
        LogWatch {
            p: patterns,
            first: None,
            lines: vec![],
        }
    }
    pub fn push(&mut self, line: &str) -> LineClass {
        let c = self.p.classify(line);
        if let LineClass::Fatal(k) = c {
            self.first.get_or_insert(k);
        }
        self.lines.push(line.to_string());
        c
    }
    pub fn first_fatal(&self) -> Option<FailureKind> {
        self.first
    }
    pub fn failure(&self) -> Option<Failure> {
        self.first.map(|k| Failure {
            kind: k,
            source: FailureSource::ServerLog,
            message: String::new(),
            evidence: vec![],
            context: None,
        })
    }
    pub fn tail(&self, n: usize) -> Vec<String> {
        self.lines.iter().rev().take(n).rev().cloned().collect()
    }
    pub fn last_accept_len(&self) -> Option<f64> {
        None
    }
}
pub fn classify_http(status: u16, body: &str) -> Failure {
    Failure {
        kind: if body.contains("context length") {
            FailureKind::ContextOverflow
        } else {
            FailureKind::HttpError
        },
        source: FailureSource::Http,
        message: format!("HTTP {status}"),
        evidence: vec![],
        context: None,
    }
}
pub fn classify_stream_error(_value: &serde_json::Value) -> Failure {
    classify_http(200, "")
}
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Classification {
    pub kind: Option<FailureKind>,
    pub evidence: Option<String>,
    pub context: Option<ContextNumbers>,
    pub message: Option<String>,
}
pub fn classify_text(_text: &str) -> Classification {
    Classification {
        kind: None,
        evidence: None,
        context: None,
        message: None,
    }
}
pub fn classify_exit(
    _code: Option<i32>,
    _signal: Option<i32>,
    logged: Option<FailureKind>,
    _tail: &[String],
) -> FailureKind {
    logged.unwrap_or(FailureKind::ServerExited)
}
