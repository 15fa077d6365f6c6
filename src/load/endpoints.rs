//! The server's endpoints besides the streamed requests, asked with short
//! timeouts: a GET that must answer 2xx, `POST /tokenize`, and the one
//! non-streamed request whose `usage` checks it.

use std::time::Duration;

use super::client::{self, Target};
use super::{LoadError, SideError};

/// GET `url`: the response, if the server answered 2xx within `timeout`.
pub(super) async fn get_ok(
    client: &reqwest::Client,
    url: &str,
    timeout: Duration,
) -> Option<reqwest::Response> {
    let resp = client.get(url).timeout(timeout).send().await.ok()?;
    resp.status().is_success().then_some(resp)
}

/// The most a JSON answer from the server's side endpoints may hold
/// (`/v1/models`, `/tokenize`, the usage check, a cache flush): a few MiB,
/// so a hostile or broken server cannot fill memory.
pub(super) const MAX_JSON_BODY: usize = 4 << 20;

/// A response's body, read to at most `max` bytes (more is an error, not a
/// truncated document).
pub(super) async fn read_capped(
    mut resp: reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, SideError> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(SideError::Body)? {
        if body.len() + chunk.len() > max {
            return Err(SideError::TooLarge(max));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// POST `body` as JSON and read a JSON answer.
async fn post_json(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> Result<serde_json::Value, SideError> {
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).unwrap_or_default())
        .timeout(timeout)
        .send()
        .await
        .map_err(SideError::Send)?;
    if !resp.status().is_success() {
        return Err(SideError::Status(resp.status().as_u16()));
    }
    let bytes = read_capped(resp, MAX_JSON_BODY).await?;
    serde_json::from_slice(&bytes).map_err(SideError::Json)
}

/// How a server's `POST /tokenize` takes its text: vLLM and SGLang as the
/// request would send it (`prompt`, or `messages` for chat), llama.cpp as
/// `content` (it answers `{"tokens": []}` to a `prompt`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenizeField {
    Request,
    Content,
}

/// Measure a text with the server's tokenizer (`POST /tokenize`), if it has
/// one. No tokens for a text that is not empty is not a count: an error.
pub async fn tokenize(
    client: &reqwest::Client,
    target: &Target,
    field: TokenizeField,
    text: &str,
) -> Result<u64, LoadError> {
    let body = match (field, target.api) {
        (TokenizeField::Content, _) => serde_json::json!({"content": text}),
        (TokenizeField::Request, crate::plan::Api::Completions) => {
            serde_json::json!({"model": target.model, "prompt": text})
        }
        (TokenizeField::Request, crate::plan::Api::Chat) => {
            serde_json::json!({"model": target.model, "messages": [{"role": "user", "content": text}]})
        }
    };
    // Short: a wedged server must not hold the sweep here (the stall and
    // exit watches only run while requests are in flight).
    let url = format!("{}/tokenize", target.base);
    let v = post_json(client, &url, &body, Duration::from_secs(10))
        .await
        .map_err(LoadError::Tokenize)?;
    let n = v
        .get("count")
        .and_then(|c| c.as_u64())
        .or_else(|| {
            v.get("tokens")
                .and_then(|t| t.as_array())
                .map(|a| a.len() as u64)
        })
        .ok_or(LoadError::Tokenize(SideError::NoCount))?;
    if n == 0 && !text.is_empty() {
        return Err(LoadError::Tokenize(SideError::NoTokens(text.len())));
    }
    Ok(n)
}

/// The prompt tokens the server itself counts for `text` sent as a request
/// (`usage.prompt_tokens` of a one-token, non-streamed request): the truth
/// `/tokenize` is checked against, special tokens the server adds included.
pub async fn usage_prompt_tokens(
    client: &reqwest::Client,
    target: &Target,
    text: &str,
) -> Result<u64, LoadError> {
    let mut body = client::request_json(target, text, 1);
    body["stream"] = false.into();
    if let Some(o) = body.as_object_mut() {
        o.remove("stream_options");
    }
    let v = post_json(client, &target.url(), &body, Duration::from_secs(60))
        .await
        .map_err(LoadError::UsageCheck)?;
    v.pointer("/usage/prompt_tokens")
        .and_then(serde_json::Value::as_u64)
        .ok_or(LoadError::UsageCheck(SideError::NoUsage))
}
