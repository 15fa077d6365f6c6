//! Property tests of the classifiers on what servers and networks can send:
//! any line or body is classified without a panic and with bounded text; a
//! real fatal line is still found in colour, behind any prefix and among any
//! noise; an overflow body in any server's shape gives its numbers back.
//! Run with `PROPTEST_CASES=N` for a longer search.

use std::sync::Arc;

use proptest::prelude::*;

use super::fixtures::{HEALTHY_LOG, LINES};
use super::log::{LineClass, LogPatterns, LogWatch};
use super::{classify_http, classify_text, context_numbers, strip_ansi};
use crate::model::FailureKind;

/// Text at most this long (plus an ellipsis) is what the classifiers keep.
const BOUND: usize = super::text::MAX_KEPT_LINE + 8;

fn fatal_lines() -> Vec<(&'static str, FailureKind)> {
    LINES
        .iter()
        .filter_map(|(_, line, class)| match class {
            LineClass::Fatal(k) => Some((*line, *k)),
            _ => None,
        })
        .collect()
}

/// Noise a log holds: healthy lines of real shape, and arbitrary text.
fn noise() -> impl Strategy<Value = String> {
    let healthy: Vec<String> = HEALTHY_LOG.lines().map(str::to_string).collect();
    prop_oneof![prop::sample::select(healthy), "\\PC{0,80}", "[ -~]{0,80}",]
}

/// A prefix servers put before a message: timestamps, ranks, pids, then a
/// separator.
fn prefix() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[0-9:.\\-\\[\\] ]{0,30}[ \\]:]"]
}

proptest! {
    #![proptest_config(crate::model::fuzz_config())]

    #[test]
    fn any_line_is_classified_without_panic(line in prop_oneof![
        "\\PC{0,200}",
        prop::collection::vec(any::<u8>(), 0..300)
            .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        (prop::sample::select(LINES.iter().map(|l| l.1).collect::<Vec<_>>()), 0usize..200, "\\PC{0,8}")
            .prop_map(|(l, at, ins)| {
                let mut s = l.to_string();
                let at = (0..=at.min(s.len())).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
                s.insert_str(at, &ins);
                s
            }),
    ]) {
        let patterns = LogPatterns::builtin();
        let _ = patterns.classify(&line);
        let mut watch = LogWatch::new(Arc::new(patterns));
        watch.push(&line);
        if let Some(f) = watch.failure() {
            prop_assert!(f.message.len() <= BOUND);
            prop_assert!(f.evidence.iter().all(|e| e.len() <= BOUND));
        }
        let _ = classify_text(&line);
        let _ = context_numbers(&line);
    }

    #[test]
    fn a_fatal_line_is_found_in_colour_behind_any_prefix(
        // The shell's bare `Killed` is a whole line by definition.
        (line, kind) in prop::sample::select(
            fatal_lines().into_iter().filter(|l| l.0.trim() != "Killed").collect::<Vec<_>>()),
        pre in prefix(),
        colour in any::<bool>(),
    ) {
        let shown = if colour {
            format!("\u{1b}[31m{pre}\u{1b}[0m{line}\u{1b}[0m")
        } else {
            format!("{pre}{line}")
        };
        prop_assert_eq!(LogPatterns::builtin().classify(&shown), LineClass::Fatal(kind));
        let plain = format!("{pre}{}", strip_ansi(line));
        prop_assert_eq!(strip_ansi(&shown).into_owned(), plain);
    }

    #[test]
    fn the_first_fatal_line_among_noise_is_the_cause(
        before in prop::collection::vec(noise(), 0..30),
        (line, kind) in prop::sample::select(fatal_lines()),
        after in prop::collection::vec(prop_oneof![
            noise(),
            prop::sample::select(fatal_lines()).prop_map(|f| f.0.to_string()),
        ], 0..30),
    ) {
        let patterns = Arc::new(LogPatterns::builtin());
        // The noise alone is not a failure (else this case proves nothing).
        prop_assume!(before.iter().all(|l| !matches!(patterns.classify(l), LineClass::Fatal(_))));
        let mut watch = LogWatch::new(patterns);
        for l in before.iter().map(String::as_str).chain([line]).chain(after.iter().map(String::as_str)) {
            watch.push(l);
        }
        prop_assert_eq!(watch.first_fatal(), Some(kind));
        let f = watch.failure().unwrap();
        let cleaned = super::clean_line(line);
        prop_assert!(f.evidence.iter().any(|l| l.starts_with(&cleaned)), "{:?}", f.evidence);
    }

    #[test]
    fn any_http_body_gives_a_bounded_failure(
        status in 100u16..600,
        body in prop_oneof![
            "\\PC{0,400}",
            prop::collection::vec(any::<u8>(), 0..400)
                .prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
            "[a-z ]{0,20}".prop_map(|m| format!(r#"{{"error":{{"message":"{m}","code":400}}}}"#)),
            Just(r#"{"error":null}"#.to_string()),
            Just(r#"{"detail":[{"loc":["body"],"msg":"x"}]}"#.to_string()),
            Just("[1,2,3]".to_string()),
            Just(format!(r#"{{"error":{{"message":"{}"}}}}"#, "x".repeat(100_000))),
        ],
    ) {
        let f = classify_http(status, &body);
        let head = format!("HTTP {status}");
        prop_assert!(f.message.starts_with(&head));
        prop_assert!(f.message.chars().count() <= 1100, "{}", f.message.len());
        prop_assert!(f.evidence.iter().map(|e| e.chars().count()).sum::<usize>() <= 5000);
        prop_assert!(matches!(f.kind, FailureKind::HttpError | FailureKind::ContextOverflow));
    }

    #[test]
    fn an_overflow_in_any_servers_shape_gives_its_numbers(
        limit in 1u64..10_000_000,
        prompt in 1u64..10_000_000,
        output in 1u64..1_000_000,
        wording in 0usize..3,
        shape in 0usize..3,
    ) {
        let total = prompt + output;
        let message = match wording {
            0 => format!("This model's maximum context length is {limit} tokens. However, you requested {total} tokens ({prompt} in the messages, {output} in the completion). Please reduce the length of the messages or completion."),
            1 => format!("You passed {prompt} input tokens and requested {output} output tokens. However, the model's context length is only {limit} tokens, resulting in a maximum input length of 1 tokens. Please reduce the length of the input prompt."),
            _ => format!("'max_tokens' or 'max_completion_tokens' is too large: {output}. This model's maximum context length is {limit} tokens and your request has {prompt} input tokens ({output} > {limit} - {prompt}). None"),
        };
        let text = serde_json::to_string(&message).unwrap();
        let body = match shape {
            0 => format!(r#"{{"error":{{"message":{text},"type":"BadRequestError","param":null,"code":400}}}}"#),
            1 => format!(r#"{{"object":"error","message":{text},"type":"BadRequestError","param":null,"code":400}}"#),
            _ => format!(r#"{{"detail":{text}}}"#),
        };
        let f = classify_http(400, &body);
        prop_assert_eq!(f.kind, FailureKind::ContextOverflow, "{}", body);
        let n = f.context.unwrap_or_default();
        prop_assert_eq!(n.limit, Some(limit));
        prop_assert_eq!(n.prompt_tokens, Some(prompt));
        prop_assert_eq!(n.output_tokens, Some(output));
        if wording == 0 {
            prop_assert_eq!(n.total_tokens, Some(total));
        }
    }
}
