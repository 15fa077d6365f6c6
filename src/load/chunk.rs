//! What one streamed chunk says: its id, the length of its text, its finish
//! reason, usage and the server's own timings. Read by a scanner that walks
//! the JSON once and borrows what it keeps; whatever it is not sure of (an
//! escape in a key, `error`, `timings`, a value of an unexpected type) it
//! leaves to serde, so every chunk reads exactly as serde reads it, errors
//! included, and the common one costs no more than one pass over its bytes.

use std::borrow::Cow;

use serde::Deserialize;

use crate::model::ServerTiming;

/// Read one event's data as a chunk.
pub(super) fn parse(data: &[u8]) -> Result<Chunk<'_>, serde_json::Error> {
    match scan(data) {
        Some(chunk) => Ok(chunk),
        None => serde_json::from_slice(data),
    }
}

// Borrowed where the JSON has no escapes, and the choices summed as they
// are read: no allocation per streamed chunk.
#[derive(Deserialize, Default)]
pub(super) struct Chunk<'a> {
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub choices: Choices<'a>,
    #[serde(default)]
    pub usage: Option<Usage>,
    #[serde(default)]
    pub timings: Option<Timings>,
    #[serde(default, borrow)]
    pub error: Option<&'a serde_json::value::RawValue>,
}

/// llama.cpp's own timing of the request (its last chunk). Read as any
/// JSON value, so a figure of the wrong type is a missing one, not a
/// malformed stream.
#[derive(Deserialize)]
pub(super) struct Timings {
    #[serde(default)]
    prompt_n: serde_json::Value,
    #[serde(default)]
    cache_n: serde_json::Value,
    #[serde(default)]
    prompt_ms: serde_json::Value,
    #[serde(default)]
    predicted_n: serde_json::Value,
    #[serde(default)]
    predicted_ms: serde_json::Value,
}

impl Timings {
    /// The figures that can be true: counts that are whole and not
    /// negative, times that are finite and not negative.
    pub fn trusted(&self) -> ServerTiming {
        let count = |v: &serde_json::Value| v.as_u64();
        let ms = |v: &serde_json::Value| v.as_f64().filter(|x| x.is_finite() && *x >= 0.0);
        ServerTiming {
            prompt_n: count(&self.prompt_n),
            cache_n: count(&self.cache_n),
            prompt_ms: ms(&self.prompt_ms),
            predicted_n: count(&self.predicted_n),
            predicted_ms: ms(&self.predicted_ms),
        }
    }
}

/// What a chunk's choices carry: their text's length and the last finish
/// reason, summed while the list is read (no list is built).
#[derive(Default)]
pub(super) struct Choices<'a> {
    pub text_len: usize,
    pub finish_reason: Option<Cow<'a, str>>,
}

impl<'de: 'a, 'a> Deserialize<'de> for Choices<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Sum<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Sum<'a> {
            type Value = Choices<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of choices")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Choices<'a>, A::Error> {
                let mut sum = Choices::default();
                while let Some(c) = seq.next_element::<Choice<'a>>()? {
                    if let Some(t) = &c.text {
                        sum.text_len += t.len();
                    }
                    if let Some(d) = &c.delta {
                        sum.text_len += d.content.as_deref().map_or(0, str::len);
                        sum.text_len += d.reasoning_content.as_deref().map_or(0, str::len);
                    }
                    if c.finish_reason.is_some() {
                        sum.finish_reason = c.finish_reason;
                    }
                }
                Ok(sum)
            }
        }
        d.deserialize_seq(Sum(std::marker::PhantomData))
    }
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
pub(super) struct Usage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
}

/// The chunk, where every byte of `b` is one the scanner is sure of.
pub(super) fn scan(b: &[u8]) -> Option<Chunk<'_>> {
    let mut p = Scan { b, i: 0 };
    let mut chunk = Chunk::default();
    // `timings` (llama.cpp's last chunk) and `error` (a server's) are rare:
    // serde's.
    p.fields(
        &[b"id", b"choices", b"usage", b"timings", b"error"],
        1,
        &mut |p, field| {
            match field {
                0 => chunk.id = p.opt_plain()?.map(Cow::Borrowed),
                1 => chunk.choices = p.choices()?,
                2 => chunk.usage = p.usage()?,
                _ => return None,
            }
            Some(())
        },
    )?;
    p.ws();
    (p.i == p.b.len()).then_some(chunk)
}

/// An escape (the bytes after its backslash): how many bytes it stands
/// for and how many it takes; a surrogate (half of a pair) is serde's.
fn unescape(b: &[u8]) -> Option<(usize, usize)> {
    match *b.first()? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some((1, 1)),
        b'u' => {
            let mut cp = 0u32;
            for &h in b.get(1..5)? {
                cp = cp * 16 + char::from(h).to_digit(16)?;
            }
            Some((char::from_u32(cp)?.len_utf8(), 5))
        }
        _ => None,
    }
}

/// Deeper than this is serde's (whose own limit is 128).
const MOST_DEPTH: u32 = 64;

/// The bytes that end a run of plain ASCII in a string: the quote, the
/// backslash, control characters (which JSON forbids there) and the first
/// byte of any other character.
static STOP: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i < 0x20 || i >= 0x80 || i == b'"' as usize || i == b'\\' as usize;
        i += 1;
    }
    t
};

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// An object, each key (without escapes) handed to `field`, which reads
    /// its value.
    fn object(&mut self, field: &mut dyn FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let key = self.plain()?;
            self.eat(b':')?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An object read as serde reads a struct with the fields `names`: each
    /// of them (by its place in `names`) handed to `read`, which reads its
    /// value; any other field skipped (at `depth`); a field twice is
    /// serde's (which refuses it).
    fn fields(
        &mut self,
        names: &[&[u8]],
        depth: u32,
        read: &mut dyn FnMut(&mut Self, usize) -> Option<()>,
    ) -> Option<()> {
        let mut seen = 0u32;
        self.object(&mut |p, key| match names.iter().position(|n| *n == key) {
            Some(i) if seen & (1 << i) != 0 => None,
            Some(i) => {
                seen |= 1 << i;
                read(p, i)
            }
            None => p.skip(depth),
        })
    }

    /// An array, each element read by `item`.
    fn array(&mut self, item: &mut dyn FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.eat(b'[')?;
        if self.eat(b']').is_some() {
            return Some(());
        }
        loop {
            item(self)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn null(&mut self) -> bool {
        if self.peek() == Some(b'n') && self.b[self.i..].starts_with(b"null") {
            self.i += 4;
            true
        } else {
            false
        }
    }

    /// A string without escapes, borrowed (UTF-8).
    fn plain(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        self.text_len_from(start, false)?;
        Some(&self.b[start..self.i - 1])
    }

    /// `null` or a string without escapes.
    fn opt_plain(&mut self) -> Option<Option<&'a str>> {
        if self.null() {
            return Some(None);
        }
        std::str::from_utf8(self.plain()?).ok().map(Some)
    }

    /// A string's length once its escapes are read.
    fn text_len(&mut self) -> Option<usize> {
        self.eat(b'"')?;
        self.text_len_from(self.i, true)
    }

    /// The rest of a string from `i` (past its opening quote): its length
    /// once unescaped, escapes read where `escapes` (a surrogate escape is
    /// serde's), characters checked as UTF-8; leaves `self.i` past its
    /// closing quote.
    fn text_len_from(&mut self, mut i: usize, escapes: bool) -> Option<usize> {
        let b = self.b;
        let mut len = 0;
        loop {
            let run = i;
            while i < b.len() && !STOP[b[i] as usize] {
                i += 1;
            }
            len += i - run;
            match *b.get(i)? {
                b'"' => {
                    self.i = i + 1;
                    return Some(len);
                }
                b'\\' if escapes => {
                    let (width, took) = unescape(b.get(i + 1..)?)?;
                    len += width;
                    i += 1 + took;
                }
                0x80.. => {
                    let width = match b[i] {
                        0xC2..=0xDF => 2,
                        0xE0..=0xEF => 3,
                        0xF0..=0xF4 => 4,
                        _ => return None,
                    };
                    std::str::from_utf8(b.get(i..i + width)?).ok()?;
                    len += width;
                    i += width;
                }
                _ => return None,
            }
        }
    }

    /// `null` or a string: its length once unescaped (0 for null).
    fn opt_text_len(&mut self) -> Option<usize> {
        if self.null() {
            return Some(0);
        }
        self.text_len()
    }

    /// `null` or a count a u64 holds.
    fn opt_count(&mut self) -> Option<Option<u64>> {
        if self.null() {
            return Some(None);
        }
        let start = self.i;
        let digits = self.b[start..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let end = start + digits;
        if digits == 0
            || (digits > 1 && self.b[start] == b'0')
            || matches!(self.b.get(end), Some(b'.' | b'e' | b'E'))
        {
            return None;
        }
        self.i = end;
        let mut n = 0u64;
        for &d in &self.b[start..end] {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        Some(Some(n))
    }

    fn choices(&mut self) -> Option<Choices<'a>> {
        let mut sum = Choices::default();
        self.array(&mut |p| {
            p.fields(
                &[b"text", b"finish_reason", b"delta"],
                2,
                &mut |p, field| {
                    match field {
                        0 => sum.text_len += p.opt_text_len()?,
                        1 => {
                            if let Some(f) = p.opt_plain()? {
                                sum.finish_reason = Some(Cow::Borrowed(f));
                            }
                        }
                        _ => sum.text_len += p.delta()?,
                    }
                    Some(())
                },
            )
        })?;
        Some(sum)
    }

    /// `null` or a choice's delta: the length of its text.
    fn delta(&mut self) -> Option<usize> {
        let mut len = 0;
        if !self.null() {
            self.fields(&[b"content", b"reasoning_content"], 3, &mut |p, _| {
                len += p.opt_text_len()?;
                Some(())
            })?;
        }
        Some(len)
    }

    fn usage(&mut self) -> Option<Option<Usage>> {
        if self.null() {
            return Some(None);
        }
        let mut u = Usage {
            prompt_tokens: None,
            completion_tokens: None,
        };
        self.fields(
            &[b"prompt_tokens", b"completion_tokens"],
            2,
            &mut |p, field| {
                let n = p.opt_count()?;
                match field {
                    0 => u.prompt_tokens = n,
                    _ => u.completion_tokens = n,
                }
                Some(())
            },
        )?;
        Some(Some(u))
    }

    /// Any value, checked as serde checks what it ignores.
    fn skip(&mut self, depth: u32) -> Option<()> {
        if depth > MOST_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.text_len().map(drop),
            b'{' => self.object(&mut |p, _| p.skip(depth + 1)),
            b'[' => self.array(&mut |p| p.skip(depth + 1)),
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn word(&mut self, w: &[u8]) -> Option<()> {
        self.b[self.i..].starts_with(w).then(|| self.i += w.len())
    }

    /// A number as JSON writes one.
    fn number(&mut self) -> Option<()> {
        let b = self.b;
        let digits = |mut i: usize| {
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            i
        };
        let mut i = self.i;
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        i = match b.get(i)? {
            b'0' => i + 1,
            b'1'..=b'9' => digits(i + 1),
            _ => return None,
        };
        if b.get(i) == Some(&b'.') {
            let end = digits(i + 1);
            if end == i + 1 {
                return None;
            }
            i = end;
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            let end = digits(i);
            if end == i {
                return None;
            }
            i = end;
        }
        if b.get(i).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        self.i = i;
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks as the real servers sent them (captured from vLLM 0.32.0 on
    /// CPU and llama.cpp's `llama-server` b1-0c1e570, the tiny models of
    /// the test harness), and the simulated server's.
    const REAL: &[&str] = &[
        r#"{"id":"chatcmpl-bfff438cd0d9924b","object":"chat.completion.chunk","created":1796629036,"model":"tiny","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}"#,
        r#"{"id":"chatcmpl-bfff438cd0d9924b","object":"chat.completion.chunk","created":1796629036,"model":"tiny","choices":[{"index":0,"delta":{"content":" app"},"logprobs":null,"finish_reason":null,"token_ids":null}]}"#,
        r#"{"id":"chatcmpl-bfff438cd0d9924b","object":"chat.completion.chunk","created":1796629036,"model":"tiny","choices":[{"index":0,"delta":{"content":"compare"},"logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":null}]}"#,
        r#"{"id":"chatcmpl-bfff438cd0d9924b","object":"chat.completion.chunk","created":1796629036,"model":"tiny","choices":[],"usage":{"prompt_tokens":8,"total_tokens":11,"completion_tokens":3},"system_fingerprint":"vllm-0.32.0-3ffeaf69"}"#,
        r#"{"id":"cmpl-9e3190fafef33621","object":"text_completion","created":1796629036,"model":"tiny","choices":[{"index":0,"text":"ration","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1796628973,"id":"chatcmpl-LakAujl988ID7CT6a7xq50OaeGftPzdq","model":"/tmp/llamacpp/tiny.gguf","system_fingerprint":"b1-0c1e570","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" name"}}],"created":1796628973,"id":"chatcmpl-LakAujl988ID7CT6a7xq50OaeGftPzdq","model":"/tmp/llamacpp/tiny.gguf","system_fingerprint":"b1-0c1e570","object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"text":" they","index":0,"logprobs":null,"finish_reason":null}],"created":1796628974,"model":"/tmp/llamacpp/tiny.gguf","system_fingerprint":"b1-0c1e570","object":"text_completion","id":"chatcmpl-qffvIdJylIXkPovKKeBPdMjzpWvH5sw4"}"#,
        r#"{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"x"},"logprobs":null,"finish_reason":null}]}"#,
    ];

    fn same(a: &Chunk, b: &Chunk) -> bool {
        a.id == b.id
            && a.choices.text_len == b.choices.text_len
            && a.choices.finish_reason == b.choices.finish_reason
            && a.usage
                .as_ref()
                .map(|u| (u.prompt_tokens, u.completion_tokens))
                == b.usage
                    .as_ref()
                    .map(|u| (u.prompt_tokens, u.completion_tokens))
    }

    #[test]
    fn real_servers_chunks_are_read_in_one_pass_as_serde_reads_them() {
        for c in REAL {
            let fast = scan(c.as_bytes()).unwrap_or_else(|| panic!("left to serde: {c}"));
            let slow: Chunk = serde_json::from_str(c).unwrap();
            assert!(same(&fast, &slow), "{c}");
        }
        let usage = scan(REAL[3].as_bytes()).unwrap().usage.unwrap();
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (Some(8), Some(3))
        );
        let last = scan(REAL[2].as_bytes()).unwrap();
        assert_eq!(
            (last.choices.text_len, last.choices.finish_reason.as_deref()),
            (7, Some("length"))
        );
    }

    #[test]
    fn escapes_count_as_the_bytes_they_stand_for() {
        let c = scan(br#"{"choices":[{"delta":{"content":"a\n\"\u00e9\u4e2d"}}]}"#).unwrap();
        assert_eq!(c.choices.text_len, "a\n\"é中".len());
        // A surrogate pair, a field whose name has an escape, timings and
        // errors are serde's; what it makes of them is what the reader says.
        for c in [
            r#"{"choices":[{"text":"\ud83d\ude00"}]}"#,
            r#"{"i\u0064":"x","choices":[]}"#,
            r#"{"choices":[],"timings":{"prompt_n":3}}"#,
            r#"{"error":{"message":"boom"}}"#,
        ] {
            assert!(scan(c.as_bytes()).is_none(), "{c}");
            assert!(parse(c.as_bytes()).is_ok(), "{c}");
        }
        assert_eq!(
            parse(br#"{"choices":[{"text":"\ud83d\ude00"}]}"#)
                .unwrap()
                .choices
                .text_len,
            4
        );
    }

    #[test]
    fn what_serde_refuses_the_scanner_does_not_read() {
        for c in [
            r#"{"id":"a","id":"b"}"#,
            r#"{"choices":[{"text":"a","text":"b"}]}"#,
            r#"{"choices":null}"#,
            r#"{"usage":{"prompt_tokens":-1}}"#,
            r#"{"usage":{"prompt_tokens":1.0}}"#,
            r#"{"usage":{"prompt_tokens":18446744073709551616}}"#,
            r#"{"model":01}"#,
            "{\"choices\":[{\"text\":\"a\tb\"}]}",
            r#"{"choices":[]} x"#,
            r#"{"choices":[],}"#,
        ] {
            assert!(scan(c.as_bytes()).is_none(), "{c}");
            assert!(parse(c.as_bytes()).is_err(), "{c}");
        }
    }
}
