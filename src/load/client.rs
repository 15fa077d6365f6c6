//! The OpenAI-compatible streaming client: one request, timed where bytes arrive.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use super::sse::SseParser;
use crate::plan::Api;

/// Where requests go.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://host:port`, no trailing slash.
    pub base: String,
    pub api: Api,
    pub model: String,
}

impl Target {
    pub fn url(&self) -> String {
        match self.api {
            Api::Completions => format!("{}/v1/completions", self.base),
            Api::Chat => format!("{}/v1/chat/completions", self.base),
        }
    }
}

/// A connection pool sized to the concurrency, no proxies (benchmarks talk to
/// the server directly), Nagle off so small SSE chunks are not delayed.
pub fn http_client(concurrency: u32) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency.max(1) as usize)
        .tcp_nodelay(true)
        .no_proxy()
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// Why a request did not complete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RequestError {
    /// Non-2xx status with the (truncated) body.
    Http {
        status: u16,
        body: String,
    },
    /// An `error` object inside a 200 stream.
    InStream {
        body: String,
    },
    Connection {
        message: String,
    },
    Timeout,
    /// The stream ended without `[DONE]`.
    Truncated,
    Malformed {
        message: String,
    },
}

/// Everything measured about one request. Times are nanoseconds since the cell
/// started, taken when the bytes arrived.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub start_ns: u64,
    /// Arrival of every chunk that carried text, with its text length in bytes.
    pub chunks: Vec<(u64, u32)>,
    pub end_ns: u64,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub max_tokens: u32,
    pub finish_reason: Option<String>,
    pub error: Option<RequestError>,
}

impl RequestRecord {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
    pub fn first_token_ns(&self) -> Option<u64> {
        self.chunks.first().map(|c| c.0)
    }
}

/// Shared progress of a cell's requests, for stall detection.
#[derive(Debug)]
pub struct Progress {
    pub epoch: Instant,
    /// Last time any byte arrived or a request started (ns since epoch).
    pub last_ns: AtomicU64,
    pub in_flight: AtomicU64,
    pub chunks: AtomicU64,
}

impl Progress {
    pub fn new() -> Self {
        Progress {
            epoch: Instant::now(),
            last_ns: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            chunks: AtomicU64::new(0),
        }
    }
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
    fn touch(&self, at: u64) {
        self.last_ns.fetch_max(at, Ordering::Relaxed);
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

const MAX_ERROR_BODY: usize = 16 << 10;

pub fn request_body(target: &Target, prompt: &str, max_tokens: u32) -> Vec<u8> {
    let mut body = serde_json::json!({
        "model": target.model,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": true,
        "stream_options": {"include_usage": true},
        "ignore_eos": true,
    });
    match target.api {
        Api::Completions => body["prompt"] = prompt.into(),
        Api::Chat => {
            body["messages"] = serde_json::json!([{"role": "user", "content": prompt}]);
        }
    }
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Send one streaming request and time it.
pub async fn send(
    client: &reqwest::Client,
    target: &Target,
    prompt: &str,
    max_tokens: u32,
    timeout: Duration,
    progress: &Progress,
) -> RequestRecord {
    let mut rec = RequestRecord {
        start_ns: progress.now_ns(),
        max_tokens,
        ..Default::default()
    };
    progress.touch(rec.start_ns);
    progress.in_flight.fetch_add(1, Ordering::Relaxed);
    let deadline = tokio::time::Instant::now() + timeout;
    let result = tokio::time::timeout_at(
        deadline,
        stream(client, target, prompt, max_tokens, progress, &mut rec),
    )
    .await;
    if result.is_err() {
        rec.error = Some(RequestError::Timeout);
    }
    rec.end_ns = progress.now_ns();
    progress.in_flight.fetch_sub(1, Ordering::Relaxed);
    rec
}

async fn stream(
    client: &reqwest::Client,
    target: &Target,
    prompt: &str,
    max_tokens: u32,
    progress: &Progress,
    rec: &mut RequestRecord,
) {
    let body = request_body(target, prompt, max_tokens);
    let resp = client
        .post(target.url())
        .header("content-type", "application/json")
        .header("accept", "text/event-stream")
        .body(body)
        .send()
        .await;
    let mut resp = match resp {
        Ok(r) => r,
        Err(e) => {
            rec.error = Some(RequestError::Connection {
                message: error_chain(&e),
            });
            return;
        }
    };
    let status = resp.status().as_u16();
    let is_sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("event-stream"));
    if !(200..300).contains(&status) || !is_sse {
        // Error bodies (and a JSON answer to a streaming request) are read whole,
        // bounded, and handed to the classifier.
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(c)) => {
                    let room = MAX_ERROR_BODY.saturating_sub(body.len());
                    body.extend_from_slice(&c[..c.len().min(room)]);
                }
                Ok(None) => break,
                Err(_) => break,
            }
        }
        let body = String::from_utf8_lossy(&body).into_owned();
        rec.error = Some(if (200..300).contains(&status) {
            if body.contains("\"error\"") {
                RequestError::InStream { body }
            } else {
                RequestError::Malformed {
                    message: format!("expected an event stream, got: {}", truncate(&body, 300)),
                }
            }
        } else {
            RequestError::Http { status, body }
        });
        return;
    }

    let mut parser = SseParser::new();
    let mut done = false;
    loop {
        let chunk = match resp.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => {
                rec.error = Some(RequestError::Connection {
                    message: error_chain(&e),
                });
                return;
            }
        };
        let now = progress.now_ns();
        progress.touch(now);
        let mut err = None;
        let r = parser.push(&chunk, &mut |data| {
            if err.is_none() && !done {
                handle_event(data, now, rec, &mut done, &mut err, progress);
            }
        });
        if r.is_err() {
            rec.error = Some(RequestError::Malformed {
                message: "an SSE event over 8 MiB".into(),
            });
            return;
        }
        if let Some(e) = err {
            rec.error = Some(e);
            return;
        }
        if done {
            return;
        }
    }
    let now = progress.now_ns();
    let mut err = None;
    parser.finish(&mut |data| {
        if err.is_none() && !done {
            handle_event(data, now, rec, &mut done, &mut err, progress);
        }
    });
    if let Some(e) = err {
        rec.error = Some(e);
    } else if !done {
        rec.error = Some(RequestError::Truncated);
    }
}

// Borrowed where the JSON has no escapes: no allocation per streamed chunk.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<Choice<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default, borrow)]
    error: Option<&'a serde_json::value::RawValue>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

fn handle_event(
    data: &[u8],
    now: u64,
    rec: &mut RequestRecord,
    done: &mut bool,
    err: &mut Option<RequestError>,
    progress: &Progress,
) {
    if data == b"[DONE]" {
        *done = true;
        return;
    }
    let chunk: Chunk = match serde_json::from_slice(data) {
        Ok(c) => c,
        Err(e) => {
            *err = Some(RequestError::Malformed {
                message: format!(
                    "bad SSE data ({e}): {}",
                    truncate(&String::from_utf8_lossy(data), 200)
                ),
            });
            return;
        }
    };
    if chunk.error.is_some() {
        *err = Some(RequestError::InStream {
            body: String::from_utf8_lossy(data).into_owned(),
        });
        return;
    }
    let mut text_len = 0usize;
    for c in &chunk.choices {
        if let Some(t) = &c.text {
            text_len += t.len();
        }
        if let Some(d) = &c.delta {
            text_len += d.content.as_deref().map_or(0, str::len);
            text_len += d.reasoning_content.as_deref().map_or(0, str::len);
        }
        if let Some(f) = &c.finish_reason {
            if rec.finish_reason.as_deref() != Some(f.as_ref()) {
                rec.finish_reason = Some(f.to_string());
            }
        }
    }
    // A role-only or empty chunk is not a token.
    if text_len > 0 {
        rec.chunks
            .push((now, text_len.min(u32::MAX as usize) as u32));
        progress.chunks.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(u) = chunk.usage {
        if u.prompt_tokens.is_some() {
            rec.prompt_tokens = u.prompt_tokens;
        }
        if u.completion_tokens.is_some() {
            rec.completion_tokens = u.completion_tokens;
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let t = inner.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = inner.source();
    }
    s
}

pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(events: &[&str]) -> (RequestRecord, bool, Option<RequestError>) {
        let progress = Progress::new();
        let mut rec = RequestRecord::default();
        let mut done = false;
        let mut err = None;
        for (i, e) in events.iter().enumerate() {
            if err.is_none() && !done {
                handle_event(
                    e.as_bytes(),
                    (i as u64 + 1) * 1000,
                    &mut rec,
                    &mut done,
                    &mut err,
                    &progress,
                );
            }
        }
        (rec, done, err)
    }

    #[test]
    fn role_only_first_chunk_is_not_a_token() {
        let (rec, done, err) = feed(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":" def"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":" fib(n):"},"finish_reason":"length"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#,
            "[DONE]",
        ]);
        assert!(done && err.is_none());
        assert_eq!(
            rec.chunks,
            vec![(2000, 4), (3000, 8)],
            "the role-only chunk at 1000 is skipped"
        );
        assert_eq!(rec.first_token_ns(), Some(2000));
        assert_eq!(
            (rec.prompt_tokens, rec.completion_tokens),
            (Some(12), Some(3))
        );
        assert_eq!(rec.finish_reason.as_deref(), Some("length"));
    }

    #[test]
    fn escaped_text_and_completions_shape() {
        let (rec, done, _) = feed(&[r#"{"choices":[{"text":"a\n\"b\""}]}"#, "[DONE]"]);
        assert!(done);
        assert_eq!(rec.chunks, vec![(1000, 5)]);
    }

    #[test]
    fn an_error_inside_a_200_stream_ends_the_request() {
        let (rec, done, err) = feed(&[
            r#"{"choices":[{"text":" x"}]}"#,
            r#"{"error":{"message":"EngineCore encountered an issue.","type":"BadRequestError","code":400}}"#,
            r#"{"choices":[{"text":" never"}]}"#,
        ]);
        assert!(!done);
        assert_eq!(rec.chunks.len(), 1);
        match err {
            Some(RequestError::InStream { body }) => assert!(body.contains("EngineCore")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_data_is_a_precise_error() {
        let (_, _, err) = feed(&["{not json"]);
        assert!(
            matches!(err, Some(RequestError::Malformed { .. })),
            "{err:?}"
        );
    }
}
