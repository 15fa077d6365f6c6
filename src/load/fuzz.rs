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
