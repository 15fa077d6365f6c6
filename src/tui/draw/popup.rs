//! Popups over the dashboard: the frame they share (centred, scrolled, with
//! long lines wrapped), the help (generated from the keymap) and the quit
//! question. The details popup has its own file.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};
use ratatui::Frame;

use crate::tui::app::App;
use crate::tui::keymap::{binding, Key, BINDINGS};
use crate::tui::theme::Theme;
use crate::view::grid::ValueMode;

pub(super) fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width.saturating_sub(2)).max(1);
    let h = h.min(area.height.saturating_sub(2)).max(1);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

pub(super) fn show(
    frame: &mut Frame,
    app: &App,
    area: Rect,
    title: String,
    lines: Vec<Line<'static>>,
    scroll: u16,
) {
    let t = app.theme();
    let block = app
        .block(Line::styled(title, t.popup_title), true)
        .style(t.popup);
    let inner_h = area.height.saturating_sub(2);
    let inner_w = area.width.saturating_sub(2);
    // Long lines wrap: scrolling counts the rows they take, so every line
    // of evidence can be reached.
    let text = Paragraph::new(lines)
        .style(t.popup)
        .wrap(Wrap { trim: false });
    let rows = u16::try_from(text.line_count(inner_w)).unwrap_or(u16::MAX);
    let max_scroll = rows.saturating_sub(inner_h);
    let scroll = scroll.min(max_scroll);
    let block = if max_scroll > 0 {
        let more = if scroll < max_scroll {
            ", more below"
        } else {
            ""
        };
        block.title_bottom(Line::styled(
            format!(" {}/{rows}{more} ", scroll + inner_h.min(rows)),
            t.dim,
        ))
    } else {
        block
    };
    frame.render_widget(Clear, area);
    frame.render_widget(text.block(block).scroll((scroll, 0)), area);
}

pub fn help(frame: &mut Frame, app: &App, area: Rect, scroll: u16) {
    let t = app.theme();
    let sym = app.symbols();
    let key_w = BINDINGS
        .iter()
        .map(|b| app.keymap.label(b.key).chars().count())
        .max()
        .unwrap_or(8)
        + 2;
    let mut lines: Vec<Line> = Vec::new();
    for b in BINDINGS {
        let label = app.keymap.label(b.key);
        let pad = key_w.saturating_sub(label.chars().count());
        lines.push(Line::from(vec![
            Span::styled(format!(" {label}{}", " ".repeat(pad)), t.title),
            Span::styled(b.help.to_string(), t.popup),
        ]));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(" Grid", t.title));
    // What the column headings mean.
    for text in [
        " Rows are configs (server launches), grouped by phase; columns are cells:",
        " the workload over its columns, then `8k c4` = a prompt of 8,192 tokens",
        " (1k = 1,024) with 4 requests in flight (concurrency). A number that is",
        " not a multiple of 1,024 is shown as is (`32760 c1`).",
    ] {
        lines.push(Line::styled(text, t.popup));
    }
    let legend = [
        (sym.pending.to_string(), t.pending, "pending"),
        (format!("{} run", sym.spinner[0]), t.running, "running now"),
        ("skip".to_string(), t.skipped, "skipped"),
        (sym.queued.to_string(), t.pending, "queued to run again"),
        ("excl".to_string(), t.excluded, "config excluded"),
        (
            "ILL-INSTR".to_string(),
            t.failed,
            "failed: the badge says why (Enter for details)",
        ),
        (
            "123.4".to_string(),
            t.better,
            "better than the phase baseline (5 % or more)",
        ),
        (
            "123.4".to_string(),
            t.worse,
            "worse than the phase baseline",
        ),
        ("123.4".to_string(), t.baseline, "the baseline config"),
    ];
    for (mark, style, what) in legend {
        lines.push(Line::from(vec![
            Span::raw(" "),
            Span::styled(format!("{mark:>9}"), style),
            Span::styled(format!("  {what}"), t.popup),
        ]));
    }
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        format!(
            " Values ({} cycles)",
            app.keymap.label(crate::tui::keymap::Key::Value)
        ),
        t.title,
    ));
    for m in ValueMode::all() {
        let mark = if m == app.ui.value { sym.current } else { " " };
        lines.push(Line::styled(format!(" {mark} {}", m.title()), t.popup));
    }
    lines.push(Line::raw(""));
    let keys_file = crate::tui::theme::user_config_dir()
        .map(|d| d.join("keys.toml").display().to_string())
        .unwrap_or_else(|| "~/.config/sweeptop/keys.toml".into());
    lines.push(Line::styled(
        format!(" Keys can be changed in {keys_file}"),
        t.dim,
    ));
    lines.push(Line::styled(format!(" theme: {}", app.theme().name), t.dim));
    let h = lines.len() as u16 + 2;
    let longest = BINDINGS
        .iter()
        .map(|b| b.help.chars().count())
        .max()
        .unwrap_or(60);
    let w = (key_w + longest + 4) as u16;
    show(
        frame,
        app,
        centered(area, w, h),
        " Help ".into(),
        lines,
        scroll,
    );
}

/// A line of answers: each is one or more keys (`y / Enter`) and what it does.
fn key_hints(t: &Theme, hints: &[(&[&str], &str)]) -> Line<'static> {
    let mut spans = Vec::new();
    for (keys, label) in hints {
        for (i, key) in keys.iter().enumerate() {
            if i > 0 {
                spans.push(Span::styled(" / ", t.popup));
            }
            spans.push(Span::styled(format!(" {key} "), t.hint_key));
        }
        spans.push(Span::styled(label.to_string(), t.popup));
    }
    Line::from(spans)
}

pub fn confirm_quit(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme();
    let dir = app.run_dir.display().to_string();
    if app.attached() {
        let lines = vec![
            Line::raw(""),
            Line::styled(" Stop the sweep, or only detach?", t.title),
            Line::raw(""),
            Line::styled(" Stopping abandons the running cell and stops the", t.popup),
            Line::styled(" server's process group; it can be resumed later.", t.popup),
            Line::styled(
                " Detaching leaves it running; attach again any time.",
                t.popup,
            ),
            Line::raw(""),
            key_hints(
                t,
                &[
                    (&["y"], " stop    "),
                    (&["d"], " detach    "),
                    (&["n", "Esc"], " cancel"),
                ],
            ),
        ];
        show(
            frame,
            app,
            centered(area, 58, 10),
            " Quit ".into(),
            lines,
            0,
        );
        return;
    }
    let lines = vec![
        Line::raw(""),
        Line::styled(" Quit the sweep?", t.title),
        Line::raw(""),
        Line::styled(
            " The running cell is abandoned and the server's whole",
            t.popup,
        ),
        Line::styled(
            " process group is stopped. Everything recorded stays;",
            t.popup,
        ),
        Line::styled(" continue later with", t.popup),
        Line::styled(format!("   sweeptop run --resume {dir}"), t.title),
        Line::raw(""),
        key_hints(
            t,
            &[
                (&["y", "Enter"], " quit    "),
                (&["n", "Esc"], " keep running"),
            ],
        ),
    ];
    let w = (dir.chars().count() as u16 + 30).clamp(58, area.width);
    show(frame, app, centered(area, w, 11), " Quit ".into(), lines, 0);
}

/// A key that cannot be undone asks first: what it will do, and that the
/// same key again (or `y`) says yes.
/// What saying yes to `key` leads to, in a line.
fn confirm_consequence(key: Key) -> &'static str {
    match key {
        Key::Retry | Key::RetryAll => " This view closes; the retry runs here (old records stay).",
        Key::Exclude => " Its cells left are recorded as skipped; `x` again puts it back.",
        _ => " Its cells are recorded as skipped; `r` runs them again.",
    }
}

pub fn confirm(frame: &mut Frame, app: &App, area: Rect, key: Key, what: &str) {
    let t = app.theme();
    let again = app.keymap.label(key);
    let mut chars = what.chars();
    let first: String = chars
        .next()
        .map(|c| c.to_uppercase().collect())
        .unwrap_or_default();
    let question = format!(" {first}{}?", chars.as_str());
    let lines = vec![
        Line::raw(""),
        Line::styled(question.clone(), t.title),
        Line::raw(""),
        Line::styled(confirm_consequence(key), t.popup),
        Line::raw(""),
        key_hints(
            t,
            &[
                (&["y", "Enter", again.as_str()], " yes    "),
                (&["any other key"], " no"),
            ],
        ),
    ];
    let w = (question.chars().count() as u16 + 4).clamp(62, area.width);
    let name = binding(key).name.replace('_', " ");
    show(
        frame,
        app,
        centered(area, w, 8),
        format!(" {name} "),
        lines,
        0,
    );
}
