//! The one place that decides whether a cell is `ok`: only with real tokens from
//! a server that stayed alive, and requests that succeeded.

use super::{classify_http, classify_stream_error, Failure, FailureKind, FailureSource};
use crate::load::{CellRun, Metrics, RequestError};

/// What the engine knows about the server during the cell.
pub struct ServerHealth {
    /// The server died (or logged a fatal error) during the cell.
    pub died: Option<Failure>,
}

/// Decide a cell's status. `Ok(())` means the metrics may be recorded as `ok`.
pub fn validate(
    run: &CellRun,
    metrics: &Metrics,
    health: &ServerHealth,
    max_error_rate: f64,
) -> Result<(), Failure> {
    if let Some(f) = &health.died {
        return Err(f.clone());
    }
    if let Some(idle) = run.stalled_for {
        let in_flight = run.records.iter().filter(|r| r.error.is_some()).count();
        return Err(Failure {
            kind: FailureKind::Stalled,
            source: FailureSource::Client,
            message: format!(
                "no token arrived for {:.1} s with requests in flight ({} of {} requests done)",
                idle.as_secs_f64(),
                run.records.len().saturating_sub(in_flight),
                run.records.len()
            ),
            evidence: Vec::new(),
            context: None,
        });
    }
    let total = metrics.requests.max(1);
    if metrics.failed_requests > 0 && metrics.failed_requests as f64 / total as f64 > max_error_rate
    {
        // A context overflow explains a cell better than whatever followed it.
        let failures: Vec<Failure> = run
            .records
            .iter()
            .filter_map(|r| r.error.as_ref().map(request_failure))
            .collect();
        let mut chosen = failures
            .iter()
            .find(|f| f.kind == FailureKind::ContextOverflow)
            .or(failures.first())
            .cloned()
            .unwrap_or_else(|| Failure {
                kind: FailureKind::HttpError,
                source: FailureSource::Client,
                message: String::new(),
                evidence: Vec::new(),
                context: None,
            });
        chosen.message = format!(
            "{} of {} requests failed: {}",
            metrics.failed_requests, metrics.requests, chosen.message
        );
        return Err(chosen);
    }
    if metrics.output_tokens == 0
        || metrics.output_tok_s <= 0.0
        || !metrics.output_tok_s.is_finite()
    {
        return Err(Failure {
            kind: FailureKind::ZeroTokens,
            source: FailureSource::Client,
            message: format!(
                "{} requests completed but the server returned no tokens",
                metrics.requests
            ),
            evidence: Vec::new(),
            context: None,
        });
    }
    Ok(())
}

/// The failure one request met.
pub fn request_failure(e: &RequestError) -> Failure {
    let client = |kind, message: String| Failure {
        kind,
        source: FailureSource::Client,
        message,
        evidence: Vec::new(),
        context: None,
    };
    match e {
        RequestError::Http { status, body } => classify_http(*status, body),
        RequestError::InStream { body } => match serde_json::from_str::<serde_json::Value>(body) {
            Ok(v) => classify_stream_error(&v),
            Err(_) => classify_http(200, body),
        },
        RequestError::Connection { message } => {
            client(FailureKind::ConnectionError, message.clone())
        }
        RequestError::Timeout => client(FailureKind::RequestTimeout, "request timed out".into()),
        RequestError::Truncated => client(
            FailureKind::ConnectionError,
            "the stream ended without [DONE]".into(),
        ),
        RequestError::Malformed { message } => client(FailureKind::HttpError, message.clone()),
    }
}

/// Whether a request error may be the server going away (worth waiting a
/// moment for its exit status or log before judging the cell): a cut stream,
/// an error inside a stream (vLLM's "EngineCore encountered an issue"), a 5xx.
pub fn looks_like_server_gone(e: &RequestError) -> bool {
    match e {
        RequestError::Connection { .. }
        | RequestError::Truncated
        | RequestError::InStream { .. } => true,
        RequestError::Http { status, .. } => *status >= 500,
        RequestError::Timeout | RequestError::Malformed { .. } => false,
    }
}
