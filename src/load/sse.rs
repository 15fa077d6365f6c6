//! Incremental Server-Sent Events parser: bytes in (split anywhere), `data:`
//! payloads out. Bounded: an event larger than `MAX_EVENT` is an error, not OOM.

pub const MAX_EVENT: usize = 8 << 20;

#[derive(Debug, Default)]
pub struct SseParser {
    /// The unfinished line of the last push (empty between whole lines).
    buf: Vec<u8>,
    /// Where to resume scanning `buf` for a line end (bytes before it hold none).
    scanned: usize,
    event: Event,
}

/// The event being read: its data so far, when it is not all in the bytes
/// at hand.
#[derive(Debug, Default)]
struct Event {
    data: Vec<u8>,
    has_data: bool,
}

#[derive(Debug, PartialEq, Eq)]
pub enum SseError {
    TooLarge,
}

impl SseParser {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed bytes; calls `on_data` with each complete event's data (lines joined by
    /// `\n`, as the SSE spec says). Lines are read where they lie: only an
    /// unfinished line, or an event that continues in a later push, is copied.
    pub fn push(&mut self, bytes: &[u8], on_data: &mut dyn FnMut(&[u8])) -> Result<(), SseError> {
        let SseParser {
            buf,
            scanned,
            event,
        } = self;
        if buf.is_empty() {
            let rest = event.scan(bytes, 0, on_data)?;
            buf.extend_from_slice(&bytes[rest..]);
        } else {
            buf.extend_from_slice(bytes);
            let rest = event.scan(buf, *scanned, on_data)?;
            buf.drain(..rest);
        }
        *scanned = buf.len();
        if buf.len() > MAX_EVENT {
            return Err(SseError::TooLarge);
        }
        Ok(())
    }

    /// At end of stream: a final event not followed by a blank line still counts.
    pub fn finish(&mut self, on_data: &mut dyn FnMut(&[u8])) {
        let event = &mut self.event;
        if !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            let line = line.strip_suffix(b"\r").unwrap_or(&line);
            if let Some(rest) = line.strip_prefix(b"data:") {
                let rest = rest.strip_prefix(b" ").unwrap_or(rest);
                if event.has_data {
                    event.data.push(b'\n');
                }
                event.data.extend_from_slice(rest);
                event.has_data = true;
            }
        }
        if event.has_data {
            on_data(&event.data);
        }
        event.data.clear();
        event.has_data = false;
        self.scanned = 0;
    }
}

impl Event {
    /// Read the whole lines of `src` (the first begins at 0; no line end
    /// before `from`), handing on each event a blank line ends; returns
    /// where the unfinished last line begins. An event all of whose data is
    /// one line of `src` is handed on from `src` itself.
    fn scan(
        &mut self,
        src: &[u8],
        from: usize,
        on_data: &mut dyn FnMut(&[u8]),
    ) -> Result<usize, SseError> {
        // The current event's only data line so far, in `src`.
        let mut here: Option<(usize, usize)> = None;
        let mut start = 0;
        let mut i = from;
        while let Some(off) = memchr::memchr(b'\n', &src[i..]) {
            let end = i + off;
            let stop = if end > start && src[end - 1] == b'\r' {
                end - 1
            } else {
                end
            };
            let line = &src[start..stop];
            if line.is_empty() {
                match here.take() {
                    Some((a, b)) => on_data(&src[a..b]),
                    None if self.has_data => on_data(&self.data),
                    None => {}
                }
                self.data.clear();
                self.has_data = false;
            } else if line.starts_with(b"data:") {
                let mut a = start + 5;
                if src.get(a) == Some(&b' ') && a < stop {
                    a += 1;
                }
                if !self.has_data {
                    if stop - a > MAX_EVENT {
                        return Err(SseError::TooLarge);
                    }
                    here = Some((a, stop));
                    self.has_data = true;
                } else {
                    if let Some((x, y)) = here.take() {
                        self.data.extend_from_slice(&src[x..y]);
                    }
                    self.data.push(b'\n');
                    self.data.extend_from_slice(&src[a..stop]);
                    if self.data.len() > MAX_EVENT {
                        return Err(SseError::TooLarge);
                    }
                }
            }
            // Other fields (event:, id:, retry:) and comments are ignored.
            start = end + 1;
            i = start;
        }
        // An event that goes on in the next push keeps its data.
        if let Some((a, b)) = here {
            self.data.extend_from_slice(&src[a..b]);
        }
        Ok(start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(chunks: &[&[u8]]) -> Vec<String> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            p.push(c, &mut |d| {
                out.push(String::from_utf8_lossy(d).into_owned())
            })
            .unwrap();
        }
        p.finish(&mut |d| out.push(String::from_utf8_lossy(d).into_owned()));
        out
    }

    #[test]
    fn parses_events_split_at_every_byte() {
        let stream = b"data: {\"a\":1}\n\n: comment\n\ndata: {\"b\":2}\r\n\r\nevent: x\ndata: l1\ndata: l2\n\ndata: [DONE]\n\n";
        let want = vec!["{\"a\":1}", "{\"b\":2}", "l1\nl2", "[DONE]"];
        assert_eq!(collect(&[stream]), want);
        for cut in 0..stream.len() {
            assert_eq!(
                collect(&[&stream[..cut], &stream[cut..]]),
                want,
                "cut at {cut}"
            );
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(collect(&bytes), want);
    }

    #[test]
    fn unterminated_last_event_counts() {
        assert_eq!(collect(&[b"data: x\n\ndata: y"]), vec!["x", "y"]);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut seed = 0x9e3779b97f4a7c15u64;
        let mut p = SseParser::new();
        for _ in 0..2000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 64) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|i| (seed >> (i % 8 * 8)) as u8 % 16 + b'\n' - 3)
                .collect();
            let _ = p.push(&bytes, &mut |_| {});
        }
        p.finish(&mut |_| {});
    }

    #[test]
    fn oversized_event_is_an_error() {
        let mut p = SseParser::new();
        let big = vec![b'a'; MAX_EVENT + 10];
        assert_eq!(p.push(&big, &mut |_| {}), Err(SseError::TooLarge));
    }
}
