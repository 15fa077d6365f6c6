//! Drawing: a pure function of the [`App`]. The layout is computed here and read
//! by `update` too (so scrolling knows what fits), the panes live in submodules.

mod chart;
mod gpu;
pub mod grid;
mod log;
mod popup;

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::symbols::border;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

use super::app::{App, Focus, Mode, Overlay};
use super::keymap::{self, Key};
use crate::model::{Level, Status};
use crate::view::state::Shown;

/// Below this the dashboard shows a notice instead.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

/// Where each pane goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub header: Rect,
    pub alert: Rect,
    pub grid: Rect,
    pub gpu: Option<Rect>,
    pub log: Rect,
    pub hints: Rect,
}

/// The layout for the app's terminal size; `None` when the terminal is too small.
pub fn layout(app: &App) -> Option<Areas> {
    let (w, h) = app.size;
    areas(Rect::new(0, 0, w, h), app)
}

pub fn areas(area: Rect, app: &App) -> Option<Areas> {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        return None;
    }
    let row = |y: u16, h: u16| Rect::new(area.x, area.y + y, area.width, h);
    let header = row(0, 1);
    let alert = row(1, 1);
    let hints = row(area.height - 1, 1);
    let body_h = area.height - 3;
    let body = Rect::new(area.x, area.y + 2, area.width, body_h);
    let (grid, gpu, log) = if app.ui.zoom {
        // The focused pane takes the body; the others have no room.
        let none = Rect::new(area.x, area.y + 2, 0, 0);
        match app.ui.focus {
            Focus::Grid => (body, None, none),
            Focus::Log => (none, None, body),
            Focus::Gpu => (none, Some(body), none),
        }
    } else {
        split_body(body, app)
    };
    Some(Areas {
        header,
        alert,
        grid,
        gpu,
        log,
        hints,
    })
}

/// The grid takes what it needs, up to three fifths of the body (or all but
/// seven rows, whichever is more), and leaves the rest to the GPUs and the log.
fn split_body(body: Rect, app: &App) -> (Rect, Option<Rect>, Rect) {
    let needed = app.grid.shown.len() as u16 + 4;
    let cap = (body.height * 3 / 5).max(body.height.saturating_sub(7));
    let grid_h = needed.min(cap).max(5);
    let grid = Rect::new(body.x, body.y, body.width, grid_h);
    let lower = Rect::new(
        body.x,
        grid.y + grid_h,
        body.width,
        body.height.saturating_sub(grid_h),
    );
    let (gpu, log) = if app.look.show_gpu {
        let gpu_w = if body.width >= 100 {
            (body.width * 2 / 5).clamp(36, 72)
        } else {
            body.width * 9 / 20
        };
        (
            Some(Rect::new(lower.x, lower.y, gpu_w, lower.height)),
            Rect::new(lower.x + gpu_w, lower.y, lower.width - gpu_w, lower.height),
        )
    } else {
        (None, lower)
    };
    (grid, gpu, log)
}

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
    let Some(a) = areas(area, app) else {
        too_small(frame, app, area);
        return;
    };
    header(frame, app, a.header);
    alert(frame, app, a.alert);
    if a.grid.area() > 0 {
        grid::draw(frame, app, a.grid);
    }
    if let Some(g) = a.gpu {
        gpu::draw(frame, app, g);
    }
    if a.log.area() > 0 {
        log::draw(frame, app, a.log);
    }
    hints(frame, app, a.hints);
    match &app.ui.overlay {
        Overlay::None | Overlay::Search(_) | Overlay::Filter(_) => {}
        Overlay::Help { scroll } => popup::help(frame, app, area, *scroll),
        Overlay::Chart => chart::draw(frame, app, area),
        Overlay::Details { scroll } => popup::details(frame, app, area, *scroll),
        Overlay::ConfirmQuit => popup::confirm_quit(frame, app, area),
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

fn header(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme();
    let v = &app.view;
    let sym = app.symbols();
    let shown = v.shown();
    let state_style = match shown {
        Shown::Running | Shown::Starting => t.state_running,
        Shown::Paused => t.state_paused,
        Shown::Stopping | Shown::Interrupted => t.state_stopping,
        Shown::Finished => t.state_finished,
    };
    let mut badge = format!(" {} ", shown.label());
    if shown == Shown::Paused && !v.running.is_empty() {
        badge = " PAUSING ".into();
    }
    let read_only = match app.mode {
        Mode::ReadOnly => Some(" READ-ONLY ".to_string()),
        // Watching from another terminal: say so, with how many watch.
        Mode::Attached { .. } => Some(match v.viewers {
            Some(n) if n > 1 => format!(" ATTACHED{}{n} viewers ", sym.sep),
            _ => " ATTACHED ".to_string(),
        }),
        Mode::Live { .. } => match v.viewers {
            Some(n) if n > 0 => Some(format!(" {n} attached ",)),
            _ => None,
        },
    };
    // Segments in order, each with a priority (lower numbers go first when
    // space is short), in words and in a compact form for narrow terminals:
    // state, progress and ETA outlast the phase and the elapsed time.
    let name = if v.plan_name.is_empty() {
        "sweeptop".to_string()
    } else {
        v.plan_name.clone()
    };
    let build = |compact: bool| -> Vec<(u8, Vec<Span>)> {
        let mut segs: Vec<(u8, Vec<Span>)> = Vec::new();
        segs.push((9, vec![Span::styled(format!(" {name}"), t.header_accent)]));
        let side_by_side = v.live_configs().count();
        if let (true, Some(c)) = (side_by_side > 1, v.config()) {
            let phase = if compact {
                c.phase.clone()
            } else {
                format!("phase {}", c.phase)
            };
            segs.push((4, vec![Span::styled(phase, t.header)]));
            let text = if compact {
                format!("{side_by_side} configs")
            } else {
                format!("{side_by_side} configs side by side")
            };
            segs.push((7, vec![Span::styled(text, t.header_accent)]));
        } else if let Some(c) = v.config() {
            let phase = if compact {
                c.phase.clone()
            } else {
                format!("phase {}", c.phase)
            };
            segs.push((4, vec![Span::styled(phase, t.header)]));
            let attempt = match (c.attempt > 1, compact) {
                (false, _) => String::new(),
                (true, false) => format!(" (attempt {})", c.attempt),
                (true, true) => format!(" #{}", c.attempt),
            };
            let index = if compact {
                format!("{}/{} ", c.index, c.total)
            } else {
                format!("config {}/{} ", c.index, c.total)
            };
            segs.push((
                7,
                vec![
                    Span::styled(index, t.header),
                    Span::styled(format!("{}{attempt}", c.id), t.header_accent),
                ],
            ));
        } else if v.total_configs > 0 {
            segs.push((
                7,
                vec![Span::styled(
                    format!("{} configs", v.total_configs),
                    t.header,
                )],
            ));
        }
        let cells = if compact {
            format!("{}/{} cells", v.done(), v.total_cells)
        } else {
            format!("cells {}/{}", v.done(), v.total_cells)
        };
        segs.push((8, vec![Span::styled(cells, t.header)]));
        if let Some(e) = v.elapsed_s(app.now) {
            let text = if compact {
                format!("{} in", clock(e))
            } else {
                format!("elapsed {}", clock(e))
            };
            segs.push((5, vec![Span::styled(text, t.header)]));
        }
        if let Some(eta) = v.eta_s(app.now) {
            segs.push((
                6,
                vec![Span::styled(format!("ETA {}", clock(eta)), t.header)],
            ));
        }
        if let (true, Some(by)) = (v.sweep.paused, &v.paused_by) {
            let who = app.who(by);
            let text = if compact {
                format!("by {who}")
            } else {
                format!("paused by {who}")
            };
            segs.push((8, vec![Span::styled(text, t.header)]));
        }
        segs
    };
    let right_w = badge.chars().count() + read_only.as_ref().map_or(0, |r| r.chars().count());
    let avail = (area.width as usize).saturating_sub(right_w + 1);
    let width = |segs: &[(u8, Vec<Span>)]| -> usize {
        segs.iter()
            .map(|(_, s)| s.iter().map(|x| x.width()).sum::<usize>())
            .sum::<usize>()
            + segs.len().saturating_sub(1) * sym.sep.chars().count()
    };
    let mut segs = build(false);
    if width(&segs) > avail {
        segs = build(true);
    }
    while width(&segs) > avail && segs.len() > 1 {
        let drop = segs
            .iter()
            .enumerate()
            .min_by_key(|(_, (p, _))| *p)
            .map(|(i, _)| i)
            .unwrap_or(0);
        segs.remove(drop);
    }
    let mut spans: Vec<Span> = Vec::new();
    for (i, (_, s)) in segs.into_iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(sym.sep, t.header));
        }
        spans.extend(s);
    }
    let used: usize = spans.iter().map(|s| s.width()).sum();
    spans.push(Span::styled(
        " ".repeat((area.width as usize).saturating_sub(used + right_w)),
        t.header,
    ));
    if let Some(r) = read_only {
        spans.push(Span::styled(r, t.state_paused));
    }
    spans.push(Span::styled(badge, state_style));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

fn alert(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme();
    let sym = app.symbols();
    let v = &app.view;
    let mut counts = counts_line(app, false);
    let (text, style) = if let Some(f) = &app.ui.flash {
        let style = match f.level {
            Level::Info => t.message,
            Level::Warn | Level::Error => t.warning,
        };
        (format!(" {}", f.text), style)
    } else if let Some(a) = v.alert() {
        // The count of each kind when the line has room beside the counts.
        let mut text = format!(" {} {a}", sym.alert);
        if let Some(k) = v.failure_kinds() {
            let with = format!("{text}; {k}");
            if with.chars().count() + counts.chars().count() + 2 <= area.width as usize {
                text = with;
            }
        }
        (text, t.alert)
    } else if let Some((_, n)) = &v.last_notice {
        (format!(" {n}"), t.warning)
    } else {
        (String::new(), t.text)
    };
    // The counts always show: compact, and the message cut to make room,
    // when both do not fit.
    // A message (a path just exported, a command to type) is read whole: the
    // counts give way to it for the few seconds it shows.
    let mut text = text;
    let width = area.width as usize;
    if text.chars().count() + counts.chars().count() + 2 > width {
        counts = counts_line(app, true);
        let room = width.saturating_sub(counts.chars().count() + 2);
        if text.chars().count() > room {
            if app.ui.flash.is_some() {
                counts.clear();
            } else if room > 1 {
                text = text.chars().take(room - 1).collect::<String>() + "…";
            }
        }
    }
    let text_w = text.chars().count();
    let counts_w = counts.chars().count();
    let mut spans = vec![Span::styled(text, style)];
    if text_w + counts_w + 2 <= area.width as usize {
        spans.push(Span::styled(
            " ".repeat(area.width as usize - text_w - counts_w),
            t.text,
        ));
        spans.push(Span::styled(counts, t.dim));
    } else {
        spans.push(Span::styled(
            " ".repeat((area.width as usize).saturating_sub(text_w)),
            style,
        ));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// `41 ok · 14 failed · 1 skipped · 0 left`; compact: `41 ok 14 failed 0 left`
/// (skipped only when there are some).
fn counts_line(app: &App, compact: bool) -> String {
    let v = &app.view;
    let mut n = [0usize; 3];
    for r in v.records.values() {
        n[match r.status {
            Status::Ok => 0,
            Status::Failed => 1,
            Status::Skipped => 2,
        }] += 1;
    }
    let left = v.total_cells.saturating_sub(v.done());
    if compact {
        let skipped = if n[2] > 0 {
            format!(" {} skip", n[2])
        } else {
            String::new()
        };
        return format!("{} ok {} failed{skipped} {left} left ", n[0], n[1]);
    }
    let sep = app.symbols().sep;
    format!(
        "{} ok{sep}{} failed{sep}{} skipped{sep}{left} left ",
        n[0], n[1], n[2]
    )
}

/// The hints bar, generated from the keymap.
fn hints(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme();
    let mut spans: Vec<Span> = Vec::new();
    let mut used = 0usize;
    let width = area.width as usize;
    if let Overlay::Search(q) = &app.ui.overlay {
        let line = Line::from(vec![
            Span::styled(" / ", t.hint_key),
            Span::styled(format!(" {q}"), t.text),
            Span::styled("_", t.hint_key),
            Span::styled("   Enter: find (again: older)   Esc: stop", t.hint_text),
        ]);
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    if let Overlay::Filter(q) = &app.ui.overlay {
        let n = app.grid.shown_configs().count();
        let line = Line::from(vec![
            Span::styled(" configs / ", t.hint_key),
            Span::styled(format!(" {q}"), t.text),
            Span::styled("_", t.hint_key),
            Span::styled(
                format!(
                    "   {n} of {} shown   Enter: keep   Esc: show all",
                    app.grid.configs.len()
                ),
                t.hint_text,
            ),
        ]);
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    if app.ui.searching {
        let q = app.ui.last_search.as_deref().unwrap_or("");
        let mut line = vec![Span::styled(format!(" /{q} "), t.hint_key)];
        for (key, what) in [("n", "older"), ("N", "newer"), ("Esc", "end search")] {
            line.push(Span::styled(format!("  {key} "), t.hint_key));
            line.push(Span::styled(format!(" {what}"), t.hint_text));
        }
        frame.render_widget(Paragraph::new(Line::from(line)), area);
        return;
    }
    let engine_keys = [
        Key::Pause,
        Key::SkipConfig,
        Key::SkipCell,
        Key::Retry,
        Key::Exclude,
    ];
    let focus = match app.ui.focus {
        Focus::Grid => "grid",
        Focus::Log => "log",
        Focus::Gpu => "GPUs",
    };
    let chord = |k: Key| app.keymap.chords(k).first().map(|c| c.to_string());
    // The hints in the order the keymap lists them, what this view can use.
    let in_tail = [Key::Quit, Key::Help];
    let mut wanted: Vec<(String, &str)> = Vec::new();
    // Which of them steer the sweep (or leave it): what must fit.
    let mut steers: Vec<bool> = Vec::new();
    // An attached view says first how to leave it without stopping the sweep.
    if app.attached() {
        if let Some(c) = chord(Key::Detach) {
            wanted.push((c, "detach"));
            steers.push(true);
        }
    }
    for b in keymap::BINDINGS
        .iter()
        .filter(|b| !in_tail.contains(&b.key))
    {
        let Some(label) = b.hint else { continue };
        // The pause key says what it will do.
        let label = if b.key == Key::Pause && app.view.sweep.paused {
            "resume"
        } else {
            label
        };
        // A recorded or ended sweep takes no commands: no keys for them.
        if !app.sweep_live() && engine_keys.contains(&b.key) {
            continue;
        }
        if b.key == Key::Detach {
            continue;
        }
        if let Some(c) = chord(b.key) {
            wanted.push((c, label));
            steers.push(engine_keys.contains(&b.key) || b.key == Key::Export);
        }
    }
    let tail_keys: Vec<(String, &str)> = in_tail
        .iter()
        .filter_map(|&k| Some((chord(k)?, keymap::binding(k).hint.unwrap_or(""))))
        .collect();
    // Roomy (keys boxed, the focus named) when every key the sweep takes
    // fits; compact (`p pause  s skip cfg`) when not, so 80 columns still
    // show pause, skip, retry, exclude and export.
    let shape = |(c, l): &(String, &str), last: bool, boxed: bool| {
        let key = if boxed { format!(" {c} ") } else { c.clone() };
        vec![
            Span::styled(key, t.hint_key),
            Span::styled(
                format!(" {l}{}", if last { " " } else { "  " }),
                t.hint_text,
            ),
        ]
    };
    let roomy = |k: &(String, &str), last: bool| shape(k, last, true);
    let compact = |k: &(String, &str), last: bool| shape(k, last, false);
    let width_of = |spans: &[Span]| spans.iter().map(|s| s.width()).sum::<usize>();
    let roomy_tail: Vec<Span> = std::iter::once(Span::styled(format!("focus: {focus} "), t.dim))
        .chain(tail_keys.iter().flat_map(|k| roomy(k, true)))
        .collect();
    let roomy_need: usize = wanted
        .iter()
        .zip(&steers)
        .filter(|(_, steers)| **steers)
        .map(|(k, _)| width_of(&roomy(k, false)))
        .sum::<usize>()
        + width_of(&roomy_tail);
    let is_compact = roomy_need > width;
    let style = |k: &(String, &str), last: bool| shape(k, last, !is_compact);
    let tail: Vec<Span> = if is_compact {
        std::iter::once(Span::raw(" "))
            .chain(tail_keys.iter().flat_map(|k| compact(k, true)))
            .collect()
    } else {
        roomy_tail
    };
    let tail_w = width_of(&tail);
    if is_compact {
        spans.push(Span::raw(" "));
        used += 1;
    }
    for k in &wanted {
        let parts = style(k, false);
        let w = width_of(&parts);
        if used + w + tail_w > width {
            break;
        }
        used += w;
        spans.extend(parts);
    }
    spans.push(Span::raw(" ".repeat(width.saturating_sub(used + tail_w))));
    spans.extend(tail);
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
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
