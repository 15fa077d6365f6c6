//! The chart popup (`c`): the selected workload's value against concurrency
//! (or context) for each config of the phase, the baseline marked, drawn with
//! ratatui's chart widget; `v` and `%` change the value in place.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Clear, Dataset, GraphType, LegendPosition, Paragraph};
use ratatui::Frame;

use crate::tui::app::App;
use crate::view::grid::{context_label, Chart as ChartData};

/// Series colours; the theme's text colour for a mono theme.
const COLOURS: [Color; 8] = [
    Color::LightBlue,
    Color::LightGreen,
    Color::Yellow,
    Color::LightMagenta,
    Color::LightCyan,
    Color::LightRed,
    Color::Blue,
    Color::Green,
];

fn y_text(y: f64) -> String {
    if y == 0.0 {
        "0".into()
    } else if y >= 100.0 {
        format!("{y:.0}")
    } else if y >= 10.0 {
        format!("{y:.1}")
    } else {
        format!("{y:.2}")
    }
}

pub fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let t = app.theme();
    let popup = Rect::new(
        area.x + 1,
        area.y + 1,
        area.width.saturating_sub(2),
        area.height.saturating_sub(2),
    );
    frame.render_widget(Clear, popup);
    let chart = app.ui.sel_col.and_then(|c| {
        app.grid
            .chart(&app.view, app.value_mode(), app.ui.sel_config, c)
    });
    let Some(chart) = chart.filter(|c| c.series.iter().any(|s| !s.points.is_empty())) else {
        return nothing_to_chart(frame, app, popup);
    };
    // Concurrency and context double: a log scale spaces them evenly.
    let fx = |x: f64| x.max(1.0).log2();
    let x0 = chart.xs.iter().copied().map(fx).fold(f64::MAX, f64::min);
    let x1 = chart.xs.iter().copied().map(fx).fold(f64::MIN, f64::max);
    let (x0, x1) = if x1 > x0 {
        (x0, x1)
    } else {
        (x0 - 1.0, x1 + 1.0)
    };
    let y1 = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0_f64, f64::max)
        * 1.1;
    let y1 = if y1 > 0.0 { y1 } else { 1.0 };
    let data: Vec<Vec<(f64, f64)>> = chart
        .series
        .iter()
        .map(|s| s.points.iter().map(|&(x, y)| (fx(x), y)).collect())
        .collect();
    let y_labels: Vec<Span> = [0.0, y1 / 2.0, y1]
        .into_iter()
        .map(|y| Span::styled(y_text(y), t.dim))
        .collect();
    let block = app
        .block(
            Line::styled(format!(" {} ", chart.title), t.popup_title),
            true,
        )
        .style(t.popup)
        .title_bottom(Line::styled(
            " v value · % p50/p90/p99 · any other key closes ",
            t.dim,
        ));
    let widget = Chart::new(datasets(app, &chart, &data))
        .block(block)
        .style(t.popup)
        .legend_position(Some(LegendPosition::TopLeft))
        .hidden_legend_constraints((
            ratatui::layout::Constraint::Ratio(1, 2),
            ratatui::layout::Constraint::Ratio(1, 2),
        ))
        .x_axis(
            Axis::default()
                .title(Span::styled(chart.x_label.clone(), t.dim))
                .style(t.dim)
                .bounds([x0, x1])
                .labels(x_labels(app, &chart)),
        )
        .y_axis(
            Axis::default()
                .title(Span::styled(chart.y_label.clone(), t.dim))
                .style(t.dim)
                .bounds([0.0, y1])
                .labels(y_labels),
        );
    frame.render_widget(widget, popup);
}

/// The popup when there is no line to draw: why.
fn nothing_to_chart(frame: &mut Frame, app: &App, popup: Rect) {
    let t = app.theme();
    let block = app
        .block(Line::styled(" Chart ", t.popup_title), true)
        .style(t.popup);
    let text = if app.ui.sel_col.is_none() {
        " select a cell (not a row label) to chart its workload"
    } else {
        " nothing to chart yet: no ok cell of this workload in this phase"
    };
    frame.render_widget(
        Paragraph::new(Line::styled(text, t.dim)).block(block),
        popup,
    );
}

/// A line per config with points (`data`, on the chart's scale), in its
/// colour, the baseline bold and named so.
fn datasets<'a>(app: &App, chart: &ChartData, data: &'a [Vec<(f64, f64)>]) -> Vec<Dataset<'a>> {
    let t = app.theme();
    let mono = t.text.fg.is_none() && t.failed.fg.is_none();
    let marker = if app.look.ascii {
        Marker::Dot
    } else {
        Marker::Braille
    };
    chart
        .series
        .iter()
        .zip(data)
        .filter(|(_, d)| !d.is_empty())
        .map(|(s, d)| {
            let mut style = if mono {
                Style::default()
            } else {
                Style::default().fg(COLOURS[s.config % COLOURS.len()])
            };
            let mut name = s.name.clone();
            if s.baseline {
                style = style.add_modifier(Modifier::BOLD);
                name.push_str(" (baseline)");
            }
            Dataset::default()
                .name(name)
                .marker(marker)
                .graph_type(GraphType::Line)
                .style(style)
                .data(d)
        })
        .collect()
}

/// The smallest, middle and largest x, labelled as the grid's column
/// headings are (concurrency or context).
fn x_labels(app: &App, chart: &ChartData) -> Vec<Span<'static>> {
    let mut xs = chart.xs.clone();
    xs.sort_by(f64::total_cmp);
    let pick = match xs.len() {
        0 => vec![],
        1 => vec![xs[0]],
        2 => vec![xs[0], xs[1]],
        n => vec![xs[0], xs[n / 2], xs[n - 1]],
    };
    pick.into_iter()
        .map(|x| Span::styled(context_label(x as u64), app.theme().dim))
        .collect()
}
