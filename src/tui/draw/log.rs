//! The server log tail: follows the newest line unless scrolled back; failure
//! lines in the failure style, the ready line highlighted, search matches
//! marked, a line repeated in a row shown once with its count; the title says
//! whose log it is, the selected or the running config's.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::tui::app::App;
use crate::tui::ui::Focus;
use crate::view::state::{LineKind, LogTail};

pub fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme();
    let sym = app.symbols();
    let log = app.shown_log();
    // Lines newer than the pane's last refresh wait below the bottom edge.
    let end = log
        .lines
        .len()
        .saturating_sub(app.ui.log_back.max(app.log_hidden()));
    let state = if app.ui.log_back > 0 {
        format!("{}{} lines back", sym.sep, app.ui.log_back)
    } else if app.ui.follow {
        format!("{}following", sym.sep)
    } else {
        format!("{}paused", sym.sep)
    };
    // Configs side by side share the live tail: each line says whose it is.
    let side_by_side = app.picked_config().is_none() && app.view.live_configs().nth(1).is_some();
    let source = source(app, log, end);
    let block = app.block(
        format!(" Server log{source}{state} "),
        app.ui.focus == Focus::Log,
    );
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let h = inner.height as usize;
    let w = inner.width as usize;
    let needle = app
        .ui
        .last_search
        .as_deref()
        .filter(|q| !q.is_empty())
        .map(str::to_lowercase);
    // From the bottom line up until the pane is full: a wrapped line takes
    // as many rows as it needs, so the newest line is always whole.
    // A line repeated in a row is shown once, with how many times
    // (`… (×24)`), as `classify --explain` shows evidence.
    let mut rows: Vec<Line> = Vec::with_capacity(h);
    let mut at = end;
    while at > 0 {
        if rows.len() >= h || w == 0 {
            break;
        }
        let l = &log.lines[at - 1];
        let repeats = log
            .lines
            .range(..at)
            .rev()
            .take_while(|o| o.text == l.text && o.config == l.config && o.kind == l.kind)
            .count();
        at -= repeats;
        let style = match l.kind {
            LineKind::Plain => t.log,
            LineKind::Failure => t.log_failure,
            LineKind::Ready => t.log_ready,
            LineKind::Note => t.log_note,
        };
        let tagged;
        let line_text = match (side_by_side && !l.config.is_empty(), repeats) {
            (false, 1) => &l.text,
            (true, 1) => {
                tagged = format!("{}{}{}", l.config, sym.sep, l.text);
                &tagged
            }
            (false, n) => {
                tagged = format!("{} (×{n})", l.text);
                &tagged
            }
            (true, n) => {
                tagged = format!("{}{}{} (×{n})", l.config, sym.sep, l.text);
                &tagged
            }
        };
        let text: Vec<char> = line_text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        let pieces: Vec<String> = if app.ui.wrap && text.len() > w {
            text.chunks(w).map(|c| c.iter().collect()).collect()
        } else {
            vec![text.iter().take(w).collect()]
        };
        for piece in pieces.into_iter().rev() {
            if rows.len() >= h {
                break;
            }
            rows.push(match &needle {
                Some(q) => highlight(&piece, q, style, t.log_match),
                None => Line::styled(piece, style),
            });
        }
    }
    rows.reverse();
    let lines = rows;
    if lines.is_empty() {
        frame.render_widget(
            Paragraph::new(Line::styled(" no server output yet", t.dim)),
            inner,
        );
        return;
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// Whose log the title names: the selected config's, else the running
/// config's (or how many run side by side), else the config whose output
/// is at the bottom of the pane (between configs, or after the end).
fn source(app: &App, log: &LogTail, end: usize) -> String {
    let sep = app.symbols().sep;
    if let Some(c) = app.picked_config() {
        return format!("{sep}{c} (selected)");
    }
    let mut live = app.view.live_configs();
    match (live.next(), live.next()) {
        (Some(_), Some(_)) => {
            let n = app.view.live_configs().count();
            format!("{sep}{n} configs side by side")
        }
        (Some(c), None) => format!("{sep}{} (running)", c.id),
        (None, _) => end
            .checked_sub(1)
            .and_then(|i| log.lines.get(i))
            .map(|l| l.config.as_str())
            .filter(|c| !c.is_empty())
            .or(app.view.config().map(|c| c.id.as_str()))
            .map(|c| format!("{sep}{c}"))
            .unwrap_or_default(),
    }
}

/// A line with every case-insensitive match of `q` (already lowercase) marked.
fn highlight(text: &str, q: &str, style: Style, mark: Style) -> Line<'static> {
    let lower = text.to_lowercase();
    // Lowercasing can change byte lengths; only mark when it did not.
    if lower.len() != text.len() {
        return Line::styled(text.to_string(), style);
    }
    let mut spans = Vec::new();
    let mut at = 0;
    while let Some(i) = lower[at..].find(q) {
        let s = at + i;
        if s > at {
            spans.push(Span::styled(text[at..s].to_string(), style));
        }
        spans.push(Span::styled(text[s..s + q.len()].to_string(), mark));
        at = s + q.len();
    }
    if at < text.len() {
        spans.push(Span::styled(text[at..].to_string(), style));
    }
    Line::from(spans)
}
