//! The HTTP side: an OpenAI-compatible API with the flavor's extra endpoints and
//! error bodies, on hyper's HTTP/1.1 server with keep-alive.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method as HttpMethod, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

use crate::args::{Flavor, Method};
use crate::engine::{self, Endpoint, Generation, Outcome, Phase, Shared, Sink};
use crate::logs::{self, Stream};
use crate::script::Vars;
use crate::send_log::Stamped;
use crate::style;
use crate::texts::texts;
use crate::tokenizer::{self, PromptError};
use crate::wire::{self, Envelope, Message, MessageChoice, TextChoice, Usage};

type Body = BoxBody<Bytes, Infallible>;

/// Largest request body accepted (a 32k-word prompt is a few hundred KB).
const MAX_BODY_BYTES: usize = 64 << 20;
const DEFAULT_MAX_TOKENS_COMPLETIONS: u64 = 16;
const DEFAULT_MAX_TOKENS_CHAT: u64 = 256;

/// Accepts connections forever; each is served on its own task.
pub async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let stamp = shared.send_log.get().is_some() && wire_stamp::enable(&listener);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(conn) => conn,
            Err(e) => {
                // Out of file descriptors and the like: wait and go on.
                logs::line(Stream::Stderr, format!("ERROR:    accept failed: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Tokens must leave as soon as they are written.
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let stream = Stamped::new(stream, stamp);
        let latest = stream.latest();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                // The read that completed the head: when it arrived.
                let arrived = latest.lock().ok().and_then(|l| *l);
                async move { Ok::<_, Infallible>(handle(shared, peer, req, arrived).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .header_read_timeout(None)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed()
}

fn response(status: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    response(status, "application/json", full(value.to_string()))
}

fn detail(status: StatusCode) -> Response<Body> {
    json_response(
        status,
        &json!({"detail": status.canonical_reason().unwrap_or("Error")}),
    )
}

fn error(shared: &Shared, status: StatusCode, kind: &str, message: &str) -> Response<Body> {
    let body = wire::error_body(shared.args.flavor, status.as_u16(), kind, message);
    response(status, "application/json", full(body))
}

fn bad_request(shared: &Shared, message: &str) -> Response<Body> {
    error(shared, StatusCode::BAD_REQUEST, "BadRequestError", message)
}

/// The flavor's context-overflow message (its `context-overflow` section; see
/// FAILURE_SIGNATURES.md).
pub fn overflow_message(flavor: Flavor, limit: u64, prompt: u64, completion: u64) -> String {
    let mut vars = Vars::new();
    vars.set("limit", limit)
        .set("total", prompt.saturating_add(completion))
        .set("prompt", prompt)
        .set("completion", completion);
    texts().text(flavor, "context-overflow", &vars)
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

async fn handle(
    shared: Arc<Shared>,
    peer: SocketAddr,
    req: Request<Incoming>,
    arrived: Option<Instant>,
) -> Response<Body> {
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".to_string());
    let version = match req.version() {
        hyper::Version::HTTP_10 => "HTTP/1.0",
        _ => "HTTP/1.1",
    };
    let resp = route(&shared, req, arrived).await;
    logs::line(
        Stream::Stdout,
        style::access_line(
            &peer.to_string(),
            method.as_str(),
            &path,
            version,
            resp.status().as_u16(),
        ),
    );
    resp
}

async fn route(
    shared: &Arc<Shared>,
    req: Request<Incoming>,
    arrived: Option<Instant>,
) -> Response<Body> {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let front_delay = shared.args.front_delay_ms;
    if front_delay > 0 && path.starts_with("/v1/") && method == HttpMethod::POST {
        tokio::time::sleep(Duration::from_millis(front_delay)).await;
    }
    // Pacing (and the server's own clock) counts from here: the request's
    // head is in.
    let start = Instant::now();
    let sglang = shared.args.flavor == Flavor::Sglang;
    let dev_mode = std::env::var("VLLM_SERVER_DEV_MODE").is_ok_and(|v| v == "1");
    let allowed = match path.as_str() {
        "/health" | "/v1/models" | "/metrics" | "/version" => HttpMethod::GET,
        "/get_model_info" | "/get_server_info" | "/health_generate" if sglang => HttpMethod::GET,
        "/flush_cache" if sglang => HttpMethod::POST,
        "/reset_prefix_cache" if !sglang && dev_mode => HttpMethod::POST,
        "/tokenize" if shared.args.no_tokenize => return detail(StatusCode::NOT_FOUND),
        "/v1/completions" | "/v1/chat/completions" | "/tokenize" => HttpMethod::POST,
        _ => return detail(StatusCode::NOT_FOUND),
    };
    if method != allowed && !(method == HttpMethod::HEAD && allowed == HttpMethod::GET) {
        return detail(StatusCode::METHOD_NOT_ALLOWED);
    }
    if !shared.is_ready() {
        return match path.as_str() {
            "/health" => response(StatusCode::SERVICE_UNAVAILABLE, "text/plain", full("")),
            _ => detail(StatusCode::SERVICE_UNAVAILABLE),
        };
    }
    if allowed == HttpMethod::GET {
        return match path.as_str() {
            "/health" => response(StatusCode::OK, "text/plain", full("")),
            "/v1/models" => json_response(StatusCode::OK, &models(shared)),
            "/metrics" => response(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                full(crate::metrics::exposition(shared)),
            ),
            "/version" => json_response(
                StatusCode::OK,
                &json!({"version": if sglang { "0.5.0-sim" } else { "0.10.1-sim" }}),
            ),
            "/get_model_info" => json_response(StatusCode::OK, &model_info(shared)),
            "/get_server_info" => json_response(StatusCode::OK, &server_info(shared)),
            _ => health_generate(shared).await,
        };
    }
    if matches!(path.as_str(), "/flush_cache" | "/reset_prefix_cache") {
        return flush_cache(shared);
    }
    let body = match Limited::new(req.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(b) => b.to_bytes(),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return error(
                shared,
                StatusCode::PAYLOAD_TOO_LARGE,
                "BadRequestError",
                "Request body too large",
            )
        }
        Err(_) => return bad_request(shared, "Could not read the request body"),
    };
    let value: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return bad_request(shared, "Request body must be a JSON object"),
        Err(e) => return bad_request(shared, &format!("JSON decode error: {e}")),
    };
    if let Some(resp) = check_model(shared, &value) {
        return resp;
    }
    match path.as_str() {
        "/tokenize" => tokenize(shared, &value),
        "/v1/completions" => {
            completion(shared, &value, Endpoint::Completions, start, arrived).await
        }
        _ => completion(shared, &value, Endpoint::Chat, start, arrived).await,
    }
}

/// Empty the prefix cache, answering as the imitated server does.
fn flush_cache(shared: &Shared) -> Response<Body> {
    shared.flush_cache();
    if shared.args.flavor == Flavor::Sglang {
        response(
            StatusCode::OK,
            "text/plain; charset=utf-8",
            full("Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n"),
        )
    } else {
        json_response(StatusCode::OK, &json!({"success": true}))
    }
}

/// 404 for a model this server does not serve.
fn check_model(shared: &Shared, body: &Value) -> Option<Response<Body>> {
    match body.get("model") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) if *m == shared.args.model => None,
        Some(other) => {
            let name = other
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| other.to_string());
            Some(error(
                shared,
                StatusCode::NOT_FOUND,
                "NotFoundError",
                &format!("The model `{name}` does not exist."),
            ))
        }
    }
}

/// A request body the server refuses: the message of its 400.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum BadRequest {
    #[error(transparent)]
    Prompt(#[from] PromptError),
    #[error("'{0}' is required")]
    Missing(&'static str),
    #[error("'prompt' or 'messages' is required")]
    NoPrompt,
    #[error("'{0}' must be a boolean")]
    NotABoolean(&'static str),
    #[error("{name} must be at least 1, got {given}.")]
    TooFewTokens { name: &'static str, given: i64 },
    #[error("'{0}' must be an integer")]
    NotAnInteger(&'static str),
}

/// Prompt token ids of a completions or chat body.
fn prompt_ids(shared: &Shared, body: &Value, endpoint: Endpoint) -> Result<Vec<u32>, BadRequest> {
    match endpoint {
        Endpoint::Completions => match body.get("prompt") {
            Some(p) => Ok(tokenizer::encode_prompt(p)?),
            None => Err(BadRequest::Missing("prompt")),
        },
        Endpoint::Chat => match body.get("messages") {
            Some(m) => Ok(chat_ids(shared, m)?),
            None => Err(BadRequest::Missing("messages")),
        },
    }
}

/// A chat's token ids as the template makes them: the model's default system
/// prompt (if it has one) before the messages.
fn chat_ids(shared: &Shared, messages: &Value) -> Result<Vec<u32>, PromptError> {
    /// The system prompt's token: one id, repeated (its text is never shown).
    const SYSTEM_TOKEN: u32 = 11;
    let mut ids = vec![SYSTEM_TOKEN; shared.args.system_prompt_tokens as usize];
    ids.extend(tokenizer::encode_chat(messages)?);
    Ok(ids)
}

fn tokenize(shared: &Shared, body: &Value) -> Response<Body> {
    let ids = if let Some(m) = body.get("messages") {
        chat_ids(shared, m).map_err(BadRequest::from)
    } else if let Some(p) = body.get("prompt") {
        tokenizer::encode_prompt(p).map_err(BadRequest::from)
    } else {
        Err(BadRequest::NoPrompt)
    };
    match ids {
        Ok(ids) => json_response(
            StatusCode::OK,
            &json!({
                "count": ids.len(),
                "max_model_len": shared.args.max_model_len,
                "tokens": ids,
                "token_strs": null,
            }),
        ),
        Err(e) => bad_request(shared, &e.to_string()),
    }
}

fn bool_field(body: &Value, name: &'static str) -> Result<bool, BadRequest> {
    match body.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(BadRequest::NotABoolean(name)),
    }
}

fn max_tokens(body: &Value, endpoint: Endpoint) -> Result<u64, BadRequest> {
    let field = ["max_completion_tokens", "max_tokens"]
        .into_iter()
        .find_map(|k| body.get(k).filter(|v| !v.is_null()).map(|v| (k, v)));
    match field {
        None => Ok(match endpoint {
            Endpoint::Completions => DEFAULT_MAX_TOKENS_COMPLETIONS,
            Endpoint::Chat => DEFAULT_MAX_TOKENS_CHAT,
        }),
        Some((name, v)) => match v.as_i64() {
            Some(n) if n >= 1 => Ok(n as u64),
            Some(given) => Err(BadRequest::TooFewTokens { name, given }),
            None => Err(BadRequest::NotAnInteger(name)),
        },
    }
}

/// What a generation request asks for, checked: its prompt's token ids and
/// length (BOS counted), `max_tokens`, and how the answer is sent.
struct Asked {
    ids: Vec<u32>,
    prompt: u64,
    max: u64,
    stream: bool,
    include_usage: bool,
}

impl Asked {
    /// The request's fields, or the message of the 400 the server answers.
    fn read(shared: &Shared, body: &Value, endpoint: Endpoint) -> Result<Asked, BadRequest> {
        let ids = prompt_ids(shared, body, endpoint)?;
        let prompt = ids.len() as u64 + u64::from(shared.args.bos);
        let max = max_tokens(body, endpoint)?;
        let stream = bool_field(body, "stream")?;
        let include_usage = match body.get("stream_options") {
            None | Some(Value::Null) => false,
            Some(o) => bool_field(o, "include_usage")?,
        };
        Ok(Asked {
            ids,
            prompt,
            max,
            stream,
            include_usage,
        })
    }
}

async fn completion(
    shared: &Arc<Shared>,
    body: &Value,
    endpoint: Endpoint,
    start: Instant,
    arrived: Option<Instant>,
) -> Response<Body> {
    let mut asked = match Asked::read(shared, body, endpoint) {
        Ok(a) => a,
        Err(e) => return bad_request(shared, &e.to_string()),
    };
    let limit = shared.args.max_model_len;
    if shared.args.clamp_max_tokens && asked.prompt < limit && asked.max <= limit {
        asked.max = asked.max.min(limit - asked.prompt);
    }
    if asked.prompt.saturating_add(asked.max) > limit {
        return bad_request(
            shared,
            &overflow_message(shared.args.flavor, limit, asked.prompt, asked.max),
        );
    }
    shared.cache_lookup(&asked.ids);
    let seq = shared.next_request_seq();
    let id = match endpoint {
        Endpoint::Completions => format!("cmpl-sim{seq:024x}"),
        Endpoint::Chat => format!("chatcmpl-sim{seq:024x}"),
    };
    let gen = Generation {
        endpoint,
        id,
        created: unix_now(),
        model: shared.args.model.clone(),
        prompt_tokens: asked.prompt,
        max_tokens: asked.max,
        include_usage: asked.include_usage,
        seq,
        start,
        arrived,
    };
    if asked.stream {
        streamed(shared, gen)
    } else {
        whole(shared, gen).await
    }
}

/// The answer as server-sent events, produced while the client reads.
/// With `--send-log`, each text chunk is timed as the connection takes it.
fn streamed(shared: &Arc<Shared>, gen: Generation) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<engine::Event>(16);
    let log = shared.send_log.get().cloned().map(|tx| {
        let in_us = gen
            .arrived
            .map(|a| gen.start.saturating_duration_since(a).as_micros() as u64);
        (tx, gen.id.clone(), gen.start, in_us, Vec::new())
    });
    tokio::spawn(engine::generate(shared.clone(), gen, Sink::Stream(tx)));
    let frames = futures_util::stream::unfold((rx, log), |(mut rx, mut log)| async move {
        match rx.recv().await {
            Some(ev) => {
                if let (true, Some((_, _, start, _, sent))) = (ev.text, &mut log) {
                    sent.push(start.elapsed().as_micros() as u64);
                }
                Some((Ok::<_, Infallible>(Frame::data(ev.bytes)), (rx, log)))
            }
            None => {
                if let Some((tx, id, _, in_us, sent)) = log {
                    let _ = tx.send(crate::send_log::line(&id, in_us, &sent));
                }
                None
            }
        }
    });
    let mut r = response(
        StatusCode::OK,
        "text/event-stream; charset=utf-8",
        BodyExt::boxed(StreamBody::new(frames)),
    );
    r.headers_mut()
        .insert("cache-control", HeaderValue::from_static("no-cache"));
    r
}

/// The answer as one JSON body once the generation is done.
async fn whole(shared: &Arc<Shared>, gen: Generation) -> Response<Body> {
    let outcome = engine::generate(shared.clone(), gen.clone(), Sink::Collect(String::new())).await;
    let text = match outcome {
        Outcome::Done(text) => text,
        Outcome::Failed(msg) => {
            return error(
                shared,
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalServerError",
                &msg,
            )
        }
        Outcome::Ended => {
            return error(
                shared,
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalServerError",
                "generation ended",
            )
        }
    };
    let usage = Some(Usage::new(
        gen.prompt_tokens,
        tokenizer::count_tokens(&text),
    ));
    let finish_reason = Some("length");
    let body = match gen.endpoint {
        Endpoint::Completions => Envelope {
            id: &gen.id,
            object: "text_completion",
            created: gen.created,
            model: &gen.model,
            choices: vec![TextChoice {
                index: 0,
                text: &text,
                logprobs: None,
                finish_reason,
                stop_reason: None,
            }],
            usage,
        }
        .to_json(),
        Endpoint::Chat => Envelope {
            id: &gen.id,
            object: "chat.completion",
            created: gen.created,
            model: &gen.model,
            choices: vec![MessageChoice {
                index: 0,
                message: Message {
                    role: "assistant",
                    content: &text,
                    tool_calls: Vec::new(),
                },
                logprobs: None,
                finish_reason,
                stop_reason: None,
            }],
            usage,
        }
        .to_json(),
    };
    response(StatusCode::OK, "application/json", full(body))
}

/// SGLang's `/health_generate`: one tiny generation; a hung engine times out.
async fn health_generate(shared: &Shared) -> Response<Body> {
    match shared.phase() {
        Phase::Running => {
            let pacing = engine::Pacing::new(&shared.args);
            tokio::time::sleep(pacing.ttft(1, 1)).await;
            response(StatusCode::OK, "text/plain", full(""))
        }
        _ => {
            tokio::time::sleep(Duration::from_secs(20)).await;
            response(StatusCode::SERVICE_UNAVAILABLE, "text/plain", full(""))
        }
    }
}

fn models(shared: &Shared) -> Value {
    let m = &shared.args.model;
    json!({
        "object": "list",
        "data": [{
            "id": m,
            "object": "model",
            "created": unix_now(),
            "owned_by": match shared.args.flavor { Flavor::Sglang => "sglang", Flavor::Vllm => "vllm" },
            "root": m,
            "parent": null,
            "max_model_len": shared.args.max_model_len,
        }],
    })
}

fn model_info(shared: &Shared) -> Value {
    json!({
        "model_path": shared.args.model,
        "tokenizer_path": shared.args.model,
        "is_generation": true,
        "preferred_sampling_params": null,
        "weight_version": "default",
    })
}

fn server_info(shared: &Shared) -> Value {
    let a = &shared.args;
    let c = shared.counters().clone();
    let (algorithm, draft) = match a.method {
        Method::None => (Value::Null, Value::Null),
        Method::Dflash => (json!("DFLASH"), json!(16)),
        Method::Ddtree => (json!("DDTREE"), json!(a.budget)),
    };
    let mut state = json!({
        "last_gen_throughput": c.last_gen_throughput,
        "memory_usage": {"weight": 61.03 / f64::from(a.tp), "kvcache": 49.22, "token_capacity": shared.kv_capacity()},
    });
    if a.method != Method::None {
        state["avg_spec_accept_length"] = json!(c.spec.accept_len().unwrap_or(0.0));
    }
    json!({
        "model_path": a.model,
        "tokenizer_path": a.model,
        "host": a.host,
        "port": a.port,
        "tp_size": a.tp,
        "context_length": a.max_model_len,
        "speculative_algorithm": algorithm,
        "speculative_num_draft_tokens": draft,
        "random_seed": a.seed,
        "enable_metrics": true,
        "internal_states": [state],
        "version": "0.5.0-sim",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_wording() {
        assert_eq!(
            overflow_message(Flavor::Vllm, 32768, 32700, 256),
            "This model's maximum context length is 32768 tokens. However, you requested 32956 \
             tokens (32700 in the messages, 256 in the completion). Please reduce the length of \
             the messages or completion."
        );
        assert!(overflow_message(Flavor::Sglang, 100, 90, 20).starts_with(
            "Requested token count exceeds the model's maximum context length of 100 tokens. You \
             requested a total of 110 tokens: 90 tokens from the input messages and 20 tokens for \
             the completion."
        ));
    }

    #[test]
    fn a_refused_body_says_what_it_said_as_text() {
        let said = |body: Value, endpoint| {
            Asked::read(&Shared::for_tests(&[]), &body, endpoint)
                .err()
                .map(|e| e.to_string())
        };
        let completions = Endpoint::Completions;
        let chat = Endpoint::Chat;
        for (body, endpoint, words) in [
            (json!({}), completions, "'prompt' is required"),
            (json!({}), chat, "'messages' is required"),
            (
                json!({"prompt": ["a", "b"]}),
                completions,
                "the simulated server takes one prompt per request",
            ),
            (
                json!({"prompt": 7}),
                completions,
                "'prompt' must be a string or a list of token ids",
            ),
            (
                json!({"prompt": [-1]}),
                completions,
                "'prompt' token ids must be integers",
            ),
            (
                json!({"messages": {}}),
                chat,
                "'messages' must be a list of messages",
            ),
            (
                json!({"messages": [{"content": "x"}]}),
                chat,
                "messages[0]: missing 'role'",
            ),
            (
                json!({"messages": [{"role": "user", "content": 1}]}),
                chat,
                "messages[0]: 'content' must be a string or a list of parts",
            ),
            (
                json!({"prompt": "a", "max_tokens": 0}),
                completions,
                "max_tokens must be at least 1, got 0.",
            ),
            (
                json!({"prompt": "a", "max_completion_tokens": "x"}),
                completions,
                "'max_completion_tokens' must be an integer",
            ),
            (
                json!({"prompt": "a", "stream": 1}),
                completions,
                "'stream' must be a boolean",
            ),
            (
                json!({"prompt": "a", "stream_options": {"include_usage": "y"}}),
                completions,
                "'include_usage' must be a boolean",
            ),
        ] {
            assert_eq!(
                said(body.clone(), endpoint).as_deref(),
                Some(words),
                "{body}"
            );
        }
    }

    #[test]
    fn max_tokens_rules() {
        assert_eq!(max_tokens(&json!({}), Endpoint::Completions), Ok(16));
        assert_eq!(max_tokens(&json!({"max_tokens": 5}), Endpoint::Chat), Ok(5));
        assert_eq!(
            max_tokens(
                &json!({"max_tokens": 5, "max_completion_tokens": 7}),
                Endpoint::Chat
            ),
            Ok(7)
        );
        assert!(max_tokens(&json!({"max_tokens": 0}), Endpoint::Chat).is_err());
        assert!(max_tokens(&json!({"max_tokens": "x"}), Endpoint::Chat).is_err());
    }
}
