use serde_json::json;

use super::*;
use crate::detect::fixtures::BODIES;

#[test]
fn every_body_shape() {
    for case in BODIES {
        let f = classify_http(case.status, case.body);
        assert_eq!(f.kind, case.kind, "{}: {}", case.name, f.message);
        assert_eq!(f.source, FailureSource::Http, "{}", case.name);
        assert!(
            f.message.starts_with(case.message),
            "{}: message {:?} should start with {:?}",
            case.name,
            f.message,
            case.message
        );
        assert_eq!(f.evidence.len(), 1, "{}", case.name);
        if case.kind == FailureKind::ContextOverflow {
            let ctx = f.context.unwrap_or_default();
            let [limit, prompt, output, total] = case.numbers;
            assert_eq!(ctx.limit, limit, "{} limit", case.name);
            assert_eq!(ctx.prompt_tokens, prompt, "{} prompt", case.name);
            assert_eq!(ctx.output_tokens, output, "{} output", case.name);
            assert_eq!(ctx.total_tokens, total, "{} total", case.name);
            assert_eq!(
                ctx.summary(Some(case.status)),
                case.summary,
                "{}",
                case.name
            );
        } else {
            assert_eq!(f.context, None, "{}", case.name);
        }
    }
}

#[test]
fn non_json_body_is_truncated_to_300_chars() {
    let body = "e".repeat(1000);
    let f = classify_http(500, &body);
    assert_eq!(f.kind, FailureKind::HttpError);
    assert_eq!(f.message, format!("HTTP 500: {}…", "e".repeat(300)));
}

#[test]
fn overflow_words_beyond_the_quoted_part_still_count() {
    let body = format!(
        "{} This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens.",
        "x".repeat(400)
    );
    let f = classify_http(400, &body);
    assert_eq!(f.kind, FailureKind::ContextOverflow);
    assert_eq!(
        f.context.map(|c| c.summary(Some(400))).as_deref(),
        Some("ctx 400: 5,000 > 4,096")
    );
}

#[test]
fn odd_json_shapes_do_not_break() {
    for body in [
        "null",
        "[]",
        "42",
        "\"just a string\"",
        r#"{"error":null}"#,
        r#"{"error":{"message":null,"code":"x"}}"#,
        r#"{"error":{"message":{"nested":true}}}"#,
        r#"{"error":["a","b"]}"#,
        r#"{"message":12}"#,
        r#"{"detail":[{"loc":["body"],"msg":"field required"}]}"#,
        "{not json",
    ] {
        let f = classify_http(400, body);
        assert_eq!(f.kind, FailureKind::HttpError, "{body}");
        assert!(f.message.starts_with("HTTP 400"), "{body}");
    }
    assert_eq!(
        classify_http(400, "\"just a string\"").message,
        "HTTP 400: just a string"
    );
    assert!(
        classify_http(422, r#"{"detail":[{"msg":"field required"}]}"#)
            .message
            .contains("field required")
    );
}

#[test]
fn numbers_with_separators_and_overflowing_values() {
    let n = context_numbers("This model's maximum context length is 32,768 tokens. However, your request has 99999999999999999999999 input tokens.");
    assert_eq!(n.limit, Some(32768));
    assert_eq!(n.prompt_tokens, None);
}

#[test]
fn stream_errors() {
    let v = json!({"error": {"message": "The input (33012 tokens) is longer than the model's context length (32768 tokens).", "type": "BadRequestError", "code": 400}});
    let f = classify_stream_error(&v);
    assert_eq!(f.kind, FailureKind::ContextOverflow);
    assert_eq!(f.source, FailureSource::Http);
    assert!(f.message.starts_with("stream error 400: The input"));
    assert_eq!(
        f.context.map(|c| c.summary(Some(400))).as_deref(),
        Some("ctx 400: 33,012 > 32,768")
    );

    let v = json!({"error": {"message": "EngineCore encountered an issue. See stack trace (above) for the root cause.", "type": "InternalServerError", "code": 500}});
    let f = classify_stream_error(&v);
    assert_eq!(f.kind, FailureKind::HttpError);
    assert_eq!(
        f.message,
        "stream error 500: EngineCore encountered an issue. See stack trace (above) for the root cause."
    );

    // The inner object passed directly, and a string error.
    let f = classify_stream_error(&json!({"message": "boom", "code": 503}));
    assert_eq!(f.message, "stream error 503: boom");
    let f = classify_stream_error(&json!({"error": "boom"}));
    assert_eq!(f.message, "stream error: boom");
    let f = classify_stream_error(&json!({"error": {"code": "context_length_exceeded"}}));
    assert_eq!(f.kind, FailureKind::ContextOverflow);
    let f = classify_stream_error(&json!(null));
    assert_eq!(f.kind, FailureKind::HttpError);
    assert_eq!(f.message, "stream error: null");
}

#[test]
fn body_status_reads_codes() {
    assert_eq!(body_status(&json!({"error": {"code": 400}})), Some(400));
    assert_eq!(body_status(&json!({"code": 422})), Some(422));
    assert_eq!(
        body_status(&json!({"error": {"code": "context_length_exceeded"}})),
        Some(400)
    );
    assert_eq!(body_status(&json!({"error": {"code": "503"}})), Some(503));
    assert_eq!(body_status(&json!({"code": 99999})), None);
    assert_eq!(body_status(&json!({"code": -1})), None);
    assert_eq!(body_status(&json!([1])), None);
}
