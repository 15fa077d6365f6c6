//! A terminal backend that spends fewer bytes on each frame (an SSH link is
//! the dashboard's whole budget): it hands the crossterm backend the same
//! changes ratatui found, but
//! - a short run of unchanged cells between two changes on a row is sent
//!   again instead of a cursor move (`ESC[r;cH` is 6–8 bytes; a few plain
//!   characters are fewer), and
//! - a blank cell takes the colour of the text before it when that looks the
//!   same (a space shows no foreground), instead of a colour change there and
//!   back.
//!
//! What the terminal shows is the same cell for cell (a test replays both
//! outputs into a terminal emulator). The screen as drawn is kept here, to
//! know what the unchanged cells hold.

use std::cell::RefCell;
use std::io::{self, Write};
use std::rc::Rc;

use ratatui::backend::{Backend, ClearType, CrosstermBackend, WindowSize};
use ratatui::buffer::Cell;
use ratatui::layout::{Position, Size};
use ratatui::style::{Color, Modifier};

/// The longest run of unchanged cells sent again rather than jumped over.
const GAP: u16 = 6;

/// Modifiers that show on a blank cell.
const SHOWN_ON_BLANK: Modifier = Modifier::UNDERLINED
    .union(Modifier::REVERSED)
    .union(Modifier::CROSSED_OUT);

/// Collects a frame's bytes, readable while the backend holds the writer:
/// the frame loop sends them in one write.
#[derive(Clone, Default)]
pub struct FrameBuffer(pub Rc<RefCell<Vec<u8>>>);

impl Write for FrameBuffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub struct Thrifty<W: Write> {
    inner: CrosstermBackend<W>,
    /// What the terminal shows, row by row (`width` cells a row).
    screen: Vec<Cell>,
    width: u16,
}

impl<W: Write> Thrifty<W> {
    pub fn new(writer: W) -> Thrifty<W> {
        Thrifty {
            inner: CrosstermBackend::new(writer),
            screen: Vec::new(),
            width: 0,
        }
    }

    fn at(&self, x: u16, y: u16) -> Option<&Cell> {
        (x < self.width)
            .then(|| {
                self.screen
                    .get(y as usize * self.width as usize + x as usize)
            })
            .flatten()
    }

    /// Remember `cell` at (x, y), growing the kept screen as needed.
    fn keep(&mut self, x: u16, y: u16, cell: &Cell) {
        if x >= self.width {
            self.regrid(x + 1);
        }
        let i = y as usize * self.width as usize + x as usize;
        if i >= self.screen.len() {
            self.screen.resize(i + 1, Cell::default());
        }
        self.screen[i] = cell.clone();
    }

    /// A wider screen than kept: what is kept is moved to the new rows.
    fn regrid(&mut self, width: u16) {
        let old = std::mem::take(&mut self.screen);
        let rows = if self.width == 0 {
            0
        } else {
            old.len().div_ceil(self.width as usize)
        };
        let mut screen = vec![Cell::default(); rows * width as usize];
        for (i, c) in old.into_iter().enumerate() {
            let (x, y) = (i % self.width as usize, i / self.width as usize);
            screen[y * width as usize + x] = c;
        }
        self.screen = screen;
        self.width = width;
    }
}

/// The look a run of text is being drawn in.
#[derive(Clone, Copy, PartialEq)]
struct Pen {
    fg: Color,
    bg: Color,
    modifier: Modifier,
}

impl Pen {
    fn of(c: &Cell) -> Pen {
        Pen {
            fg: c.fg,
            bg: c.bg,
            modifier: c.modifier,
        }
    }
}

/// One character one column wide (printable ASCII, box drawing, blocks,
/// braille: what the dashboard draws with): safe to send again in place.
fn narrow(c: &Cell) -> bool {
    let mut chars = c.symbol().chars();
    match (chars.next(), chars.next()) {
        (Some(ch), None) => {
            ch == ' '
                || ch.is_ascii_graphic()
                || ('\u{2500}'..='\u{259f}').contains(&ch)
                || ('\u{2800}'..='\u{28ff}').contains(&ch)
        }
        _ => false,
    }
}

fn blank(c: &Cell) -> bool {
    c.symbol() == " "
}

/// `c` as drawn with `pen`, when that looks the same: a blank on the same
/// background shows neither its foreground nor bold or dim.
fn as_drawn_with(c: &Cell, pen: Pen) -> Option<Cell> {
    if Pen::of(c) == pen {
        return Some(c.clone());
    }
    let looks_same = blank(c)
        && c.bg == pen.bg
        && !c.modifier.intersects(SHOWN_ON_BLANK)
        && !pen.modifier.intersects(SHOWN_ON_BLANK);
    looks_same.then(|| {
        let mut same = c.clone();
        same.fg = pen.fg;
        same.modifier = pen.modifier;
        same
    })
}

impl<W: Write> Backend for Thrifty<W> {
    type Error = io::Error;

    fn draw<'a, I>(&mut self, content: I) -> io::Result<()>
    where
        I: Iterator<Item = (u16, u16, &'a Cell)>,
    {
        let mut out: Vec<(u16, u16, Cell)> = Vec::new();
        // The last cell sent, and the look it was sent in.
        let mut last: Option<(u16, u16, Pen)> = None;
        for (x, y, cell) in content {
            if let Some((lx, ly, pen)) = last {
                let gap = x.saturating_sub(lx + 1);
                if ly == y && x > lx + 1 && gap <= GAP {
                    let fill: Option<Vec<Cell>> = (lx + 1..x)
                        .map(|gx| {
                            self.at(gx, y)
                                .filter(|c| narrow(c))
                                .and_then(|c| as_drawn_with(c, pen))
                        })
                        .collect();
                    if let Some(fill) = fill {
                        out.extend((lx + 1..x).zip(fill).map(|(gx, c)| (gx, y, c)));
                    }
                }
            }
            let sent = match last {
                Some((lx, ly, pen)) if ly == y && lx + 1 == x && narrow(cell) => {
                    as_drawn_with(cell, pen).unwrap_or_else(|| cell.clone())
                }
                _ => cell.clone(),
            };
            self.keep(x, y, cell);
            last = narrow(cell).then_some((x, y, Pen::of(&sent)));
            out.push((x, y, sent));
        }
        self.inner.draw(out.iter().map(|(x, y, c)| (*x, *y, c)))
    }

    fn hide_cursor(&mut self) -> io::Result<()> {
        self.inner.hide_cursor()
    }

    fn show_cursor(&mut self) -> io::Result<()> {
        self.inner.show_cursor()
    }

    fn get_cursor_position(&mut self) -> io::Result<Position> {
        self.inner.get_cursor_position()
    }

    fn set_cursor_position<P: Into<Position>>(&mut self, position: P) -> io::Result<()> {
        self.inner.set_cursor_position(position)
    }

    fn clear(&mut self) -> io::Result<()> {
        self.screen.iter_mut().for_each(Cell::reset);
        self.inner.clear()
    }

    fn clear_region(&mut self, clear_type: ClearType) -> io::Result<()> {
        // Only a whole clear is kept track of; anything else forgets the
        // screen (no unchanged cell is sent again until it is drawn anew).
        match clear_type {
            ClearType::All => self.screen.iter_mut().for_each(Cell::reset),
            _ => {
                self.screen.clear();
                self.width = 0;
            }
        }
        self.inner.clear_region(clear_type)
    }

    fn size(&self) -> io::Result<Size> {
        self.inner.size()
    }

    fn window_size(&mut self) -> io::Result<WindowSize> {
        self.inner.window_size()
    }

    fn flush(&mut self) -> io::Result<()> {
        Backend::flush(&mut self.inner)
    }
}

impl<W: Write> Write for Thrifty<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Write::flush(&mut self.inner)
    }
}

/// What marks a frame as one update (synchronised output, mode 2026), as
/// crossterm writes it.
const BEGIN: &[u8] = b"\x1b[?2026h";
const END: &[u8] = b"\x1b[?2026l";

/// What the crossterm backend ends every drawing with: the colours, the
/// underline colour and the attributes reset one by one, where the last
/// resets them all.
const RESETS: &[u8] = b"\x1b[39m\x1b[49m\x1b[59m\x1b[0m";
const RESET: &[u8] = b"\x1b[0m";
const HIDE_CURSOR: &[u8] = b"\x1b[?25l";

/// A frame's bytes (between [`BEGIN`] and [`END`]) made fewer where that
/// changes nothing the terminal shows: the resets at its end are one;
/// `false` when all it holds is that reset and a hidden cursor (nothing
/// changed: nothing to send).
pub fn tidy_frame(bytes: &mut Vec<u8>) -> bool {
    if let Some(at) = bytes.windows(RESETS.len()).rposition(|w| w == RESETS) {
        bytes.splice(at..at + RESETS.len(), RESET.iter().copied());
    }
    let inside = bytes
        .strip_prefix(BEGIN)
        .and_then(|b| b.strip_suffix(END))
        .and_then(|b| b.strip_prefix(RESET));
    !matches!(inside, Some(rest) if rest.is_empty() || rest == HIDE_CURSOR)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::buffer::Buffer;
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    const W: u16 = 48;
    const H: u16 = 12;

    fn xorshift(s: &mut u64) -> u64 {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        *s
    }

    /// A frame of runs of text and blanks in a few looks, as panes draw.
    fn frame(seed: &mut u64, prev: &Buffer) -> Buffer {
        let looks = [
            Style::default(),
            Style::default().fg(Color::Indexed(250)),
            Style::default()
                .fg(Color::Indexed(117))
                .bg(Color::Indexed(236)),
            Style::default().add_modifier(Modifier::BOLD),
            Style::default().add_modifier(Modifier::REVERSED),
            Style::default()
                .fg(Color::Red)
                .add_modifier(Modifier::UNDERLINED),
        ];
        let words = [
            "line", " ", "  ", "│", "░░", "⣿", "0.5", "tok/s", "ok", "é", "漢",
        ];
        let mut b = prev.clone();
        for y in 0..H {
            if xorshift(seed).is_multiple_of(3) {
                continue; // this row stays as it was
            }
            let mut x = (xorshift(seed) % 8) as u16;
            while x < W {
                let look = looks[(xorshift(seed) % looks.len() as u64) as usize];
                let word = words[(xorshift(seed) % words.len() as u64) as usize];
                let (nx, _) = b.set_stringn(x, y, word, (W - x) as usize, look);
                x = nx + (xorshift(seed) % 3) as u16;
            }
        }
        b
    }

    /// What a terminal shows after the bytes: per cell its text, background,
    /// and (where it shows) its foreground and attributes.
    fn shown(bytes: &[u8]) -> Vec<String> {
        let size = |n: u16| std::num::NonZeroU16::new(n).unwrap();
        let mut p = vt100::Parser::new(size(H), size(W), 0);
        p.process(bytes);
        let s = p.screen();
        let mut out = Vec::new();
        for y in 0..H {
            for x in 0..W {
                let c = s.cell(y, x).unwrap();
                let text = c.contents();
                let visible = !text.trim().is_empty() || c.underline() || c.inverse();
                out.push(if visible {
                    format!(
                        "{x},{y} {text:?} {:?} {:?} b{} u{} i{}",
                        c.fgcolor(),
                        c.bgcolor(),
                        c.bold(),
                        c.underline(),
                        c.inverse()
                    )
                } else {
                    format!("{x},{y} blank {:?}", c.bgcolor())
                });
            }
        }
        out
    }

    /// Frame after frame of random changes: the terminal shows the same
    /// cells whichever backend drew them, and the thrifty one sends fewer
    /// bytes.
    #[test]
    fn the_screen_is_the_same_and_the_bytes_fewer() {
        let area = Rect::new(0, 0, W, H);
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let (a, b) = (FrameBuffer::default(), FrameBuffer::default());
        let (mut plain, mut thrifty) = (CrosstermBackend::new(a.clone()), Thrifty::new(b.clone()));
        let mut prev = Buffer::empty(area);
        // What the thrifty side sends: each frame between its markers,
        // tidied, and nothing for a frame that changed nothing.
        let mut sent = Vec::new();
        for n in 0..200 {
            // One frame in ten changes nothing.
            let next = if n % 10 == 5 {
                prev.clone()
            } else {
                frame(&mut seed, &prev)
            };
            let changes = prev.diff(&next);
            plain.draw(changes.iter().cloned()).unwrap();
            thrifty.draw(changes.iter().cloned()).unwrap();
            let mut bytes = [BEGIN, &b.0.borrow(), END].concat();
            b.0.borrow_mut().clear();
            assert_eq!(tidy_frame(&mut bytes), !changes.is_empty());
            if !changes.is_empty() {
                sent.extend_from_slice(&bytes);
            }
            if n % 20 == 19 {
                let (a, b) = (shown(&a.0.borrow()), shown(&sent));
                for (a, b) in a.iter().zip(&b) {
                    assert_eq!(a, b, "after frame {n}");
                }
            }
            prev = next;
        }
        let (a, b) = (a.0.borrow().len(), sent.len());
        assert!(b < a, "{b} bytes against {a}");
        eprintln!("{b} bytes against {a}");
    }

    /// The frame markers are the bytes crossterm writes for them.
    #[test]
    fn the_frame_markers_are_crossterms() {
        use crossterm::Command;
        let ansi = |c: &dyn Fn(&mut String) -> std::fmt::Result| {
            let mut s = String::new();
            c(&mut s).unwrap();
            s.into_bytes()
        };
        let begin = ansi(&|s| crossterm::terminal::BeginSynchronizedUpdate.write_ansi(s));
        let end = ansi(&|s| crossterm::terminal::EndSynchronizedUpdate.write_ansi(s));
        assert_eq!(begin, BEGIN);
        assert_eq!(end, END);
        let hide = ansi(&|s| crossterm::cursor::Hide.write_ansi(s));
        assert_eq!(hide, HIDE_CURSOR);
        let mut bytes = [BEGIN, RESETS, HIDE_CURSOR, END].concat();
        assert!(!tidy_frame(&mut bytes), "an empty frame");
    }
}
