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
async fn post_json<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    url: &str,
    body: &impl serde::Serialize,
    timeout: Duration,
) -> Result<T, SideError> {
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
    // Borrowed, not copied into a document: a text is up to a context's
    // worth of prompt.
    #[derive(serde::Serialize)]
    struct Message<'a> {
        role: &'a str,
        content: &'a str,
    }
    #[derive(serde::Serialize)]
    #[serde(untagged)]
    enum Body<'a> {
        Content {
            content: &'a str,
        },
        Prompt {
            model: &'a str,
            prompt: &'a str,
        },
        Chat {
            model: &'a str,
            messages: [Message<'a>; 1],
        },
    }
    let model = target.model.as_str();
    let body = match (field, target.api) {
        (TokenizeField::Content, _) => Body::Content { content: text },
        (TokenizeField::Request, crate::plan::Api::Completions) => Body::Prompt {
            model,
            prompt: text,
        },
        (TokenizeField::Request, crate::plan::Api::Chat) => Body::Chat {
            model,
            messages: [Message {
                role: "user",
                content: text,
            }],
        },
    };
    // Short: a wedged server must not hold the sweep here (the stall and
    // exit watches only run while requests are in flight).
    let url = format!("{}/tokenize", target.base);
    let reply: TokenizeReply = post_json(client, &url, &body, Duration::from_secs(10))
        .await
        .map_err(LoadError::Tokenize)?;
    let n = reply
        .count
        .number
        .or(reply.tokens.len)
        .ok_or(LoadError::Tokenize(SideError::NoCount))?;
    if n == 0 && !text.is_empty() {
        return Err(LoadError::Tokenize(SideError::NoTokens(text.len())));
    }
    Ok(n)
}

/// What `/tokenize` answers, read for its count alone: `count`, else the
/// length of `tokens` (whose ids are skipped, not kept).
/// (An object only: a list is no answer.)
#[derive(Default)]
struct TokenizeReply {
    count: Counted,
    tokens: Counted,
}

impl<'de> serde::Deserialize<'de> for TokenizeReply {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TokenizeReply;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TokenizeReply, A::Error> {
                let mut reply = TokenizeReply::default();
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match key.as_ref() {
                        "count" => reply.count = map.next_value()?,
                        "tokens" => reply.tokens = map.next_value()?,
                        _ => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(reply)
            }
        }
        d.deserialize_map(V)
    }
}

/// A field read for a count: a whole number as it is, an array by its
/// length; anything else skipped.
#[derive(Default)]
struct Counted {
    number: Option<u64>,
    len: Option<u64>,
}

impl<'de> serde::Deserialize<'de> for Counted {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Counted;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a count or a list of tokens")
            }
            fn visit_u64<E>(self, n: u64) -> Result<Counted, E> {
                Ok(Counted {
                    number: Some(n),
                    len: None,
                })
            }
            fn visit_i64<E>(self, n: i64) -> Result<Counted, E> {
                Ok(Counted {
                    number: u64::try_from(n).ok(),
                    len: None,
                })
            }
            fn visit_f64<E>(self, _: f64) -> Result<Counted, E> {
                Ok(Counted::default())
            }
            fn visit_str<E>(self, _: &str) -> Result<Counted, E> {
                Ok(Counted::default())
            }
            fn visit_bool<E>(self, _: bool) -> Result<Counted, E> {
                Ok(Counted::default())
            }
            fn visit_unit<E>(self) -> Result<Counted, E> {
                Ok(Counted::default())
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Counted, A::Error> {
                let mut n = 0u64;
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Counted {
                    number: None,
                    len: Some(n),
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Counted, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Counted::default())
            }
        }
        d.deserialize_any(V)
    }
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
    let v: serde_json::Value = post_json(client, &target.url(), &body, Duration::from_secs(60))
        .await
        .map_err(LoadError::UsageCheck)?;
    v.pointer("/usage/prompt_tokens")
        .and_then(serde_json::Value::as_u64)
        .ok_or(LoadError::UsageCheck(SideError::NoUsage))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count_of(json: &str) -> Option<u64> {
        let r: TokenizeReply = serde_json::from_str(json).ok()?;
        r.count.number.or(r.tokens.len)
    }

    #[test]
    fn a_tokenize_answer_is_read_for_its_count_alone() {
        // vLLM (count and ids), SGLang (ids), llama.cpp (ids, or pieces).
        assert_eq!(
            count_of(r#"{"count":3,"max_model_len":32768,"tokens":[1,2,3]}"#),
            Some(3)
        );
        assert_eq!(count_of(r#"{"tokens":[9,8,7,6]}"#), Some(4));
        assert_eq!(
            count_of(r#"{"tokens":[{"id":1,"piece":"a"},{"id":2,"piece":[98]}]}"#),
            Some(2)
        );
        // A count that is not a whole number leaves the list to count.
        assert_eq!(count_of(r#"{"count":-1,"tokens":[1]}"#), Some(1));
        assert_eq!(count_of(r#"{"count":"3","tokens":[1,2]}"#), Some(2));
        assert_eq!(count_of(r#"{"count":null}"#), None);
        assert_eq!(count_of(r#"{"detail":"not found"}"#), None);
        assert_eq!(count_of(r#"[1,2]"#), None);
    }
}
