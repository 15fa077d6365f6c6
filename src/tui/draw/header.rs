//! The header line: the plan, what runs now, progress, elapsed time and ETA
//! on the left, whose view it is and the sweep's state on the right; what
//! does not fit goes in a compact form, then by priority.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::clock;
use crate::tui::app::{App, Mode};
use crate::view::state::{Shown, Sweep};

/// A part of the header and its priority: lower numbers go first when space
/// is short.
type Segment = (u8, Vec<Span<'static>>);

pub fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme();
    let sym = app.symbols();
    let (badge, state_style) = state_badge(app);
    let viewers = viewers_badge(app);
    let right_w = badge.chars().count() + viewers.as_ref().map_or(0, |r| r.chars().count());
    let avail = (area.width as usize).saturating_sub(right_w + 1);
    // State, progress and ETA outlast the phase and the elapsed time.
    let width = |segs: &[Segment]| -> usize {
        segs.iter()
            .map(|(_, s)| s.iter().map(|x| x.width()).sum::<usize>())
            .sum::<usize>()
            + segs.len().saturating_sub(1) * sym.sep.chars().count()
    };
    let mut segs = segments(app, false);
    if width(&segs) > avail {
        segs = segments(app, true);
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
    if let Some(r) = viewers {
        spans.push(Span::styled(r, t.state_paused));
    }
    spans.push(Span::styled(badge, state_style));
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The sweep's state, as a badge in its colour.
fn state_badge(app: &App) -> (String, Style) {
    let t = app.theme();
    let v = &app.view;
    let shown = v.shown();
    let style = match shown {
        Shown::Running | Shown::Starting => t.state_running,
        Shown::Paused => t.state_paused,
        Shown::Stopping | Shown::Interrupted => t.state_stopping,
        Shown::Finished => t.state_finished,
    };
    let mut badge = format!(" {} ", shown.label());
    if shown == Shown::Paused && !v.running.is_empty() {
        badge = " PAUSING ".into();
    }
    (badge, style)
}

/// Whose view this is: a recorded run, or watched from another terminal
/// (with how many watch); the sweep's own view says how many are attached.
fn viewers_badge(app: &App) -> Option<String> {
    let sep = app.symbols().sep;
    match app.mode {
        Mode::ReadOnly => Some(" READ-ONLY ".to_string()),
        Mode::Attached { .. } => Some(match app.view.viewers {
            Some(n) if n > 1 => format!(" ATTACHED{sep}{n} viewers "),
            _ => " ATTACHED ".to_string(),
        }),
        Mode::Live { .. } => match app.view.viewers {
            Some(n) if n > 0 => Some(format!(" {n} attached ",)),
            _ => None,
        },
    }
}

/// The left side's segments in order, in words or (`compact`) in a short form
/// for narrow terminals.
fn segments(app: &App, compact: bool) -> Vec<Segment> {
    let t = app.theme();
    let v = &app.view;
    let name = if v.plan_name.is_empty() {
        "sweeptop".to_string()
    } else {
        v.plan_name.clone()
    };
    let words = |long: String, short: String| if compact { short } else { long };
    let mut segs: Vec<Segment> = Vec::new();
    segs.push((9, vec![Span::styled(format!(" {name}"), t.header_accent)]));
    let side_by_side = v.live_configs().count();
    // Once the sweep has ended no config runs: the header names none.
    let now = v.config_now();
    if let Some(c) = now {
        let phase = words(format!("phase {}", c.phase), c.phase.clone());
        segs.push((4, vec![Span::styled(phase, t.header)]));
    }
    if let (true, Some(_)) = (side_by_side > 1, now) {
        let text = words(
            format!("{side_by_side} configs side by side"),
            format!("{side_by_side} configs"),
        );
        segs.push((7, vec![Span::styled(text, t.header_accent)]));
    } else if let Some(c) = now {
        let attempt = match (c.attempt > 1, compact) {
            (false, _) => String::new(),
            (true, false) => format!(" (attempt {})", c.attempt),
            (true, true) => format!(" #{}", c.attempt),
        };
        let (index, total) = v.config_place(c);
        let index = words(
            format!("config {index}/{total} "),
            format!("{index}/{total} "),
        );
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
    let cells = words(
        format!("cells {}/{}", v.done(), v.total_cells),
        format!("{}/{} cells", v.done(), v.total_cells),
    );
    segs.push((8, vec![Span::styled(cells, t.header)]));
    if let Some(e) = v.elapsed_s(app.now) {
        let text = words(format!("elapsed {}", clock(e)), format!("{} in", clock(e)));
        segs.push((5, vec![Span::styled(text, t.header)]));
    }
    let eta = match v.eta_s(app.now) {
        Some(eta) => Some(format!("ETA {}", clock(eta))),
        // Running, with too little measured yet for an ETA.
        None if matches!(v.sweep.sweep, Sweep::Running) => Some("ETA …".to_string()),
        None => None,
    };
    if let Some(eta) = eta {
        segs.push((6, vec![Span::styled(eta, t.header)]));
    }
    if let (true, Some(by)) = (v.sweep.paused, &v.paused_by) {
        let who = app.who(by);
        let text = words(format!("paused by {who}"), format!("by {who}"));
        segs.push((8, vec![Span::styled(text, t.header)]));
    }
    segs
}
