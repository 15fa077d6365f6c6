//! The OpenAI-compatible streaming client: one request, timed where bytes arrive.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use hyper::body::Incoming;

use super::chunk;
use super::conn::{Conn, Pool};
use super::sse::SseParser;
use crate::model::{RequestError, RequestRecord};
use crate::plan::Api;

/// Where requests go.
#[derive(Debug, Clone)]
pub struct Target {
    /// `http://host:port`, no trailing slash.
    pub base: String,
    pub api: Api,
    pub model: String,
    /// llama.cpp's per-request `cache_prompt`: `Some(false)` for a cold
    /// cell on a server that has the switch, so no prompt reuses a slot's
    /// cached prefix; `None` sends nothing (other servers warn about fields
    /// they do not know).
    pub cache_prompt: Option<bool>,
}

impl Target {
    pub fn path(&self) -> &'static str {
        match self.api {
            Api::Completions => "/v1/completions",
            Api::Chat => "/v1/chat/completions",
        }
    }
    pub fn url(&self) -> String {
        format!("{}{}", self.base, self.path())
    }
}

/// The client for the server's other endpoints (`/tokenize`, `/metrics`,
/// `/v1/models`): no proxies, Nagle off. Generation requests go through
/// [`Pool`] instead.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .tcp_nodelay(true)
        .no_proxy()
        .build()
        .unwrap_or_else(|_| reqwest::Client::new())
}

/// Shared progress of a cell's requests, for stall detection.
#[derive(Debug)]
pub struct Progress {
    pub epoch: Instant,
    /// Last time any byte arrived or a request started (ns since epoch).
    pub last_ns: AtomicU64,
    pub in_flight: AtomicU64,
}

impl Progress {
    pub fn new() -> Self {
        Progress {
            epoch: Instant::now(),
            last_ns: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
        }
    }
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }
    /// `at` in nanoseconds since the epoch (0 for an instant before it).
    pub fn ns_at(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_nanos() as u64
    }
    /// Note activity at `at`. Written at most once a millisecond: every
    /// request's chunks touch this one line of memory, and a stall is
    /// judged in seconds.
    fn touch(&self, at: u64) {
        if at > self.last_ns.load(Ordering::Relaxed) + 1_000_000 {
            self.last_ns.fetch_max(at, Ordering::Relaxed);
        }
    }
}

impl Default for Progress {
    fn default() -> Self {
        Self::new()
    }
}

const MAX_ERROR_BODY: usize = 16 << 10;

/// A prompt as the characters of a JSON string: escaped, without its
/// quotes. A prompt is encoded once when it is fitted and copied into every
/// request that sends it: a 32k-token prompt escaped anew for each request
/// cost more than streaming its answer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JsonText(String);

impl JsonText {
    pub fn new(text: &str) -> JsonText {
        let quoted = serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into());
        // A JSON string of a `str` always starts and ends with its quotes.
        JsonText(quoted[1..quoted.len() - 1].to_string())
    }

    /// `parts` one after the other: escaping is character by character, so
    /// this is the encoding of the texts joined. (A request's body is
    /// written from its parts directly: [`request_body`].)
    #[cfg(test)]
    pub fn join(parts: &[&JsonText]) -> JsonText {
        JsonText(parts.iter().map(|p| p.0.as_str()).collect())
    }

    /// The text it encodes.
    #[cfg(test)]
    pub fn text(&self) -> String {
        serde_json::from_str(&format!("\"{}\"", self.0)).unwrap_or_default()
    }
}

/// The streaming request for the prompt made of `parts` in order (a tag, the
/// body, another tag): [`request_json`] with an empty prompt, the encoded
/// parts then put between that prompt's quotes, so the request's fields are
/// written in one place and a long prompt is copied once.
pub fn request_body(target: &Target, parts: &[&JsonText], max_tokens: u32) -> Vec<u8> {
    let empty = serde_json::to_vec(&request_json(target, "", max_tokens)).unwrap_or_default();
    let field: &[u8] = match target.api {
        Api::Completions => b"\"prompt\":\"\"",
        Api::Chat => b"\"content\":\"\"",
    };
    // Inside an encoded string every quote follows a backslash, so the
    // field's name followed by its quotes is found only where it is the
    // field itself.
    let Some(at) = empty
        .windows(field.len())
        .position(|w| w == field)
        .map(|i| i + field.len() - 1)
    else {
        return empty;
    };
    let len: usize = parts.iter().map(|p| p.0.len()).sum();
    let mut out = Vec::with_capacity(empty.len() + len);
    out.extend_from_slice(&empty[..at]);
    for p in parts {
        out.extend_from_slice(p.0.as_bytes());
    }
    out.extend_from_slice(&empty[at..]);
    out
}

/// The streaming request [`request_body`] encodes.
pub fn request_json(target: &Target, prompt: &str, max_tokens: u32) -> serde_json::Value {
    let mut body = serde_json::json!({
        "model": target.model,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": true,
        "stream_options": {"include_usage": true},
        "ignore_eos": true,
    });
    if let Some(on) = target.cache_prompt {
        body["cache_prompt"] = on.into();
    }
    match target.api {
        Api::Completions => body["prompt"] = prompt.into(),
        Api::Chat => {
            body["messages"] = serde_json::json!([{"role": "user", "content": prompt}]);
        }
    }
    body
}

/// Send one streaming request on a pooled connection and time it. The send
/// time is when the request's first bytes were written to the socket (on
/// the wire clock), else when it was about to be: after the body is encoded,
/// before the connection is taken.
pub async fn send(
    pool: &Arc<Pool>,
    target: &Target,
    prompt: &[&JsonText],
    max_tokens: u32,
    timeout: Duration,
    progress: &Progress,
) -> RequestRecord {
    let body = Bytes::from(request_body(target, prompt, max_tokens));
    let mut rec = RequestRecord {
        start_ns: progress.now_ns(),
        max_tokens,
        ..Default::default()
    };
    progress.touch(rec.start_ns);
    progress.in_flight.fetch_add(1, Ordering::Relaxed);
    let deadline = tokio::time::Instant::now() + timeout;
    let result =
        tokio::time::timeout_at(deadline, stream(pool, target, body, progress, &mut rec)).await;
    if result.is_err() {
        rec.error = Some(RequestError::Timeout);
    }
    if rec.end_ns == 0 {
        rec.end_ns = progress.now_ns();
    }
    progress.in_flight.fetch_sub(1, Ordering::Relaxed);
    rec
}

fn build_request(
    pool: &Pool,
    target: &Target,
    body: Bytes,
) -> Result<hyper::Request<Full<Bytes>>, hyper::http::Error> {
    hyper::Request::post(format!("{}{}", pool.prefix, target.path()))
        .header(hyper::header::HOST, pool.authority())
        .header(hyper::header::CONTENT_TYPE, "application/json")
        .header(hyper::header::ACCEPT, "text/event-stream")
        .body(Full::new(body))
}

/// A reused keep-alive connection the server had already closed: the request
/// never reached it and is sent again on a new connection.
fn stale(e: &hyper::Error) -> bool {
    e.is_canceled() || e.is_closed() || e.is_incomplete_message()
}

async fn stream(
    pool: &Arc<Pool>,
    target: &Target,
    body: Bytes,
    progress: &Progress,
    rec: &mut RequestRecord,
) {
    let (conn, resp) = match send_request(pool, target, body).await {
        Ok(sent) => sent,
        Err(e) => {
            rec.error = Some(e);
            return;
        }
    };
    // On the wire clock the request starts when its bytes went out: what
    // the client took to get there (a connection, its turn on a busy
    // core) is not the server's.
    if let Some(at) = conn.sent() {
        rec.start_ns = rec.start_ns.max(progress.ns_at(at));
    }
    let status = resp.status().as_u16();
    let is_sse = resp
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("event-stream"));
    let body = resp.into_body();
    if (200..300).contains(&status) && is_sse {
        read_events(pool, conn, body, progress, rec).await;
    } else {
        read_refusal(pool, conn, body, status, progress, rec).await;
    }
}

/// Send the request on a kept-alive connection, or a new one when there is
/// none or the kept one turns out closed.
async fn send_request(
    pool: &Pool,
    target: &Target,
    body: Bytes,
) -> Result<(Conn, hyper::Response<Incoming>), RequestError> {
    let connection_error = |message: String| RequestError::Connection { message };
    let (mut conn, mut reused) = match pool.take().await {
        Some(c) => (c, true),
        None => (
            pool.connect()
                .await
                .map_err(|e| connection_error(e.to_string()))?,
            false,
        ),
    };
    loop {
        let req =
            build_request(pool, target, body.clone()).map_err(|e| RequestError::Malformed {
                message: format!("cannot build the request: {e}"),
            })?;
        match conn.send(req).await {
            Ok(r) => return Ok((conn, r)),
            Err(e) if reused && stale(&e) => {
                reused = false;
                conn = pool
                    .connect()
                    .await
                    .map_err(|e| connection_error(e.to_string()))?;
            }
            Err(e) => return Err(connection_error(error_chain(&e))),
        }
    }
}

/// An error answer (or a JSON answer to a streaming request): read whole,
/// bounded, and kept for the classifier.
async fn read_refusal(
    pool: &Pool,
    mut conn: Conn,
    mut body: Incoming,
    status: u16,
    progress: &Progress,
    rec: &mut RequestRecord,
) {
    let mut text = Vec::new();
    let mut clean = false;
    loop {
        match conn.drive(body.frame()).await {
            Some(Ok(frame)) => {
                if let Ok(c) = frame.into_data() {
                    let room = MAX_ERROR_BODY.saturating_sub(text.len());
                    text.extend_from_slice(&c[..c.len().min(room)]);
                }
            }
            Some(Err(_)) => break,
            None => {
                clean = true;
                break;
            }
        }
    }
    rec.end_ns = progress.now_ns();
    if clean {
        pool.put(conn);
    }
    let text = String::from_utf8_lossy(&text).into_owned();
    rec.error = Some(if (200..300).contains(&status) {
        if text.contains("\"error\"") {
            RequestError::InStream { body: text }
        } else {
            RequestError::Malformed {
                message: format!("expected an event stream, got: {}", truncate(&text, 300)),
            }
        }
    } else {
        RequestError::Http { status, body: text }
    });
}

/// The event stream: each event timed as its chunk arrives and folded into
/// the record, to `[DONE]` (the connection kept for the next request when
/// the body ends cleanly).
async fn read_events(
    pool: &Arc<Pool>,
    mut conn: Conn,
    mut body: Incoming,
    progress: &Progress,
    rec: &mut RequestRecord,
) {
    let mut parser = SseParser::new();
    let mut done = false;
    loop {
        let chunk = match conn.drive(body.frame()).await {
            Some(Ok(frame)) => match frame.into_data() {
                Ok(c) => c,
                Err(_) => continue, // trailers
            },
            None => break,
            Some(Err(e)) => {
                rec.error = Some(RequestError::Connection {
                    message: error_chain(&e),
                });
                return;
            }
        };
        let now = progress.now_ns();
        progress.touch(now);
        let when = When::of(conn.arrival().map(|at| progress.ns_at(at)), now, rec);
        let mut err = None;
        let r = parser.push(&chunk, &mut |data| {
            if err.is_none() && !done {
                handle_event(data, when, rec, &mut done, &mut err);
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
            rec.end_ns = when.at;
            // The request ends at `[DONE]`: the end of the body is the
            // pool's to read, aside when it is not here yet.
            pool.finish(conn, body);
            return;
        }
    }
    let now = progress.now_ns();
    let when = When::of(conn.arrival().map(|at| progress.ns_at(at)), now, rec);
    rec.end_ns = when.at;
    let mut err = None;
    parser.finish(&mut |data| {
        if err.is_none() && !done {
            handle_event(data, when, rec, &mut done, &mut err);
        }
    });
    if let Some(e) = err {
        rec.error = Some(e);
    } else if !done {
        rec.error = Some(RequestError::Truncated);
    } else {
        pool.put(conn);
    }
}

/// When the events completed by one read arrived.
#[derive(Debug, Clone, Copy)]
pub(super) struct When {
    /// On the wire clock where the kernel said, else when read (ns since
    /// the cell's epoch).
    pub at: u64,
    /// How long after arriving they were read, where both clocks exist.
    pub lag_ns: Option<u64>,
}

impl When {
    /// A read at `read_ns` whose bytes arrived at `wire_ns`: the wire time,
    /// kept between the request's send (or its last chunk) and the read, so
    /// a clock that disagrees can never reorder a request's events.
    pub(super) fn of(wire_ns: Option<u64>, read_ns: u64, rec: &RequestRecord) -> When {
        match wire_ns {
            Some(wire) => {
                let floor = rec.chunks.last().map_or(rec.start_ns, |c| c.0).min(read_ns);
                let at = wire.clamp(floor, read_ns);
                When {
                    at,
                    lag_ns: Some(read_ns - at),
                }
            }
            None => When {
                at: read_ns,
                lag_ns: None,
            },
        }
    }

    /// Read the moment it arrived (the tests' events).
    #[cfg(test)]
    pub(super) fn read(at: u64) -> When {
        When { at, lag_ns: None }
    }
}

pub(super) fn handle_event(
    data: &[u8],
    when: When,
    rec: &mut RequestRecord,
    done: &mut bool,
    err: &mut Option<RequestError>,
) {
    if data == b"[DONE]" {
        *done = true;
        return;
    }
    let chunk = match chunk::parse(data) {
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
            body: truncate(&String::from_utf8_lossy(data), MAX_ERROR_BODY),
        });
        return;
    }
    if let (None, Some(id)) = (&rec.id, &chunk.id) {
        rec.id = Some(truncate(id, 128));
    }
    let text_len = chunk.choices.text_len;
    if let Some(f) = &chunk.choices.finish_reason {
        if rec.finish_reason.as_deref() != Some(f.as_ref()) {
            rec.finish_reason = Some(f.to_string());
        }
    }
    // A role-only or empty chunk is not a token.
    if text_len > 0 {
        if rec.max_tokens > 0 && rec.chunks.len() as u64 >= most_chunks(rec.max_tokens) {
            *err = Some(RequestError::Overlong {
                streamed: rec.chunks.len() as u64 + 1,
                max_tokens: rec.max_tokens,
            });
            return;
        }
        rec.chunks
            .push((when.at, text_len.min(u32::MAX as usize) as u32));
        // One lag per chunk once there is any (a read the kernel did not
        // stamp, as the first on a machine where no socket asked before
        // may be, counts as read when it arrived).
        match when.lag_ns {
            Some(lag) => {
                rec.read_lag_us.resize(rec.chunks.len() - 1, 0);
                rec.read_lag_us
                    .push((lag / 1000).min(u64::from(u32::MAX)) as u32);
            }
            None if !rec.read_lag_us.is_empty() => rec.read_lag_us.push(0),
            None => {}
        }
    }
    if let Some(t) = &chunk.timings {
        rec.server = Some(t.trusted());
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

/// The most text chunks a request of `max_tokens` may stream: each carries
/// at least one token, so more than `max_tokens` is a server that does not
/// stop; a margin leaves room for one that splits a token's text. Also what
/// bounds a request's record in memory and on disk.
pub fn most_chunks(max_tokens: u32) -> u64 {
    let m = u64::from(max_tokens);
    m + m / 4 + 16
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
    use crate::model::ServerTiming;

    #[test]
    fn a_request_is_written_around_its_encoded_prompt_as_the_json_it_stands_for() {
        let odd = "say \"hi\"\\ \n\t\u{7}\u{1f} é 漢字 🙂 </script>";
        for api in [Api::Completions, Api::Chat] {
            for cache_prompt in [None, Some(false), Some(true)] {
                let t = Target {
                    base: "http://x".into(),
                    api,
                    model: "m \"q\"".into(),
                    cache_prompt,
                };
                let body = request_body(&t, &[&JsonText::new(odd)], 48);
                let got: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(got, request_json(&t, odd, 48), "{api:?} {cache_prompt:?}");
            }
        }
        let parts = ["Ref 1. ", odd, "\n\nend"].map(JsonText::new);
        assert_eq!(
            JsonText::join(&[&parts[0], &parts[1], &parts[2]]).text(),
            format!("Ref 1. {odd}\n\nend")
        );
        // A prompt in parts (its tag, its body) is the prompt they make.
        let t = Target {
            base: "http://x".into(),
            api: Api::Chat,
            model: "m".into(),
            cache_prompt: None,
        };
        let body = request_body(&t, &[&parts[0], &parts[1], &parts[2]], 48);
        let got: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(got, request_json(&t, &format!("Ref 1. {odd}\n\nend"), 48));
    }

    fn feed(events: &[&str]) -> (RequestRecord, bool, Option<RequestError>) {
        let mut rec = RequestRecord::default();
        let mut done = false;
        let mut err = None;
        for (i, e) in events.iter().enumerate() {
            if err.is_none() && !done {
                handle_event(
                    e.as_bytes(),
                    When::read((i as u64 + 1) * 1000),
                    &mut rec,
                    &mut done,
                    &mut err,
                );
            }
        }
        (rec, done, err)
    }

    /// llama.cpp's last chunk (b1-0c1e570, a usage chunk with `timings`):
    /// its own figures are kept per request, each one that cannot be true
    /// (a string, a negative time, a count that is not whole) left out, and
    /// none of that makes the stream malformed.
    #[test]
    fn the_servers_own_timings_are_kept_when_they_can_be_true() {
        let (rec, done, err) = feed(&[
            r#"{"choices":[{"text":" a","index":0}]}"#,
            r#"{"choices":[],"usage":{"completion_tokens":32,"prompt_tokens":100,"total_tokens":132},"timings":{"cache_n":0,"prompt_n":100,"prompt_ms":2.663,"prompt_per_token_ms":0.02663,"predicted_n":32,"predicted_ms":11.459,"predicted_per_second":2792.5}}"#,
            "[DONE]",
        ]);
        assert!(done && err.is_none());
        let t = rec.server.unwrap();
        assert_eq!(
            (t.prompt_n, t.cache_n, t.predicted_n),
            (Some(100), Some(0), Some(32))
        );
        assert_eq!((t.prompt_ms, t.predicted_ms), (Some(2.663), Some(11.459)));
        let (rec, done, err) = feed(&[
            r#"{"choices":[{"text":" a"}],"timings":{"prompt_n":-3,"cache_n":1.5,"prompt_ms":-1.0,"predicted_n":"32","predicted_ms":null}}"#,
            "[DONE]",
        ]);
        assert!(done && err.is_none(), "{err:?}");
        assert_eq!(rec.server, Some(ServerTiming::default()));
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

#[cfg(test)]
mod pool_tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    const SSE: &str = "data: {\"choices\":[{\"text\":\" hi\"}]}\n\ndata: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n";

    /// Answers each connection's requests with one SSE stream, then closes the
    /// connection after `per_conn` requests without saying so (no
    /// `connection: close`), as a server restarting its workers might.
    async fn server(per_conn: usize) -> (u16, std::sync::Arc<AtomicU64>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let accepted = std::sync::Arc::new(AtomicU64::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    for _ in 0..per_conn {
                        let mut buf = vec![0u8; 64 << 10];
                        let mut got = Vec::new();
                        // Read the head and the body (content-length).
                        loop {
                            let n = s.read(&mut buf).await.unwrap_or(0);
                            if n == 0 {
                                break;
                            }
                            got.extend_from_slice(&buf[..n]);
                            let text = String::from_utf8_lossy(&got).to_string();
                            if let Some(h) = text.find("\r\n\r\n") {
                                let len = text[..h]
                                    .lines()
                                    .find_map(|l| l.strip_prefix("content-length: "))
                                    .and_then(|v| v.trim().parse::<usize>().ok())
                                    .unwrap_or(0);
                                if got.len() >= h + 4 + len {
                                    break;
                                }
                            }
                        }
                        let body = format!("{:x}\r\n{SSE}\r\n0\r\n\r\n", SSE.len());
                        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                        let _ = s.write_all(format!("{head}{body}").as_bytes()).await;
                    }
                    drop(s);
                });
            }
        });
        (port, accepted)
    }

    async fn request_ok(pool: &Arc<Pool>, t: &Target, progress: &Progress) -> RequestRecord {
        let r = send(
            pool,
            t,
            &[&JsonText::new("x")],
            1,
            Duration::from_secs(10),
            progress,
        )
        .await;
        assert!(r.ok(), "{:?}", r.error);
        r
    }

    fn target(port: u16) -> Target {
        Target {
            cache_prompt: None,
            base: format!("http://127.0.0.1:{port}"),
            api: Api::Completions,
            model: "m".into(),
        }
    }

    #[tokio::test]
    async fn keep_alive_connections_are_reused() {
        let (port, server) = server(2).await;
        let t = target(port);
        let pool = Arc::new(Pool::new(&t.base).unwrap());
        let progress = Progress::new();
        for _ in 0..2 {
            let r = request_ok(&pool, &t, &progress).await;
            assert_eq!((r.chunks.len(), r.completion_tokens), (1, Some(1)));
        }
        assert_eq!(
            server.load(Ordering::SeqCst),
            1,
            "two requests, one connection"
        );
    }

    #[tokio::test]
    async fn prewarmed_connections_serve_the_first_requests() {
        let (port, server) = server(1).await;
        let t = target(port);
        let pool = Arc::new(Pool::new(&t.base).unwrap());
        pool.prewarm(3).await;
        // The server task accepts them in its own time: wait for that state.
        tokio::time::timeout(Duration::from_secs(10), async {
            while server.load(Ordering::SeqCst) < 3 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("three connections accepted");
        let progress = Progress::new();
        for _ in 0..3 {
            request_ok(&pool, &t, &progress).await;
        }
        assert_eq!(
            server.load(Ordering::SeqCst),
            3,
            "no connect while a request was timed"
        );
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_replaced_not_a_failure() {
        let (port, server) = server(1).await;
        let t = target(port);
        let pool = Arc::new(Pool::new(&t.base).unwrap());
        let progress = Progress::new();
        for _ in 0..3 {
            request_ok(&pool, &t, &progress).await;
        }
        assert_eq!(
            server.load(Ordering::SeqCst),
            3,
            "one connection per request"
        );
    }
}
