//! The alert line under the header: a message (what a key did), else the
//! worst failure so far, else the latest notice; the cell counts on the right.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use crate::model::{Level, Status};
use crate::tui::app::App;

pub fn draw(frame: &mut Frame, app: &App, area: Rect) {
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
    } else if let Some(p) = v.preparing.first() {
        // What the sweep waits for now, as it moves.
        let more = match v.preparing.len() {
            1 => String::new(),
            n => format!(" (+{} more)", n - 1),
        };
        (format!(" preparing {}{more}", p.progress()), t.running)
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
