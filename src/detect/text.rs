//! Small text helpers shared by the classifiers: cleaning a raw log line and
//! bounding the size of what we keep.

pub use crate::model::text::strip_ansi;

/// Longest line (in bytes) kept in evidence, tails and messages. Servers can
/// print megabyte lines (a dumped tensor, a giant prompt); we keep enough to
/// read the cause, not the whole thing.
pub const MAX_KEPT_LINE: usize = 4096;

/// The line as a person should read it: escapes stripped, carriage-return
/// progress redraws reduced to the last one, whitespace trimmed, and capped at
/// [`MAX_KEPT_LINE`] bytes.
pub fn clean_line(line: &str) -> String {
    let mut out = String::new();
    clean_stripped_into(&mut out, &strip_ansi(line));
    out
}

/// [`clean_line`] for a line already stripped of escapes, into a reused
/// buffer, so a watcher that keeps a ring of recent lines does not allocate
/// per line.
pub fn clean_stripped_into(out: &mut String, stripped: &str) {
    out.clear();
    let mut s: &str = stripped;
    // tqdm-style redraws: "\r 10%\r 20%" shows as the last segment.
    s = s.trim_end();
    if let Some(pos) = s.rfind('\r') {
        s = &s[pos + 1..];
    }
    let s = s.trim();
    if s.len() <= MAX_KEPT_LINE {
        out.push_str(s);
    } else {
        out.push_str(&truncate_bytes(s, MAX_KEPT_LINE));
    }
}

/// At most `max` bytes, cut at a char boundary, with `…` when cut.
pub fn truncate_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = s[..end].to_string();
    out.push('…');
    out
}

/// At most `max` chars, with `…` when cut.
pub fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((idx, _)) => {
            let mut out = s[..idx].to_string();
            out.push('…');
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn strips_colour_and_osc() {
        assert_eq!(
            strip_ansi("\u{1b}[31mERROR\u{1b}[0m boom"),
            Cow::<str>::Owned("ERROR boom".into())
        );
        assert_eq!(strip_ansi("\u{1b}[1;32;40mx\u{1b}[K"), "x");
        assert_eq!(strip_ansi("\u{1b}]0;title\u{7}after"), "after");
        assert_eq!(strip_ansi("\u{1b}]8;;http://x\u{1b}\\link"), "link");
        assert_eq!(strip_ansi("trailing\u{1b}"), "trailing");
        assert_eq!(strip_ansi("unterminated\u{1b}[31"), "unterminated");
        assert!(matches!(strip_ansi("plain"), Cow::Borrowed("plain")));
    }

    #[test]
    fn clean_line_trims_and_bounds() {
        assert_eq!(clean_line("  \u{1b}[33mWARN\u{1b}[0m x \r\n"), "WARN x");
        assert_eq!(
            clean_line(" 10%|#  \r 50%|#### \r100%|######"),
            "100%|######"
        );
        let long = "é".repeat(10_000);
        let c = clean_line(&long);
        assert!(c.len() <= MAX_KEPT_LINE + '…'.len_utf8());
        assert!(c.ends_with('…'));
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate_chars("héllo", 2), "hé…");
        assert_eq!(truncate_chars("héllo", 5), "héllo");
        assert_eq!(truncate_bytes("héllo", 2), "h…");
        assert_eq!(truncate_bytes("", 0), "");
        assert_eq!(truncate_bytes("\u{FFFD}\u{FFFD}", 4), "\u{FFFD}…");
    }
}
