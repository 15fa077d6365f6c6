//! The chart popup (`c`): the selected workload's value against concurrency
//! (or context) for each config of the phase, the baseline marked; `v` and
//! `%` change the value in place. Drawn on a canvas so each series has a
//! marker of its own at its points (`●`, `■`, `▲`…, or `o`, `+`, `x`… with
//! `--ascii`), told apart in a mono theme too, and the legend goes in the
//! plot's corner with no data under it, or below the plot when none is free.

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::canvas::{Canvas, Line as Segment};
use ratatui::widgets::{Clear, Paragraph};
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

/// Each series' marker at its points, by its place among the series.
const MARKERS: [&str; 8] = ["●", "■", "▲", "◆", "✚", "✖", "○", "□"];
const ASCII_MARKERS: [&str; 8] = ["o", "+", "x", "#", "@", "%", "&", "$"];

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

/// A series as drawn: its name for the legend, style, marker, and points on
/// the chart's scale (x as log₂).
struct Drawn {
    name: String,
    style: Style,
    marker: &'static str,
    points: Vec<(f64, f64)>,
}

/// Where the legend goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Corner {
    TopLeft,
    TopRight,
    BottomRight,
    BottomLeft,
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
    let inner = block.inner(popup);
    frame.render_widget(block, popup);
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
    let series = drawn(app, &chart, fx);
    let y_labels = [y1, y1 / 2.0, 0.0].map(y_text);
    let label_w = y_labels.iter().map(|l| l.len()).max().unwrap_or(1) as u16 + 1;
    // Rows: the y axis's title, the plot, the x axis, its labels, its title;
    // the legend's rows below the plot when no corner of it is free.
    let legend_w = series
        .iter()
        .map(|s| s.name.chars().count() as u16 + 4)
        .max()
        .unwrap_or(0);
    let legend_h = series.len() as u16;
    if inner.width < label_w + 8 || inner.height < 7 {
        return;
    }
    let mut plot = Rect::new(
        inner.x + label_w + 1,
        inner.y + 1,
        inner.width - label_w - 1,
        inner.height - 4,
    );
    let mut bounds = Bounds { x0, x1, y1, plot };
    let corner = free_corner(&bounds, &series, legend_w, legend_h);
    if corner.is_none() && plot.height > legend_h + 3 {
        plot.height -= legend_h;
        bounds.plot = plot;
    }
    frame.render_widget(
        Paragraph::new(Line::styled(chart.y_label.clone(), t.dim)),
        Rect::new(inner.x, inner.y, inner.width, 1),
    );
    axes(frame, app, &bounds, &y_labels, label_w, &chart);
    let line_marker = if app.look.ascii {
        Marker::Dot
    } else {
        Marker::Braille
    };
    let canvas = Canvas::default()
        .background_color(t.popup.bg.unwrap_or(Color::Reset))
        .marker(line_marker)
        .x_bounds([x0, x1])
        .y_bounds([0.0, y1])
        .paint(|ctx| {
            for s in &series {
                let colour = s.style.fg.unwrap_or(Color::Reset);
                for w in s.points.windows(2) {
                    ctx.draw(&Segment {
                        x1: w[0].0,
                        y1: w[0].1,
                        x2: w[1].0,
                        y2: w[1].1,
                        color: colour,
                    });
                }
            }
            ctx.layer();
            for s in &series {
                for &(x, y) in &s.points {
                    ctx.print(x, y, Span::styled(s.marker, s.style));
                }
            }
        });
    frame.render_widget(canvas, plot);
    if app.look.ascii {
        // The lines in dots, the markers alone in their own characters.
        let buf = frame.buffer_mut();
        for y in plot.top()..plot.bottom() {
            for x in plot.left()..plot.right() {
                if buf[(x, y)].symbol() == "•" {
                    buf[(x, y)].set_symbol(".");
                }
            }
        }
    }
    legend(frame, app, &bounds, &series, corner, legend_w, legend_h);
}

/// The plot's scale: x (log₂) and y bounds over its area.
struct Bounds {
    x0: f64,
    x1: f64,
    y1: f64,
    plot: Rect,
}

impl Bounds {
    /// The cell a point falls in.
    fn cell(&self, x: f64, y: f64) -> (u16, u16) {
        let w = f64::from(self.plot.width.saturating_sub(1));
        let h = f64::from(self.plot.height.saturating_sub(1));
        let cx = ((x - self.x0) / (self.x1 - self.x0) * w)
            .round()
            .clamp(0.0, w);
        let cy = ((1.0 - y / self.y1) * h).round().clamp(0.0, h);
        (self.plot.x + cx as u16, self.plot.y + cy as u16)
    }

    /// The legend's place in `corner`.
    fn legend_rect(&self, corner: Corner, w: u16, h: u16) -> Rect {
        let p = self.plot;
        let w = w.min(p.width);
        let h = h.min(p.height);
        let x = match corner {
            Corner::TopLeft | Corner::BottomLeft => p.x,
            Corner::TopRight | Corner::BottomRight => p.right() - w,
        };
        let y = match corner {
            Corner::TopLeft | Corner::TopRight => p.y,
            Corner::BottomLeft | Corner::BottomRight => p.bottom() - h,
        };
        Rect::new(x, y, w, h)
    }
}

/// The series with points, each with its colour (none in a mono theme),
/// marker and name (the baseline bold and named so).
fn drawn(app: &App, chart: &ChartData, fx: impl Fn(f64) -> f64) -> Vec<Drawn> {
    let t = app.theme();
    let mono = t.text.fg.is_none() && t.failed.fg.is_none();
    let markers = if app.look.ascii {
        ASCII_MARKERS
    } else {
        MARKERS
    };
    chart
        .series
        .iter()
        .filter(|s| !s.points.is_empty())
        .enumerate()
        .map(|(i, s)| {
            let mut style = if mono {
                t.popup
            } else {
                t.popup.fg(COLOURS[s.config % COLOURS.len()])
            };
            let mut name = s.name.clone();
            if s.baseline {
                style = style.add_modifier(Modifier::BOLD);
                name.push_str(" (baseline)");
            }
            let mut points: Vec<(f64, f64)> = s.points.iter().map(|&(x, y)| (fx(x), y)).collect();
            points.sort_by(|a, b| a.0.total_cmp(&b.0));
            Drawn {
                name,
                style,
                marker: markers[i % markers.len()],
                points,
            }
        })
        .collect()
}

/// The first corner (top left, top right, bottom right, bottom left) where
/// the legend covers no point and no line of the chart; `None` when each
/// would.
fn free_corner(b: &Bounds, series: &[Drawn], w: u16, h: u16) -> Option<Corner> {
    let mut covered: Vec<(u16, u16)> = Vec::new();
    for s in series {
        for &(x, y) in &s.points {
            covered.push(b.cell(x, y));
        }
        // The lines between points, a sample per column.
        for p in s.points.windows(2) {
            let steps = u32::from(b.plot.width.max(1));
            for k in 0..=steps {
                let f = f64::from(k) / f64::from(steps);
                let x = p[0].0 + (p[1].0 - p[0].0) * f;
                let y = p[0].1 + (p[1].1 - p[0].1) * f;
                covered.push(b.cell(x, y));
            }
        }
    }
    [
        Corner::TopLeft,
        Corner::TopRight,
        Corner::BottomRight,
        Corner::BottomLeft,
    ]
    .into_iter()
    .find(|&c| {
        let r = b.legend_rect(c, w, h);
        !covered
            .iter()
            .any(|&(x, y)| x >= r.x && x < r.right() && y >= r.y && y < r.bottom())
    })
}

/// The legend: each series' marker and name, in the free corner, or below
/// the plot (over the x axis's title) when no corner is free.
fn legend(
    frame: &mut Frame,
    app: &App,
    b: &Bounds,
    series: &[Drawn],
    corner: Option<Corner>,
    w: u16,
    h: u16,
) {
    let t = app.theme();
    let area = match corner {
        Some(c) => b.legend_rect(c, w, h),
        None => {
            let y = b.plot.bottom() + 3;
            let bottom = frame.area().bottom().saturating_sub(1);
            Rect::new(
                b.plot.x,
                y.min(bottom),
                w.min(b.plot.width),
                h.min(bottom.saturating_sub(y.min(bottom))),
            )
        }
    };
    let lines: Vec<Line> = series
        .iter()
        .map(|s| {
            Line::from(vec![
                Span::styled(format!(" {} ", s.marker), s.style),
                Span::styled(format!("{} ", s.name), s.style),
            ])
        })
        .collect();
    frame.render_widget(Clear, area);
    frame.render_widget(Paragraph::new(lines).style(t.popup), area);
}

/// The axes: the y labels at the top, middle and bottom of the plot, the x
/// axis with a label under each x that has room, and its title.
fn axes(
    frame: &mut Frame,
    app: &App,
    b: &Bounds,
    y_labels: &[String; 3],
    label_w: u16,
    chart: &ChartData,
) {
    let t = app.theme();
    let p = b.plot;
    let buf = frame.buffer_mut();
    let rows = [p.y, p.y + p.height.saturating_sub(1) / 2, p.bottom() - 1];
    for (label, row) in y_labels.iter().zip(rows) {
        let x =
            p.x.saturating_sub(1 + label.len() as u16)
                .max(p.x - label_w - 1);
        buf.set_string(x, row, label, t.dim);
    }
    for y in p.top()..p.bottom() {
        buf.set_string(p.x - 1, y, "│", t.dim);
    }
    buf.set_string(p.x - 1, p.bottom(), "└", t.dim);
    buf.set_string(p.x, p.bottom(), "─".repeat(p.width as usize), t.dim);
    let mut xs = chart.xs.clone();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let mut free_from = p.x;
    for x in xs {
        let (col, _) = b.cell(x.max(1.0).log2(), 0.0);
        let label = context_label(x as u64);
        let start = col.saturating_sub(label.len() as u16 / 2).max(p.x);
        if start < free_from || start + label.len() as u16 > p.right() {
            continue;
        }
        buf.set_string(col, p.bottom(), "┴", t.dim);
        buf.set_string(start, p.bottom() + 1, &label, t.dim);
        free_from = start + label.len() as u16 + 1;
    }
    let title = &chart.x_label;
    let x = p.x + p.width.saturating_sub(title.len() as u16) / 2;
    buf.set_string(x, p.bottom() + 2, title, t.dim);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn series(points: &[(f64, f64)]) -> Drawn {
        Drawn {
            name: "s".into(),
            style: Style::default(),
            marker: "o",
            points: points.to_vec(),
        }
    }

    #[test]
    fn the_legend_takes_a_corner_with_no_data_or_goes_below() {
        let b = Bounds {
            x0: 0.0,
            x1: 10.0,
            y1: 10.0,
            plot: Rect::new(0, 0, 60, 20),
        };
        // A line rising from bottom left to top right: top left is free.
        let rising = [series(&[(0.0, 0.0), (10.0, 10.0)])];
        assert_eq!(free_corner(&b, &rising, 20, 3), Some(Corner::TopLeft));
        // Falling: top left is taken, top right is free.
        let falling = [series(&[(0.0, 10.0), (10.0, 0.0)])];
        assert_eq!(free_corner(&b, &falling, 20, 3), Some(Corner::TopRight));
        // A point in every corner: none is free, the legend goes below.
        let corners = [
            series(&[(0.0, 10.0)]),
            series(&[(10.0, 10.0)]),
            series(&[(10.0, 0.0)]),
            series(&[(0.0, 0.0)]),
        ];
        assert_eq!(free_corner(&b, &corners, 20, 4), None);
    }
}
