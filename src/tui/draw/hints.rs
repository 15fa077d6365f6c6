//! The hints bar at the bottom, generated from the keymap: the keys this view
//! can use (roomy when every key that steers the sweep fits, compact when
//! not), or the line being typed.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::tui::app::App;
use crate::tui::keymap::{self, Key};
use crate::tui::ui::{Focus, Overlay};

/// A key's first chord and the hint's label.
type Hint = (String, &'static str);

/// The keys that send the engine a command.
const ENGINE_KEYS: [Key; 5] = [
    Key::Pause,
    Key::SkipConfig,
    Key::SkipCell,
    Key::Retry,
    Key::Exclude,
];

/// The keys at the right end of the bar.
const IN_TAIL: [Key; 2] = [Key::Quit, Key::Help];

pub fn draw(frame: &mut Frame, app: &App, area: Rect) {
    if let Some(line) = typing(app) {
        frame.render_widget(Paragraph::new(line), area);
        return;
    }
    let t = app.theme();
    let mut spans: Vec<Span> = Vec::new();
    let mut used = 0usize;
    let width = area.width as usize;
    let focus = match app.ui.focus {
        Focus::Grid => "grid",
        Focus::Log => "log",
        Focus::Gpu => "GPUs",
    };
    let (wanted, steers) = offered(app);
    let tail_keys: Vec<Hint> = IN_TAIL
        .iter()
        .filter_map(|&k| Some((chord(app, k)?, keymap::binding(k).hint.unwrap_or(""))))
        .collect();
    // Roomy (keys boxed, the focus named) when every key the sweep takes
    // fits; compact (`p pause  s skip cfg`) when not, so 80 columns still
    // show pause, skip, retry, exclude and export.
    let shape = |(c, l): &Hint, last: bool, boxed: bool| {
        let key = if boxed { format!(" {c} ") } else { c.clone() };
        vec![
            Span::styled(key, t.hint_key),
            Span::styled(
                format!(" {l}{}", if last { " " } else { "  " }),
                t.hint_text,
            ),
        ]
    };
    let roomy = |k: &Hint, last: bool| shape(k, last, true);
    let compact = |k: &Hint, last: bool| shape(k, last, false);
    let width_of = |spans: &[Span]| spans.iter().map(|s| s.width()).sum::<usize>();
    let roomy_tail: Vec<Span> = std::iter::once(Span::styled(format!("focus: {focus} "), t.dim))
        .chain(tail_keys.iter().flat_map(|k| roomy(k, true)))
        .collect();
    // Roomy only when every hint fits so: a boxed bar that leaves keys out
    // (Enter, Tab, `c`, `z`, `v` at 120 columns) helps less than a compact
    // one that shows them.
    let roomy_need: usize = wanted
        .iter()
        .map(|k| width_of(&roomy(k, false)))
        .sum::<usize>()
        + width_of(&roomy_tail);
    let is_compact = roomy_need > width;
    let style = |k: &Hint, last: bool| shape(k, last, !is_compact);
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
    // In the keymap's order, the keys that steer the sweep first; one that
    // does not fit leaves room for a shorter one after it.
    let order = wanted
        .iter()
        .zip(&steers)
        .filter(|(_, s)| **s)
        .chain(wanted.iter().zip(&steers).filter(|(_, s)| !**s))
        .map(|(k, _)| k);
    let mut shown: Vec<&Hint> = Vec::new();
    for k in order {
        let w = width_of(&style(k, false));
        if used + w + tail_w > width {
            continue;
        }
        used += w;
        shown.push(k);
    }
    // Drawn in the keymap's order.
    for k in wanted.iter().filter(|k| shown.contains(k)) {
        spans.extend(style(k, false));
    }
    spans.push(Span::raw(" ".repeat(width.saturating_sub(used + tail_w))));
    spans.extend(tail);
    frame.render_widget(Paragraph::new(Line::from(spans)), area);
}

/// The first chord of a key, as the bar shows it.
/// In the log, the first that does it there (`?` searches back: help is F1).
fn chord(app: &App, k: Key) -> Option<String> {
    let in_log = app.ui.focus == Focus::Log;
    let chords = app.keymap.chords(k);
    chords
        .iter()
        .find(|c| app.keymap.lookup_for(c, in_log) == Some(k))
        .or(chords.first())
        .map(|c| c.to_string())
}

/// While a line is typed (a search, the grid's filter) or a search is on,
/// the bar says how to go on.
fn typing(app: &App) -> Option<Line<'static>> {
    let t = app.theme();
    let (slash, on, back) = if app.ui.search_back {
        ("?", "older", "newer")
    } else {
        ("/", "newer", "older")
    };
    if let Overlay::Search(q) = &app.ui.overlay {
        let from = if app.ui.search_back {
            "back from the bottom"
        } else {
            "on from the top"
        };
        return Some(Line::from(vec![
            Span::styled(format!(" {slash} "), t.hint_key),
            Span::styled(format!(" {q}"), t.text),
            Span::styled("_", t.hint_key),
            Span::styled(format!("   Enter: find {from}   Esc: stop"), t.hint_text),
        ]));
    }
    if let Overlay::Filter(q) = &app.ui.overlay {
        let n = app.grid.shown_configs().count();
        return Some(Line::from(vec![
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
        ]));
    }
    if app.ui.searching {
        let q = app.ui.last_search.as_deref().unwrap_or("");
        let mut line = vec![Span::styled(format!(" {slash}{q} "), t.hint_key)];
        for (key, what) in [("n", on), ("N", back), ("Esc", "end search")] {
            line.push(Span::styled(format!("  {key} "), t.hint_key));
            line.push(Span::styled(format!(" {what}"), t.hint_text));
        }
        return Some(Line::from(line));
    }
    None
}

/// The hints in the order the keymap lists them, what this view can use,
/// and for each whether it steers the sweep (or leaves it): what must fit.
fn offered(app: &App) -> (Vec<Hint>, Vec<bool>) {
    let mut wanted: Vec<Hint> = Vec::new();
    let mut steers: Vec<bool> = Vec::new();
    // An attached view says first how to leave it without stopping the sweep.
    if app.attached() {
        if let Some(c) = chord(app, Key::Detach) {
            wanted.push((c, "detach"));
            steers.push(true);
        }
    }
    for b in keymap::BINDINGS
        .iter()
        .filter(|b| !IN_TAIL.contains(&b.key))
    {
        let Some(label) = b.hint else { continue };
        // The pause key says what it will do.
        let label = if b.key == Key::Pause && app.view.sweep.paused {
            "resume"
        } else {
            label
        };
        // A recorded or ended sweep takes no commands: no keys for them.
        if !app.sweep_live() && ENGINE_KEYS.contains(&b.key) {
            continue;
        }
        if b.key == Key::Detach {
            continue;
        }
        if let Some(c) = chord(app, b.key) {
            wanted.push((c, label));
            steers.push(ENGINE_KEYS.contains(&b.key) || b.key == Key::Export);
        }
    }
    (wanted, steers)
}
