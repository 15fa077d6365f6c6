//! Untrusted text made safe to show: the one sanitiser for everything a server,
//! a plan or a control client wrote that reaches a terminal, a file a person
//! opens, or a spreadsheet.
//!
//! - [`display`]: what every view shows (dashboard, headless and attach lines,
//!   `progress.log`, details, Markdown and CSV exports). Escape sequences are
//!   removed; tab, newline, carriage return and the Unicode line separators
//!   become a space (so a `\r` cannot hide the text before it and a newline
//!   cannot forge a line of our own); every other control character (C0,
//!   DEL, C1 such as `U+009B`, the one-byte CSI) and every invisible
//!   direction or format control (`U+202E` and its family, zero-width
//!   characters, BOM) becomes a visible `�`.
//! - [`spreadsheet`]: [`display`], then a cell a spreadsheet would run as a
//!   formula (`=`, `+`, `-`, `@`, also after leading spaces) is prefixed with
//!   `'`, as OWASP recommends against CSV injection.
//! - [`to_json_line`] / [`to_json_pretty`]: JSON whose strings carry the same
//!   characters as `\u` escapes, so the data is unchanged while `cat`ting a
//!   run's files or an export cannot drive the terminal.

use std::borrow::Cow;
use std::io;

/// What replaces a character that must not reach a terminal as is.
pub const REPLACEMENT: char = '\u{FFFD}';

/// What [`display`] does with one character.
enum Treat {
    Keep,
    Space,
    Replace,
}

fn treat(c: char) -> Treat {
    match c {
        '\t' | '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}' => {
            Treat::Space
        }
        c if c.is_control() => Treat::Replace,
        c if invisible(c) => Treat::Replace,
        _ => Treat::Keep,
    }
}

/// Invisible characters that reorder or hide text: bidirectional embeddings,
/// overrides, isolates and marks, zero-width characters, the BOM and the
/// interlinear annotation controls.
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{061C}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
    )
}

/// True when [`display`] would change `c` (JSON escapes these too).
fn unsafe_char(c: char) -> bool {
    !matches!(treat(c), Treat::Keep)
}

/// `s` as it may be shown. Borrowed (no allocation) when nothing changes,
/// which is almost every line a server prints.
pub fn display(s: &str) -> Cow<'_, str> {
    let printable_ascii = s.bytes().all(|b| (0x20..0x7f).contains(&b));
    if printable_ascii || !s.chars().any(unsafe_char) {
        return Cow::Borrowed(s);
    }
    let stripped = strip_ansi(s);
    let mut out = String::with_capacity(stripped.len());
    for c in stripped.chars() {
        match treat(c) {
            Treat::Keep => out.push(c),
            Treat::Space => out.push(' '),
            Treat::Replace => out.push(REPLACEMENT),
        }
    }
    Cow::Owned(out)
}

/// [`display`] for an owned string: `s` itself when nothing changes.
pub fn display_string(s: String) -> String {
    owned(s, display)
}

/// [`spreadsheet`] for an owned string: `s` itself when nothing changes.
pub fn spreadsheet_string(s: String) -> String {
    owned(s, spreadsheet)
}

/// `make_safe(&s)` as an owned string, reusing `s` when it is unchanged.
fn owned(s: String, make_safe: fn(&str) -> Cow<'_, str>) -> String {
    let safe = match make_safe(&s) {
        Cow::Owned(safe) => Some(safe),
        Cow::Borrowed(_) => None,
    };
    safe.unwrap_or(s)
}

/// Several lines, each as [`display`] shows it (the line breaks kept).
pub fn display_lines(s: &str) -> String {
    s.split('\n').map(display).collect::<Vec<_>>().join("\n")
}

/// A CSV cell that is safe to open in a spreadsheet: [`display`], and a
/// leading `=`, `+`, `-` or `@` (after any spaces, which tabs and carriage
/// returns have become) is neutralised by a leading `'`.
pub fn spreadsheet(s: &str) -> Cow<'_, str> {
    let shown = display(s);
    let formula = shown
        .trim_start_matches(' ')
        .starts_with(['=', '+', '-', '@']);
    if formula || s.starts_with(['\t', '\r']) {
        Cow::Owned(format!("'{shown}"))
    } else {
        shown
    }
}

/// Removes ANSI escape sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ST`,
/// and two-byte `ESC x`). Lines without ESC are borrowed untouched, which is
/// the common case and keeps classification allocation-free.
pub fn strip_ansi(line: &str) -> Cow<'_, str> {
    let bytes = line.as_bytes();
    let Some(first) = memchr::memchr(0x1b, bytes) else {
        return Cow::Borrowed(line);
    };
    // Work on bytes but only ever skip ASCII bytes, so every cut falls on a
    // char boundary and the kept pieces are valid UTF-8 slices of `line`.
    let mut out = String::with_capacity(line.len());
    let mut kept_from = 0;
    let mut i = first;
    while i < bytes.len() {
        if bytes[i] != 0x1b {
            i += 1;
            continue;
        }
        out.push_str(line.get(kept_from..i).unwrap_or_default());
        i += 1;
        match bytes.get(i) {
            Some(b'[') => {
                i += 1;
                // Parameters and intermediates, then one final byte in @..~.
                while let Some(&b) = bytes.get(i) {
                    if !b.is_ascii() {
                        break;
                    }
                    i += 1;
                    if (0x40..=0x7e).contains(&b) {
                        break;
                    }
                }
            }
            Some(b']') => {
                i += 1;
                // OSC ends with BEL or ESC \.
                while let Some(&b) = bytes.get(i) {
                    if !b.is_ascii() {
                        break;
                    }
                    if b == 0x07 {
                        i += 1;
                        break;
                    }
                    if b == 0x1b {
                        i += 1;
                        if bytes.get(i) == Some(&b'\\') {
                            i += 1;
                        }
                        break;
                    }
                    i += 1;
                }
            }
            Some(b) if b.is_ascii() => i += 1,
            _ => {}
        }
        kept_from = i;
    }
    out.push_str(line.get(kept_from..).unwrap_or_default());
    Cow::Owned(out)
}

/// serde_json's formatter, plus `\u` escapes for what [`display`] would change
/// and serde_json leaves raw (DEL, C1, direction and zero-width controls,
/// line separators). The JSON means exactly the same.
struct Safe<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for Safe<F> {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut from = 0;
        for (i, c) in fragment.char_indices() {
            if c.is_ascii() && c != '\u{7f}' || !unsafe_char(c) {
                continue;
            }
            w.write_all(&fragment.as_bytes()[from..i])?;
            write!(w, "\\u{:04x}", c as u32)?;
            from = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[from..])
    }

    // Everything else as the wrapped formatter writes it.
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// `value` as one line of JSON (no newline) into `w`, terminal-safe as described above.
pub fn write_json_line<W, T>(w: W, value: &T) -> serde_json::Result<()>
where
    W: io::Write,
    T: serde::Serialize + ?Sized,
{
    let mut ser =
        serde_json::Serializer::with_formatter(w, Safe(serde_json::ser::CompactFormatter));
    value.serialize(&mut ser)
}

/// `value` as one line of JSON (no newline), terminal-safe as described above.
pub fn to_json_line<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(256);
    write_json_line(&mut out, value)?;
    Ok(out)
}

/// [`to_json_line`] as a string.
pub fn to_json_string<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    // The serializer writes only valid UTF-8.
    to_json_line(value).map(|b| String::from_utf8(b).unwrap_or_default())
}

/// `value` as indented JSON, terminal-safe as described above.
pub fn to_json_pretty<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    let mut out = Vec::with_capacity(1024);
    let mut ser = serde_json::Serializer::with_formatter(
        &mut out,
        Safe(serde_json::ser::PrettyFormatter::new()),
    );
    value.serialize(&mut ser)?;
    // The serializer writes only valid UTF-8.
    Ok(String::from_utf8(out).unwrap_or_default())
}

/// Bytes in decimal units, as disks and downloads count them: `52.0 GB`,
/// `410 MB`, `812 B`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["kB", "MB", "GB", "TB", "PB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1000.0;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    if v < 100.0 {
        format!("{v:.1} {}", UNITS[unit])
    } else {
        format!("{v:.0} {}", UNITS[unit])
    }
}

/// A duration as a clock reads it: `0:51`, `12:04`, `1:02:03`.
pub fn duration(s: f64) -> String {
    let s = if s.is_finite() {
        s.max(0.0).round() as u64
    } else {
        0
    };
    let (h, m, sec) = (s / 3600, s / 60 % 60, s % 60);
    if h > 0 {
        format!("{h}:{m:02}:{sec:02}")
    } else {
        format!("{m}:{sec:02}")
    }
}

/// Hostile strings seen in or made after real server output: every one must
/// come out of [`display`] with no control, escape or invisible character.
#[cfg(test)]
pub(crate) const HOSTILE: &[&str] = &[
    "\u{1b}[2J\u{1b}[HERROR clear screen",
    "\u{1b}]0;pwned title\u{7}after",
    "\u{1b}]8;;http://evil.example\u{1b}\\click\u{1b}]8;;\u{1b}\\",
    "\u{9b}31mC1 CSI red",
    "\u{9d}0;C1 OSC title\u{9c}",
    "real cause\rfake: all fine",
    "backspace over\u{8}\u{8}\u{8}\u{8}text",
    "delete\u{7f}\u{7f}",
    "bell\u{7} nul\u{0} vt\u{b} ff\u{c} so\u{e}",
    "rtl \u{202E}txt.exe\u{202C} ok",
    "isolate \u{2066}x\u{2069} mark\u{200F} zw\u{200B}j\u{FEFF}",
    "line\nforged  c1  ok  100 tok/s",
    "sep\u{2028}para\u{2029}nel\u{85}",
    "=cmd|' /C calc'!A0 BOOM",
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)*cmd|' /C calc'!A0",
    "\t=1+1",
    "\r=1+1",
    "   =HYPERLINK(\"http://evil.example\")",
    "\u{1b}[31m=1+1",
];

/// Names compared as people read them: runs of digits by their number, so
/// `ctx1024` < `ctx8192` < `ctx32768` and `b4` < `b8` < `b12`; equal
/// numbers with leading zeros, and everything else, by the text.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    loop {
        match (x.first(), y.first()) {
            (None, None) => return a.cmp(b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(c), Some(d)) if c.is_ascii_digit() && d.is_ascii_digit() => {
                let n = x.iter().take_while(|c| c.is_ascii_digit()).count();
                let m = y.iter().take_while(|c| c.is_ascii_digit()).count();
                let (dx, dy) = (&x[..n], &y[..m]);
                // By value: without leading zeros, the longer is larger.
                let trim = |d: &[u8]| -> usize { d.iter().take_while(|&&c| c == b'0').count() };
                let (vx, vy) = (&dx[trim(dx)..], &dy[trim(dy)..]);
                let by_value = vx.len().cmp(&vy.len()).then_with(|| vx.cmp(vy));
                if by_value != Ordering::Equal {
                    return by_value;
                }
                x = &x[n..];
                y = &y[m..];
            }
            (Some(c), Some(d)) => {
                if c != d {
                    return c.cmp(d);
                }
                x = &x[1..];
                y = &y[1..];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a terminal or spreadsheet must never receive.
    fn dangerous(c: char) -> bool {
        c.is_control() || invisible(c) || matches!(c, '\u{2028}' | '\u{2029}')
    }

    #[test]
    fn hostile_strings_come_out_inert() {
        for s in HOSTILE {
            let shown = display(s);
            assert!(!shown.chars().any(dangerous), "{s:?} → {shown:?}");
            let cell = spreadsheet(s);
            assert!(!cell.chars().any(dangerous), "{s:?} → {cell:?}");
            let first = cell.trim_start_matches(' ').chars().next();
            assert!(
                !matches!(first, Some('=' | '+' | '-' | '@')),
                "{s:?} is still a formula: {cell:?}"
            );
        }
    }

    #[test]
    fn what_each_kind_of_character_becomes() {
        assert_eq!(display("real cause\rfake"), "real cause fake");
        assert_eq!(display("a\u{8}b"), "a\u{FFFD}b");
        assert_eq!(display("\u{9b}31mred"), "\u{FFFD}31mred");
        assert_eq!(display("x\u{202E}y"), "x\u{FFFD}y");
        assert_eq!(display("\u{1b}[31mred\u{1b}[0m"), "red");
        assert_eq!(display("tab\tnew\nline"), "tab new line");
        // Ordinary text, accents, CJK and emoji are untouched and not copied.
        for s in ["plain ascii", "héllo wörld", "显存不足", "ok 🚀", ""] {
            assert!(matches!(display(s), Cow::Borrowed(_)), "{s}");
        }
    }

    #[test]
    fn spreadsheet_cells_are_neutralised_only_when_needed() {
        assert_eq!(
            spreadsheet("=cmd|' /C calc'!A0 BOOM"),
            "'=cmd|' /C calc'!A0 BOOM"
        );
        assert_eq!(spreadsheet("\t=1+1"), "' =1+1");
        assert_eq!(spreadsheet("@x"), "'@x");
        assert_eq!(
            spreadsheet("CUDA error: illegal instruction"),
            "CUDA error: illegal instruction"
        );
        assert_eq!(spreadsheet("tp1-dflash"), "tp1-dflash");
        assert_eq!(spreadsheet(""), "");
    }

    #[test]
    fn json_escapes_keep_the_data() {
        for s in HOSTILE {
            let line = to_json_line(&s).unwrap();
            let text = String::from_utf8(line.clone()).unwrap();
            assert!(!text.chars().any(dangerous), "{s:?} → {text}");
            let back: String = serde_json::from_slice(&line).unwrap();
            assert_eq!(&back, s);
            let pretty = to_json_pretty(&vec![s]).unwrap();
            let back: Vec<String> = serde_json::from_str(&pretty).unwrap();
            assert_eq!(back[0], *s);
        }
        // Plain data is byte for byte what serde_json writes.
        let v = serde_json::json!({"a": [1, 2.5, "é 显"], "b": {"c": null}});
        assert_eq!(to_json_line(&v).unwrap(), serde_json::to_vec(&v).unwrap());
        assert_eq!(
            to_json_pretty(&v).unwrap(),
            serde_json::to_string_pretty(&v).unwrap()
        );
    }

    #[test]
    fn names_sort_by_their_numbers() {
        let mut cells = vec![
            "tp8/code-ctx32768-c4",
            "tp8/code-ctx1024-c4",
            "tp8/code-ctx8192-c4",
            "tp1-b12/x",
            "tp1-b4/x",
            "tp1-b8/x",
            "tp1-b08/x",
        ];
        cells.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(
            cells,
            [
                "tp1-b4/x",
                "tp1-b08/x",
                "tp1-b8/x",
                "tp1-b12/x",
                "tp8/code-ctx1024-c4",
                "tp8/code-ctx8192-c4",
                "tp8/code-ctx32768-c4",
            ]
        );
    }
}
