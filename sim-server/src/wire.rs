//! JSON bodies on the wire, as structs so that fields keep the real servers' order
//! (`{"object":"error","message":...}`, `{"id":...,"object":...,"choices":...}`).

use serde::Serialize;

use crate::args::Flavor;

#[derive(Serialize)]
struct ErrorFields<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    object: Option<&'static str>,
    message: &'a str,
    #[serde(rename = "type")]
    kind: &'a str,
    param: Option<&'a str>,
    code: u16,
}

#[derive(Serialize)]
struct Nested<'a> {
    error: ErrorFields<'a>,
}

/// An error body in the flavor's shape: SGLang's flat
/// `{"object":"error","message",...}`, vLLM's `{"error":{"message",...}}`.
pub fn error_body(flavor: Flavor, code: u16, kind: &str, message: &str) -> String {
    let result = match flavor {
        Flavor::Sglang => serde_json::to_string(&ErrorFields {
            object: Some("error"),
            message,
            kind,
            param: None,
            code,
        }),
        Flavor::Vllm => serde_json::to_string(&Nested {
            error: ErrorFields {
                object: None,
                message,
                kind,
                param: None,
                code,
            },
        }),
    };
    result.unwrap_or_default()
}

/// vLLM's in-stream error event payload: `{"error":{"object":"error",...}}`.
pub fn stream_error(message: &str) -> String {
    serde_json::to_string(&Nested {
        error: ErrorFields {
            object: Some("error"),
            message,
            kind: "BadRequestError",
            param: None,
            code: 400,
        },
    })
    .unwrap_or_default()
}

#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub total_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn new(prompt_tokens: u64, completion_tokens: u64) -> Usage {
        Usage {
            prompt_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            completion_tokens,
        }
    }
}

/// A completions choice (streamed or whole).
#[derive(Serialize)]
pub struct TextChoice<'a> {
    pub index: u32,
    pub text: &'a str,
    pub logprobs: Option<()>,
    pub finish_reason: Option<&'a str>,
    pub stop_reason: Option<()>,
}

#[derive(Serialize)]
pub struct Delta<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'a str>,
    pub content: &'a str,
}

/// A streamed chat choice.
#[derive(Serialize)]
pub struct DeltaChoice<'a> {
    pub index: u32,
    pub delta: Delta<'a>,
    pub logprobs: Option<()>,
    pub finish_reason: Option<&'a str>,
}

#[derive(Serialize)]
pub struct Message<'a> {
    pub role: &'a str,
    pub content: &'a str,
    pub tool_calls: Vec<()>,
}

/// A whole chat choice.
#[derive(Serialize)]
pub struct MessageChoice<'a> {
    pub index: u32,
    pub message: Message<'a>,
    pub logprobs: Option<()>,
    pub finish_reason: Option<&'a str>,
    pub stop_reason: Option<()>,
}

/// A response object or stream chunk: id, object, created, model, choices, usage.
#[derive(Serialize)]
pub struct Envelope<'a, C: Serialize> {
    pub id: &'a str,
    pub object: &'a str,
    pub created: u64,
    pub model: &'a str,
    pub choices: Vec<C>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

impl<C: Serialize> Envelope<'_, C> {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_keep_the_real_field_order() {
        assert_eq!(
            error_body(Flavor::Sglang, 400, "BadRequestError", "m"),
            r#"{"object":"error","message":"m","type":"BadRequestError","param":null,"code":400}"#
        );
        assert_eq!(
            error_body(Flavor::Vllm, 404, "NotFoundError", "m"),
            r#"{"error":{"message":"m","type":"NotFoundError","param":null,"code":404}}"#
        );
        assert_eq!(
            stream_error("x"),
            r#"{"error":{"object":"error","message":"x","type":"BadRequestError","param":null,"code":400}}"#
        );
    }

    #[test]
    fn chunk_shape() {
        let e = Envelope {
            id: "c",
            object: "chat.completion.chunk",
            created: 1,
            model: "m",
            choices: vec![DeltaChoice {
                index: 0,
                delta: Delta {
                    role: Some("assistant"),
                    content: "",
                },
                logprobs: None,
                finish_reason: None,
            }],
            usage: None,
        };
        assert_eq!(
            e.to_json(),
            r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#
        );
    }
}
