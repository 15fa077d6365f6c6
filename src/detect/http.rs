//! HTTP error classification: a status and a body (or an `error` object that
//! arrived inside a 200 SSE stream) become a [`Failure`].
//!
//! The one thing that matters beyond "it failed" is context overflow: every
//! server words it differently, and the grid must say `ctx 400: 33,012 >
//! 32,768`, so the overflow wordings and the number extractors live in two
//! tables here.

use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;

use super::text::truncate_chars;
use crate::model::{ContextNumbers, Failure, FailureKind, FailureSource};

/// A non-JSON body is quoted up to this many characters.
const RAW_BODY_CHARS: usize = 300;
/// A server's own message is quoted up to this many characters.
const MESSAGE_CHARS: usize = 1000;
/// The body kept as evidence.
const EVIDENCE_CHARS: usize = 4000;

/// Stable cores of context-overflow messages (matched case-insensitively).
/// vLLM (all releases), SGLang, llama.cpp, TGI and OpenAI.
const OVERFLOW_CORES: &[&str] = &[
    // vLLM old/mid/0.32, SGLang "exceeds the model's maximum context length of", OpenAI
    r"maximum context length",
    // SGLang: "The input (P tokens) is longer than the model's context length (N tokens)."
    r"is longer than the model's context length",
    // SGLang scheduler: "Input length (P tokens) exceeds the maximum allowed length (N tokens)."
    r"input length \(\d[\d,]* tokens?\) exceeds the maximum allowed length",
    // vLLM new: "... However, the model's context length is only N tokens"
    r"context length is only \d",
    // vLLM 0.32: "max_tokens=M cannot be greater than max_model_len=N"
    r"max_tokens\s*=\s*\d+ cannot be greater than max_model_len",
    // vLLM mid: "'max_tokens' or 'max_completion_tokens' is too large: M."
    r"'max_tokens' or 'max_completion_tokens' is too large",
    // vLLM v1 input processor: "The decoder prompt (length P) is longer than the maximum model length of N."
    r"is longer than the maximum model length",
    // vLLM v0 engine: "Input prompt (P tokens) is too long and exceeds limit of N"
    r"input prompt \(\d+ tokens\) is too long",
    // llama.cpp: "the request exceeds the available context size" / "request (T tokens) exceeds ..."
    r"exceeds the available context size",
    r"exceed_context_size_error",
    // TGI: "`inputs` tokens + `max_new_tokens` must be <= N"
    r".inputs. tokens \+ .max_new_tokens. must be <=",
    // TGI: "`inputs` must have less than N tokens. Given: P"
    r".inputs. must have less than \d+ tokens",
    // OpenAI error code
    r"context_length_exceeded",
    // llama.cpp (embeddings, rerank): "input is too large to process. increase the physical batch size"
    r"input is too large to process",
    // TensorRT-LLM: "Prompt length (5056) exceeds maximum sequence length (2048)";
    // its Triton backend: "Prompt length (200) exceeds maximum input length (1)"
    r"prompt length \(\d+\) exceeds maximum (?:sequence|input) length",
    // MLC LLM: "Request prompt has 38726 tokens in total, larger than the model input length limit 8192."
    r"tokens in total, larger than the model",
    // TensorRT-LLM LLM API: "The sum of prompt length (9351.0), query length (0) should not exceed max_num_tokens (8192)"
    r"should not exceed max_num_tokens",
    // vLLM, when a client sized max_tokens as context − prompt and the prompt
    // alone was over: "max_tokens must be at least 1, got -344."
    r"max_tokens must be at least 1, got -\d",
];

#[derive(Debug, Clone, Copy, PartialEq)]
enum Field {
    Limit,
    Prompt,
    Output,
    Total,
}

/// Where each number sits in each wording; the first match per field wins.
/// `(N)` is a number, possibly with thousands separators.
const NUMBER_PATTERNS: &[(Field, &str)] = &[
    (Field::Limit, r"maximum context length (?:is|of) (N)"),
    (Field::Limit, r"context length is only (N)"),
    (Field::Limit, r"max_model_len\s*=\s*(N)"),
    (Field::Limit, r"model's context length \((N) tokens?\)"),
    (Field::Limit, r"available context size \((N) tokens?\)"),
    (Field::Limit, r"maximum model length of (N)"),
    (Field::Limit, r"exceeds limit of (N)"),
    (Field::Limit, r"must be <= (N)"),
    (Field::Limit, r"must have less than (N) tokens"),
    (Field::Limit, r"maximum allowed length \((N) tokens?\)"),
    (Field::Limit, r"maximum (?:sequence|input) length \((N)\)"),
    (Field::Limit, r"input length limit (N)"),
    (Field::Limit, r"context window size (N)"),
    (Field::Limit, r"max_num_tokens \((N)\)"),
    (Field::Total, r"you requested (N) tokens"),
    (Field::Total, r"requested a total of (N) tokens"),
    (Field::Total, r"request \((N) tokens?\) exceeds"),
    (Field::Total, r"your messages resulted in (N) tokens"),
    (Field::Prompt, r"\((N) in the (?:messages|prompt|input)"),
    (Field::Prompt, r"your request has (N) input tokens"),
    (Field::Prompt, r"you passed (N) input tokens"),
    (Field::Prompt, r"contains at least (N) input tokens"),
    (Field::Prompt, r"the input \((N) tokens?\)"),
    (Field::Prompt, r"(N) tokens from the input"),
    (Field::Prompt, r"given: (N) .inputs. tokens"),
    (
        Field::Prompt,
        r"must have less than \d+ tokens\. given: (N)",
    ),
    (Field::Prompt, r"decoder prompt \(length (N)\)"),
    (Field::Prompt, r"input prompt \((N) tokens\)"),
    (Field::Prompt, r"input length \((N) tokens?\)"),
    (Field::Prompt, r"prompt length \((N)[.)]"),
    (Field::Prompt, r"prompt has (N) tokens in total"),
    (Field::Output, r"(N) (?:in|for) the completion"),
    (Field::Output, r"(N) tokens for the completion"),
    (Field::Output, r"requested (N) output tokens"),
    (Field::Output, r"is too large: (N)"),
    (Field::Output, r"max_tokens\s*=\s*(N)"),
    (Field::Output, r"and (N) .max_new_tokens."),
];

struct Tables {
    overflow: Option<regex::RegexSet>,
    numbers: Vec<(Field, Regex)>,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables {
        overflow: regex::RegexSet::new(OVERFLOW_CORES.iter().map(|c| format!("(?i){c}"))).ok(),
        numbers: NUMBER_PATTERNS
            .iter()
            .filter_map(|(field, re)| {
                let re = re.replace("(N)", r"([0-9][0-9,_]*)");
                Regex::new(&format!("(?i){re}")).ok().map(|r| (*field, r))
            })
            .collect(),
    })
}

/// True when `text` contains a context-overflow message from any server.
pub fn is_overflow_message(text: &str) -> bool {
    tables()
        .overflow
        .as_ref()
        .is_some_and(|set| set.is_match(text))
}

fn parse_number(s: &str) -> Option<u64> {
    let digits: String = s.chars().filter(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// The numbers an overflow message states (N, P, M, T), from its wording.
pub fn context_numbers(text: &str) -> ContextNumbers {
    let mut out = ContextNumbers::default();
    for (field, re) in &tables().numbers {
        let slot = match field {
            Field::Limit => &mut out.limit,
            Field::Prompt => &mut out.prompt_tokens,
            Field::Output => &mut out.output_tokens,
            Field::Total => &mut out.total_tokens,
        };
        if slot.is_some() {
            continue;
        }
        if let Some(n) = re
            .captures(text)
            .and_then(|c| c.get(1))
            .and_then(|m| parse_number(m.as_str()))
        {
            *slot = Some(n);
        }
    }
    out
}

/// The error object of a body: `{"error": {...}}` -> the inner object,
/// otherwise the body itself.
fn error_object(v: &Value) -> &Value {
    match v.get("error") {
        Some(inner @ Value::Object(_)) => inner,
        _ => v,
    }
}

fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

/// The server's own words: `{"error":{"message"}}`, `{"error":"..."}`, flat
/// `{"message"}`, FastAPI `{"detail"}`, or a bare JSON string.
pub fn server_message(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(map) => {
            match map.get("error") {
                Some(Value::String(s)) => return Some(s.clone()),
                Some(Value::Object(inner)) => {
                    if let Some(m) = inner.get("message").and_then(value_text) {
                        return Some(m);
                    }
                }
                _ => {}
            }
            map.get("message")
                .and_then(value_text)
                .or_else(|| map.get("detail").and_then(value_text))
        }
        _ => None,
    }
}

/// An HTTP status stated in the body (`code: 400`, or OpenAI's
/// `code: "context_length_exceeded"`, which comes with a 400).
pub fn body_status(v: &Value) -> Option<u16> {
    let from = |v: &Value| -> Option<u16> {
        match v.get("code")? {
            Value::Number(n) => n
                .as_u64()
                .filter(|c| (100..=599).contains(c))
                .and_then(|c| u16::try_from(c).ok()),
            Value::String(s) if s == "context_length_exceeded" => Some(400),
            Value::String(s) => s.parse::<u16>().ok().filter(|c| (100..=599).contains(c)),
            _ => None,
        }
    };
    from(error_object(v)).or_else(|| from(v))
}

/// True when the JSON value has the shape of an error body.
pub fn looks_like_error_body(v: &Value) -> bool {
    match v {
        Value::Object(map) => {
            map.contains_key("error")
                || map.get("object").and_then(Value::as_str) == Some("error")
                || map.contains_key("detail")
        }
        _ => false,
    }
}

/// Overflow numbers from the structured fields some servers add
/// (llama.cpp `n_prompt_tokens` / `n_ctx`), filling gaps left by the wording.
fn structured_numbers(v: &Value, numbers: &mut ContextNumbers) {
    let obj = error_object(v);
    let get = |k: &str| {
        obj.get(k)
            .and_then(Value::as_u64)
            .or_else(|| v.get(k).and_then(Value::as_u64))
    };
    if numbers.prompt_tokens.is_none() {
        numbers.prompt_tokens = get("n_prompt_tokens");
    }
    if numbers.limit.is_none() {
        numbers.limit = get("n_ctx");
    }
}

fn is_overflow_code(v: &Value) -> bool {
    let obj = error_object(v);
    [
        obj.get("code"),
        obj.get("type"),
        v.get("code"),
        v.get("type"),
    ]
    .into_iter()
    .flatten()
    .filter_map(Value::as_str)
    .any(|s| s == "context_length_exceeded" || s == "exceed_context_size_error")
}

/// Shared by the two entry points: classify one error whose server message
/// is `text` (untruncated), from a parsed body `json` (when it parsed).
fn classify_error(head: String, text: &str, json: Option<&Value>, evidence: String) -> Failure {
    let overflow = is_overflow_message(text) || json.is_some_and(is_overflow_code);
    let shown = truncate_chars(text.trim(), MESSAGE_CHARS);
    let message = if shown.is_empty() {
        head
    } else {
        format!("{head}: {shown}")
    };
    let context = overflow.then(|| {
        let mut numbers = context_numbers(text);
        if let Some(v) = json {
            structured_numbers(v, &mut numbers);
        }
        numbers
    });
    // A server that reports its own GPU fault in the body (`CUDA out of
    // memory` in a 500) is named by the fault.
    let named = match super::log::classify_line(text) {
        super::log::LineClass::Fatal(kind) if kind.is_fatal_server_error() => Some(kind),
        _ => None,
    };
    let kind = match (overflow, named) {
        (true, _) => FailureKind::ContextOverflow,
        (false, Some(kind)) => kind,
        (false, None) => FailureKind::HttpError,
    };
    Failure::new(kind, FailureSource::Http, message)
        .with_evidence(vec![evidence])
        .with_context(context)
}

/// Classify an HTTP error response. Context overflow (with the numbers the
/// server stated) for every server's wording; anything else is an
/// `HttpError` whose message is `HTTP {status}: {server message}` (a body
/// that is not JSON is quoted up to 300 characters).
pub fn classify_http(status: u16, body: &str) -> Failure {
    let json: Option<Value> = serde_json::from_str(body.trim()).ok();
    let head = format!("HTTP {status}");
    let evidence = truncate_chars(body, EVIDENCE_CHARS);
    match json.as_ref().and_then(server_message) {
        Some(m) => classify_error(head, &m, json.as_ref(), evidence),
        None => {
            let mut failure = classify_error(head.clone(), body, json.as_ref(), evidence);
            let quoted = truncate_chars(body.trim(), RAW_BODY_CHARS);
            failure.message = if quoted.is_empty() {
                head
            } else {
                format!("{head}: {quoted}")
            };
            failure
        }
    }
}

/// Classify an `error` that arrived inside a 200 SSE stream. `value` is the
/// JSON of the `data:` line (`{"error": {...}}`), or the error object itself.
pub fn classify_stream_error(value: &Value) -> Failure {
    let text = server_message(value).unwrap_or_else(|| value.to_string());
    let head = match body_status(value) {
        Some(code) => format!("stream error {code}"),
        None => "stream error".to_string(),
    };
    classify_error(
        head,
        &text,
        Some(value),
        truncate_chars(&value.to_string(), EVIDENCE_CHARS),
    )
}

#[cfg(test)]
mod tests;
