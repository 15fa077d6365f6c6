//! The results grid pane: configs down, workload × context × concurrency across,
//! scrolled so the selection stays in view.

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::fit;
use crate::tui::app::App;
use crate::tui::layout::{self, Geometry};
use crate::tui::ui::Focus;
use crate::view::grid::{CellView, Row, Tone};
use crate::view::state::Sweep;

/// What of the grid is on screen: the first row and column shown, and how
/// many of each.
struct Window {
    top: usize,
    left: usize,
    rows: usize,
    cols: usize,
    geo: Geometry,
}

pub fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme();
    let g = &app.grid;
    let geo = layout::geometry(area, g);
    let rows = &g.shown;
    let top = app.ui.grid_top.min(rows.len());
    let left = app.ui.grid_left.min(g.columns.len());
    let win = Window {
        top,
        left,
        rows: geo.rows.min(rows.len() - top),
        cols: geo.cols.min(g.columns.len().saturating_sub(left)),
        geo,
    };
    let mut block = app.block(title(app), app.ui.focus == Focus::Grid);
    if let Some(clipped) = clipped(app, &win) {
        block = block.title_bottom(Line::styled(clipped, t.dim));
    }
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    let mut lines: Vec<Line> = Vec::with_capacity(inner.height as usize);
    if g.configs.is_empty() {
        lines.push(Line::styled(" no cells recorded yet", t.dim));
        frame.render_widget(Paragraph::new(lines), inner);
        return;
    }
    if rows.is_empty() {
        lines.push(Line::styled(
            " no config matches (/ then Esc, F, [ ] undo the filters)",
            t.dim,
        ));
        frame.render_widget(Paragraph::new(lines), inner);
        return;
    }
    lines.extend(headings(app, &win));
    // Every config running now is marked (several when they run side by side).
    let mut current: Vec<&str> = app.view.live_configs().map(|c| c.id.as_str()).collect();
    if current.is_empty() {
        current.extend(app.view.config().map(|c| c.id.as_str()));
    }
    for row in rows.iter().skip(win.top).take(win.rows) {
        lines.push(match row {
            Row::Phase(id) => phase_row(app, id),
            Row::Config(i) => config_row(app, &win, *i, &current),
        });
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The pane's title: the value shown and what the grid is narrowed to, so a
/// filtered view is never mistaken for the whole sweep.
fn title(app: &App) -> String {
    let sym = app.symbols();
    let g = &app.grid;
    let a = &app.ui.arrange;
    let mut title = format!(" Results{}{}", sym.sep, app.value_mode().title());
    if !a.name.is_empty() {
        title.push_str(&format!("{}\"{}\"", sym.sep, a.name));
    }
    if a.failures_only {
        title.push_str(&format!("{}failures only", sym.sep));
    }
    if let Some(p) = &a.phase {
        title.push_str(&format!("{}phase {p} only", sym.sep));
    }
    if let Some(c) = a.sort_by.and_then(|c| g.columns.get(c)) {
        title.push_str(&format!(
            "{}sorted by {} {}",
            sym.sep,
            c.workload,
            c.label()
        ));
    }
    if !a.is_plain() {
        let n = g.shown_configs().count();
        title.push_str(&format!("{}{n} of {} configs", sym.sep, g.configs.len()));
    }
    title.push(' ');
    title
}

/// Which rows and columns are shown, when not all of them are.
fn clipped(app: &App, win: &Window) -> Option<String> {
    let g = &app.grid;
    let rows = g.shown.len();
    let mut clipped = Vec::new();
    if win.top > 0 || win.top + win.rows < rows {
        clipped.push(format!(
            "rows {}-{} of {}",
            win.top + 1,
            win.top + win.rows,
            rows
        ));
    }
    if win.left > 0 || win.left + win.cols < g.columns.len() {
        clipped.push(format!(
            "columns {}-{} of {}",
            win.left + 1,
            win.left + win.cols,
            g.columns.len()
        ));
    }
    (!clipped.is_empty()).then(|| format!(" {} ", clipped.join(app.symbols().sep)))
}

/// Two heading rows: workloads over their columns, then context and concurrency.
fn headings(app: &App, win: &Window) -> [Line<'static>; 2] {
    let t = app.theme();
    let sym = app.symbols();
    let g = &app.grid;
    let (left, geo) = (win.left, &win.geo);
    let mut groups = vec![Span::raw(" ".repeat(geo.label_w))];
    let mut labels = vec![Span::styled(
        fit(if left > 0 { sym.more_left } else { "" }, geo.label_w, true),
        t.dim,
    )];
    let cols = left..left + win.cols;
    for c in cols.clone() {
        let col = &g.columns[c];
        let starts = c == left || g.columns[c - 1].workload != col.workload;
        if starts {
            let rule = if sym.bar_eighths.is_some() {
                "─"
            } else {
                "-"
            };
            // The name, then a rule over the rest of the group.
            let span = cols
                .clone()
                .skip(c - left)
                .take_while(|&k| g.columns[k].workload == col.workload)
                .count()
                * (geo.col_w + 1)
                - 1;
            let name = format!("{} ", col.workload);
            let n = name.chars().count().min(span);
            let text = format!(
                " {}{}",
                name.chars().take(n).collect::<String>(),
                rule.repeat(span - n)
            );
            groups.push(Span::styled(text, t.column_header));
        }
        labels.push(Span::styled(
            format!(" {}", fit(&col.label(), geo.col_w, true)),
            t.column_header,
        ));
    }
    if left + win.cols < g.columns.len() {
        labels.push(Span::styled(sym.more_right, t.dim));
    }
    [Line::from(groups), Line::from(labels)]
}

/// A phase heading, naming the baseline speedups are against.
fn phase_row(app: &App, id: &str) -> Line<'static> {
    let t = app.theme();
    let mut spans = vec![Span::styled(format!(" phase {id}"), t.phase)];
    let baseline = app
        .grid
        .configs
        .iter()
        .find(|c| c.phase == id && c.baseline)
        .map(|c| c.id.clone());
    if let Some(b) = baseline {
        let sep = app.symbols().sep;
        spans.push(Span::styled(format!("{sep}speedups against {b}"), t.dim));
    }
    Line::from(spans)
}

/// A config's row: its label (marked when it runs now) and its cells.
fn config_row(app: &App, win: &Window, i: usize, current: &[&str]) -> Line<'static> {
    let t = app.theme();
    let sym = app.symbols();
    let g = &app.grid;
    let (left, geo) = (win.left, &win.geo);
    let cfg = &g.configs[i];
    let is_current = current.contains(&cfg.id.as_str())
        && !matches!(
            app.view.sweep.sweep,
            Sweep::Finished { .. } | Sweep::Interrupted { .. }
        );
    let excluded = app.view.excluded.contains(&cfg.id);
    let mut label_style = if excluded {
        t.excluded
    } else if is_current {
        t.current_row
    } else if cfg.baseline {
        t.baseline
    } else {
        t.row_label
    };
    let selected_row = app.ui.sel_config == i;
    if selected_row && app.ui.sel_col.is_none() {
        label_style = label_style.patch(t.selected);
    }
    // A failure in a column scrolled off to the left is marked
    // where the running config's marker would be.
    let failed_at = |c: usize| {
        matches!(
            g.cell(&app.view, app.value_mode(), i, c),
            CellView::Failed { .. }
        )
    };
    let (marker, marker_style) = if is_current {
        (sym.current, t.current_row)
    } else if (0..left).any(failed_at) {
        (sym.more_left, t.failed)
    } else {
        (" ", t.current_row)
    };
    let mut spans = vec![
        Span::styled(marker.to_string(), marker_style),
        Span::styled(fit(&cfg.id, geo.label_w - 1, false), label_style),
    ];
    for c in left..left + win.cols {
        let (text, style) = cell_text(app, i, c, geo.col_w);
        let mut style = style;
        if selected_row && app.ui.sel_col == Some(c) {
            style = selected(style, t.selected);
        }
        let text = fit(&text, geo.col_w, true);
        // Style the value, not its padding (except when selected).
        let pad = text.len() - text.trim_start().len();
        spans.push(Span::raw(" "));
        if selected_row && app.ui.sel_col == Some(c) {
            spans.push(Span::styled(text, style));
        } else {
            spans.push(Span::raw(" ".repeat(pad)));
            spans.push(Span::styled(text.trim_start().to_string(), style));
        }
    }
    // A failure in a column scrolled off to the right is marked at
    // the row's end, so no failure is out of sight unannounced.
    if (left + win.cols..g.columns.len()).any(failed_at) {
        spans.push(Span::styled(sym.more_right, t.failed));
    }
    Line::from(spans)
}

/// A cell's text and style.
fn cell_text(app: &App, config: usize, col: usize, width: usize) -> (String, Style) {
    let t = app.theme();
    let sym = app.symbols();
    match app.grid.cell(&app.view, app.value_mode(), config, col) {
        CellView::Absent => (String::new(), t.dim),
        CellView::Pending => (sym.pending.to_string(), t.pending),
        CellView::Preparing(pct) => {
            let long = pct.map(|p| format!("prep {p}%"));
            let text = long
                .filter(|s| s.chars().count() <= width)
                .unwrap_or_else(|| "prep".into());
            (text, t.running)
        }
        CellView::Running => (
            format!("{} run", sym.spinner[app.ui.spinner % sym.spinner.len()]),
            t.running,
        ),
        CellView::Queued => (sym.queued.to_string(), t.pending),
        CellView::Excluded => ("excl".into(), t.excluded),
        CellView::Skipped => ("skip".into(), t.skipped),
        // A crash and a request-level failure in different colours; an
        // overflow's numbers when the column has room (`400 32,808>32,768`).
        CellView::Failed {
            badge,
            label,
            crash,
        } => {
            let compact = label
                .strip_prefix("ctx ")
                .map(|s| s.replacen(": ", " ", 1).replace(" > ", ">"));
            let text = [Some(label), compact]
                .into_iter()
                .flatten()
                .find(|s| s.chars().count() <= width)
                .unwrap_or(badge);
            (text, if crash { t.failed } else { t.failed_other })
        }
        // Short outputs: got/asked when it fits, else SHORT (the value is
        // not of the output asked). Other warnings: the value with its mark
        // (`812.4 GAP`), else the value starred, in the warning colour.
        CellView::Flagged {
            mark, badge, value, ..
        } => (flagged(mark, badge, &value, width), t.warning),
        CellView::Value { text, tone } => (
            text,
            match tone {
                Tone::Plain => t.value,
                Tone::Baseline => t.baseline,
                Tone::Better => t.better,
                Tone::Worse => t.worse,
            },
        ),
    }
}

/// A flagged cell in `width` columns: its mark when it fits; the value
/// starred when the mark is the value's (`812.4 GAP` → `812.4*`); else the
/// badge.
fn flagged(mark: String, badge: String, value: &str, width: usize) -> String {
    let starred = (mark == format!("{value} {badge}")).then(|| format!("{value}*"));
    [Some(mark), starred]
        .into_iter()
        .flatten()
        .find(|s| s.chars().count() <= width)
        .unwrap_or(badge)
}

/// The cursor over a cell: the theme's `selected` style, except on a cell
/// already drawn reversed (a failed cell in `mono`), where reversing again
/// would hide the cursor: it is drawn un-reversed, bold and underlined.
fn selected(style: Style, cursor: Style) -> Style {
    if style.add_modifier.contains(Modifier::REVERSED)
        && cursor.add_modifier.contains(Modifier::REVERSED)
    {
        style
            .remove_modifier(Modifier::REVERSED)
            .add_modifier(Modifier::BOLD | Modifier::UNDERLINED)
    } else {
        style.patch(cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::theme::Theme;

    #[test]
    fn a_flagged_value_stays_in_a_narrow_column() {
        let gap = |w| flagged("812.4 GAP".into(), "GAP".into(), "812.4", w);
        assert_eq!(gap(10), "812.4 GAP");
        assert_eq!(gap(8), "812.4*");
        assert_eq!(gap(4), "GAP");
        // A short cell's value is not of the output asked: got/asked or SHORT.
        let short = |w| flagged("100/128".into(), "SHORT".into(), "66.7", w);
        assert_eq!(short(8), "100/128");
        assert_eq!(short(6), "SHORT");
    }

    #[test]
    fn the_cursor_shows_on_a_failed_cell_in_mono() {
        let t = Theme::mono();
        let plain = selected(t.value, t.selected);
        let failed = selected(t.failed, t.selected);
        // Neither the failed cell's own look nor the cursor's usual look.
        assert_ne!(failed, t.failed);
        assert!(!failed.add_modifier.contains(Modifier::REVERSED));
        assert!(failed.add_modifier.contains(Modifier::UNDERLINED));
        assert!(plain.add_modifier.contains(Modifier::REVERSED));
        // In colour the cursor is the theme's.
        let d = Theme::dark();
        assert_eq!(selected(d.failed, d.selected), d.failed.patch(d.selected));
    }
}
