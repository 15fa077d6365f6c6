//! Property tests of what a server's stream can throw at the client: the SSE
//! parser against a reference model on any bytes cut anywhere, and the chunk
//! reader on any payload. Run with `PROPTEST_CASES=N` for a longer search.

use proptest::prelude::*;

use super::client::{handle_event, When};
use super::sse::{SseError, SseParser, MAX_EVENT};
use crate::model::{RequestError, RequestRecord};

/// The SSE `data` rules, written the plain way over the whole input: the
/// events the incremental parser must find, wherever the bytes are cut.
fn reference(input: &[u8]) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut data: Option<Vec<u8>> = None;
    let mut lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    // The piece after the last newline is a line only at the end of the stream.
    let last = lines.pop().unwrap_or_default();
    let handle = |line: &[u8], data: &mut Option<Vec<u8>>, events: &mut Vec<Vec<u8>>| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if let Some(d) = data.take() {
                events.push(d);
            }
        } else if let Some(rest) = line.strip_prefix(b"data:") {
            let rest = rest.strip_prefix(b" ").unwrap_or(rest);
            match data {
                Some(d) => {
                    d.push(b'\n');
                    d.extend_from_slice(rest);
                }
                None => *data = Some(rest.to_vec()),
            }
        }
    };
    for line in lines {
        handle(line, &mut data, &mut events);
    }
    if !last.is_empty() {
        handle(last, &mut data, &mut events);
    }
    events.extend(data);
    events
}

fn parse_in_pieces(input: &[u8], cuts: &[usize]) -> Result<Vec<Vec<u8>>, SseError> {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    let mut at = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    cuts.sort_unstable();
    for cut in cuts.into_iter().chain([input.len()]) {
        p.push(&input[at..cut], &mut |d| out.push(d.to_vec()))?;
        at = cut;
    }
    p.finish(&mut |d| out.push(d.to_vec()));
    Ok(out)
}

/// Bytes that look like a stream often enough to reach every branch.
fn stream_bytes() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"data:".to_vec()),
        Just(b"data: ".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b": keep-alive".to_vec()),
        Just(b"event: error".to_vec()),
        Just(b"[DONE]".to_vec()),
        Just(br#"{"choices":[{"text":"x"}]}"#.to_vec()),
        prop::collection::vec(any::<u8>(), 0..12),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|p| p.concat())
}

/// A completions or chat chunk with `text`, as servers send them.
fn chunk_json(text: &str, chat: bool, finish: Option<&str>) -> String {
    let finish = finish.map_or("null".to_string(), |f| format!("{f:?}"));
    let text = serde_json::to_string(text).unwrap_or_default();
    if chat {
        format!(
            r#"{{"id":"c","choices":[{{"index":0,"delta":{{"content":{text}}},"finish_reason":{finish}}}]}}"#
        )
    } else {
        format!(r#"{{"id":"c","choices":[{{"index":0,"text":{text},"finish_reason":{finish}}}]}}"#)
    }
}

proptest! {
    #![proptest_config(crate::model::fuzz_config())]

    #[test]
    fn any_bytes_cut_anywhere_give_the_reference_events(
        input in stream_bytes(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let got = parse_in_pieces(&input, &cuts).unwrap();
        prop_assert_eq!(got, reference(&input));
    }

    #[test]
    fn a_generated_stream_yields_exactly_its_events(
        events in prop::collection::vec(
            prop::collection::vec("[^\r\n]{0,30}", 1..4), 0..8),
        crlf in any::<bool>(),
        noise in any::<bool>(),
        cuts in prop::collection::vec(any::<usize>(), 0..8),
    ) {
        let nl = if crlf { "\r\n" } else { "\n" };
        let mut s = String::new();
        for ev in &events {
            if noise {
                s.push_str(&format!(": ping{nl}event: message{nl}id: 7{nl}"));
            }
            for line in ev {
                s.push_str(&format!("data: {line}{nl}"));
            }
            s.push_str(nl);
        }
        let want: Vec<Vec<u8>> = events.iter().map(|e| e.join("\n").into_bytes()).collect();
        prop_assert_eq!(parse_in_pieces(s.as_bytes(), &cuts).unwrap(), want);
    }

    #[test]
    fn any_payload_is_a_chunk_or_a_precise_error(data in prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        "[ -~]{0,200}".prop_map(String::into_bytes),
        Just(br#"{"choices":"x"}"#.to_vec()),
        Just(br#"{"choices":[{"text":7}]}"#.to_vec()),
        Just(br#"{"error":{"message":"boom","code":400}}"#.to_vec()),
        Just(br#"{"usage":{"prompt_tokens":-1}}"#.to_vec()),
    ]) {
        let mut rec = RequestRecord::default();
        let (mut done, mut err) = (false, None);
        handle_event(&data, When::read(5), &mut rec, &mut done, &mut err);
        prop_assert!(done == (data == b"[DONE]"));
        match &err {
            // A chunk read: its text (if any) is counted once.
            None => prop_assert!(rec.chunks.len() <= 1),
            Some(RequestError::Malformed { message }) => {
                prop_assert!(message.starts_with("bad SSE data"));
                prop_assert!(message.len() < 600);
                prop_assert!(rec.chunks.is_empty());
            }
            Some(RequestError::InStream { .. }) => prop_assert!(rec.chunks.is_empty()),
            Some(other) => prop_assert!(false, "unexpected {other:?}"),
        }
    }

    #[test]
    fn generated_chunks_count_every_text_byte(
        texts in prop::collection::vec("\\PC{0,12}", 1..20),
        chat in any::<bool>(),
        usage in prop::option::of((0u64..100_000, 0u64..100_000)),
    ) {
        let mut rec = RequestRecord::default();
        let (mut done, mut err) = (false, None);
        for (i, t) in texts.iter().enumerate() {
            let finish = (i + 1 == texts.len()).then_some("length");
            let c = chunk_json(t, chat, finish);
            handle_event(c.as_bytes(), When::read(i as u64), &mut rec, &mut done, &mut err);
        }
        if let Some((p, c)) = usage {
            let u = format!(r#"{{"choices":[],"usage":{{"prompt_tokens":{p},"completion_tokens":{c}}}}}"#);
            handle_event(u.as_bytes(), When::read(99), &mut rec, &mut done, &mut err);
        }
        handle_event(b"[DONE]", When::read(100), &mut rec, &mut done, &mut err);
        prop_assert!(err.is_none() && done);
        let bytes: usize = texts.iter().map(String::len).sum();
        prop_assert_eq!(rec.chunks.iter().map(|c| c.1 as usize).sum::<usize>(), bytes);
        prop_assert_eq!(rec.chunks.len(), texts.iter().filter(|t| !t.is_empty()).count());
        prop_assert_eq!(rec.finish_reason.as_deref(), Some("length"));
        prop_assert_eq!(rec.prompt_tokens, usage.map(|u| u.0));
        prop_assert_eq!(rec.completion_tokens, usage.map(|u| u.1));
    }
}

#[test]
fn an_endless_line_or_event_is_an_error_not_memory() {
    let mut p = SseParser::new();
    let line = vec![b'x'; 1 << 20];
    let mut result = Ok(());
    for _ in 0..(MAX_EVENT >> 20) + 2 {
        result = p.push(&line, &mut |_| {});
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(SseError::TooLarge));
    let mut p = SseParser::new();
    let data = [b"data: ".as_slice(), &vec![b'y'; 1 << 20], b"\n"].concat();
    let mut result = Ok(());
    for _ in 0..(MAX_EVENT >> 20) + 2 {
        result = p.push(&data, &mut |_| panic!("no event without a blank line"));
        if result.is_err() {
            break;
        }
    }
    assert_eq!(result, Err(SseError::TooLarge));
}

/// What a chunk read says, to compare two readings.
type Reading = (
    Option<String>,
    usize,
    Option<String>,
    Option<(Option<u64>, Option<u64>)>,
    bool,
    bool,
);

fn reading(c: &super::chunk::Chunk) -> Reading {
    (
        c.id.as_deref().map(str::to_string),
        c.choices.text_len,
        c.choices.finish_reason.as_deref().map(str::to_string),
        c.usage
            .as_ref()
            .map(|u| (u.prompt_tokens, u.completion_tokens)),
        c.timings.is_some(),
        c.error.is_some(),
    )
}

/// JSON text (and near-JSON) of any shape, strings with every kind of escape.
fn json_value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("null".to_string()),
        Just("true".to_string()),
        Just("false".to_string()),
        "-?(0|[1-9][0-9]{0,20})(\\.[0-9]{0,2})?([eE][+-]?[0-9]{0,2})?",
        Just("012".to_string()),
        json_string(),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((field_name(), inner), 0..4).prop_map(object),
        ]
    })
}

/// A JSON object's text from its fields' (each key's text, quoted, and
/// its value's).
fn object<K: std::fmt::Display>(fields: impl IntoIterator<Item = (K, String)>) -> String {
    let fields: Vec<String> = fields
        .into_iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// A JSON string (or nearly: a bad escape, a raw tab) of any escapes.
fn json_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "[a-zé ]{0,4}",
            Just(r"\n".to_string()),
            Just(r#"\""#.to_string()),
            Just(r"\\".to_string()),
            Just(r"\u00e9".to_string()),
            Just(r"\u0041".to_string()),
            Just(r"\ud83d\ude00".to_string()),
            Just(r"\ud83d".to_string()),
            Just(r"\x".to_string()),
            Just("\t".to_string()),
            Just("😀".to_string()),
        ],
        0..4,
    )
    .prop_map(|parts| format!("\"{}\"", parts.concat()))
}

/// The names a chunk's reader looks for, and others.
fn field_name() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("id"),
        Just("choices"),
        Just("usage"),
        Just("timings"),
        Just("error"),
        Just("text"),
        Just("delta"),
        Just("content"),
        Just("reasoning_content"),
        Just("finish_reason"),
        Just("prompt_tokens"),
        Just("completion_tokens"),
        Just("index"),
        Just("model"),
        Just(r"i\u0064"),
    ]
    .prop_map(|k| format!("\"{k}\""))
}

/// A chunk as a server might send one: the fields the reader looks for,
/// each of the type it expects or of any other.
fn chunk_text() -> impl Strategy<Value = String> {
    let text = prop_oneof![
        4 => json_string(),
        1 => json_value(),
        1 => Just("null".to_string()),
    ];
    let delta = prop::collection::vec(
        (
            prop_oneof![
                Just("\"content\""),
                Just("\"reasoning_content\""),
                Just("\"role\"")
            ],
            text.clone(),
        ),
        0..3,
    )
    .prop_map(object);
    let choice = prop::collection::vec(
        prop_oneof![
            text.clone().prop_map(|t| format!("\"text\":{t}")),
            delta.prop_map(|d| format!("\"delta\": {d}")),
            prop_oneof![json_value(), Just("\"stop\"".to_string())]
                .prop_map(|f| format!("\"finish_reason\":{f}")),
            Just("\"index\":0".to_string()),
            Just("\"logprobs\":null".to_string()),
        ],
        0..4,
    )
    .prop_map(|f| format!("{{{}}}", f.join(",")));
    let usage = prop::collection::vec(
        (
            prop_oneof![
                Just("prompt_tokens"),
                Just("completion_tokens"),
                Just("total_tokens")
            ],
            prop_oneof![json_value(), (0u64..u64::MAX).prop_map(|n| n.to_string())],
        ),
        0..3,
    )
    .prop_map(|v| object(v.into_iter().map(|(k, v)| (format!("\"{k}\""), v))));
    prop::collection::vec(
        prop_oneof![
            1 => prop_oneof![json_value(), "\"[a-z-]{0,8}\""].prop_map(|v| format!("\"id\":{v}")),
            3 => prop::collection::vec(choice, 0..3)
                .prop_map(|c| format!("\"choices\":[{}]", c.join(","))),
            1 => json_value().prop_map(|v| format!("\"choices\":{v}")),
            1 => usage.prop_map(|u| format!("\"usage\":{u}")),
            1 => json_value().prop_map(|v| format!("\"usage\":{v}")),
            1 => (field_name(), json_value()).prop_map(|(k, v)| format!("{k} : {v}")),
        ],
        0..5,
    )
    .prop_map(|f| format!(" {{{}}}\n", f.join(",")))
}

proptest! {
    #![proptest_config(crate::model::fuzz_config())]

    /// The scanner reads a chunk exactly as serde does, or leaves it to serde.
    #[test]
    fn the_chunk_scanner_reads_as_serde_reads(
        text in chunk_text(),
        cut in prop::option::of((any::<usize>(), any::<u8>())),
    ) {
        let mut bytes = text.into_bytes();
        if let Some((at, b)) = cut {
            let at = at % (bytes.len() + 1);
            if b % 2 == 0 && at < bytes.len() {
                bytes.remove(at);
            } else {
                let noise = b"{}[],:\"\\0-e. \xc3\xa9\xff";
                bytes.insert(at, noise[b as usize % noise.len()]);
            }
        }
        let s = String::from_utf8_lossy(&bytes);
        if let Some(fast) = super::chunk::scan(&bytes) {
            let slow = serde_json::from_slice::<super::chunk::Chunk>(&bytes);
            prop_assert!(slow.is_ok(), "serde refused what the scanner read: {s} ({:?})", slow.err());
            prop_assert_eq!(reading(&fast), reading(&slow.unwrap()), "{}", s);
        }
    }
}
