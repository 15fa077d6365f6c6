//! Drawing: a pure function of the [`App`], the panes in their places from
//! [`layout`](crate::tui::layout). Each pane and popup has its own file; the
//! characters that differ under `--ascii` and the small text helpers the panes
//! share live here.

mod alert;
mod chart;
mod details;
mod gpu;
mod grid;
mod header;
mod hints;
mod log;
mod popup;

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::border;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use super::app::App;
use super::layout::{self, MIN_HEIGHT, MIN_WIDTH};
use super::ui::Overlay;

/// Characters that differ between Unicode and `--ascii`.
pub struct Symbols {
    pub border: border::Set<'static>,
    pub spinner: &'static [&'static str],
    pub bar_full: &'static str,
    pub bar_empty: &'static str,
    /// Eighths for partial bar cells (Unicode only).
    pub bar_eighths: Option<&'static [&'static str; 8]>,
    pub spark: &'static [&'static str],
    pub pending: &'static str,
    pub queued: &'static str,
    pub current: &'static str,
    pub active_gpu: &'static str,
    pub sep: &'static str,
    pub alert: &'static str,
    pub more_left: &'static str,
    pub more_right: &'static str,
}

const ASCII_BORDER: border::Set<'static> = border::Set {
    top_left: "+",
    top_right: "+",
    bottom_left: "+",
    bottom_right: "+",
    vertical_left: "|",
    vertical_right: "|",
    horizontal_top: "-",
    horizontal_bottom: "-",
};

pub const UNICODE: Symbols = Symbols {
    border: border::PLAIN,
    spinner: &["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"],
    bar_full: "█",
    bar_empty: "░",
    bar_eighths: Some(&["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"]),
    spark: &["▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"],
    pending: "·",
    queued: "↻ retry",
    current: "▶",
    active_gpu: "●",
    sep: " · ",
    alert: "✖",
    more_left: "◀",
    more_right: "▶",
};

pub const ASCII: Symbols = Symbols {
    border: ASCII_BORDER,
    spinner: &["|", "/", "-", "\\"],
    bar_full: "#",
    bar_empty: ".",
    bar_eighths: None,
    spark: &["_", ".", "-", "=", "+", "*", "#", "@"],
    pending: ".",
    queued: "retry",
    current: ">",
    active_gpu: "*",
    sep: " | ",
    alert: "!",
    more_left: "<",
    more_right: ">",
};

impl App {
    pub fn symbols(&self) -> &'static Symbols {
        if self.look.ascii {
            &ASCII
        } else {
            &UNICODE
        }
    }

    /// A bordered block in the theme, highlighted when it has focus.
    pub(crate) fn block<'a>(&self, title: impl Into<Line<'a>>, focused: bool) -> Block<'a> {
        let t = self.theme();
        Block::default()
            .borders(Borders::ALL)
            .border_set(self.symbols().border)
            .border_style(if focused { t.border_focus } else { t.border })
            .title(title.into().style(t.title))
    }
}

/// Draw the whole dashboard.
pub fn draw(frame: &mut Frame, app: &App) {
    let area = frame.area();
    let buf = frame.buffer_mut();
    let t = app.theme();
    buf.set_style(area, t.text);
    let Some(a) = layout::areas(area, &app.ui, &app.grid, &app.look) else {
        too_small(frame, app, area);
        return;
    };
    header::draw(frame, app, a.header);
    alert::draw(frame, app, a.alert);
    if a.grid.area() > 0 {
        grid::draw(frame, app, a.grid);
    }
    if let Some(g) = a.gpu {
        gpu::draw(frame, app, g);
    }
    if a.log.area() > 0 {
        log::draw(frame, app, a.log);
    }
    hints::draw(frame, app, a.hints);
    match &app.ui.overlay {
        Overlay::None | Overlay::Search(_) | Overlay::Filter(_) => {}
        Overlay::Help { scroll } => popup::help(frame, app, area, *scroll),
        Overlay::Chart => chart::draw(frame, app, area),
        Overlay::Details { scroll } => details::draw(frame, app, area, *scroll),
        Overlay::ConfirmQuit => popup::confirm_quit(frame, app, area),
        Overlay::Confirm { key, what } => popup::confirm(frame, app, area, *key, what),
    }
    if app.look.ascii {
        asciify(frame);
    }
}

/// Under `--ascii` nothing but ASCII reaches the terminal, whatever the text
/// (server log lines, messages) contained.
fn asciify(frame: &mut Frame) {
    let area = frame.area();
    let buf = frame.buffer_mut();
    for y in area.top()..area.bottom() {
        for x in area.left()..area.right() {
            let cell = &mut buf[(x, y)];
            if !cell.symbol().is_ascii() {
                let c = match cell.symbol() {
                    "—" | "–" | "─" => "-",
                    "│" => "|",
                    "└" | "┘" | "┌" | "┐" | "├" | "┤" | "┼" | "┬" | "┴" => "+",
                    "•" => "*",
                    "…" | "·" => ".",
                    "×" => "x",
                    "→" => ">",
                    "←" => "<",
                    "↑" => "^",
                    "↓" => "v",
                    _ => "?",
                };
                cell.set_symbol(c);
            }
        }
    }
}

fn too_small(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme();
    let lines = vec![
        Line::styled("terminal too small", t.title),
        Line::styled(
            format!(
                "{}×{} — the dashboard needs {MIN_WIDTH}×{MIN_HEIGHT}",
                area.width, area.height
            ),
            t.text,
        ),
        Line::styled("(the sweep goes on)", t.dim),
    ];
    let y = area.y + area.height.saturating_sub(lines.len() as u16) / 2;
    let h = (lines.len() as u16).min(area.height);
    frame.render_widget(
        Paragraph::new(lines).centered(),
        Rect::new(area.x, y, area.width, h),
    );
}

/// `00:42`, `1:02:03`.
pub fn clock(s: u64) -> String {
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// Pad or cut `s` to exactly `w` columns, right-aligned when `right`.
pub fn fit(s: &str, w: usize, right: bool) -> String {
    let n = s.chars().count();
    if n > w {
        s.chars().take(w).collect()
    } else if right {
        format!("{}{s}", " ".repeat(w - n))
    } else {
        format!("{s}{}", " ".repeat(w - n))
    }
}

/// A horizontal bar of `w` cells filled to `frac` (0..=1).
pub fn bar(sym: &Symbols, frac: f64, w: usize, full: Style, empty: Style) -> Vec<Span<'static>> {
    let frac = frac.clamp(0.0, 1.0);
    let eighths = (frac * w as f64 * 8.0).round() as usize;
    let whole = eighths / 8;
    let mut filled = sym.bar_full.repeat(whole);
    let mut cells = whole;
    if let Some(parts) = sym.bar_eighths {
        let rest = eighths % 8;
        if rest > 0 && cells < w {
            filled.push_str(parts[rest]);
            cells += 1;
        }
    }
    vec![
        Span::styled(filled, full),
        Span::styled(sym.bar_empty.repeat(w.saturating_sub(cells)), empty),
    ]
}
