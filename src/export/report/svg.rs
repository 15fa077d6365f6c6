//! A line chart as inline SVG: each series is a config, x and y numeric,
//! points drawn and joined (a series with one point is a dot), a legend
//! under the plot. No script: the page must work without one.

use std::fmt::Write as _;

use super::esc;

/// Series colours, readable on light and dark backgrounds.
const PALETTE: [&str; 8] = [
    "#0969da", "#1a7f37", "#bc4c00", "#8250df", "#cf222e", "#1b7c83", "#9a6700", "#bf3989",
];

/// A series: its name, its colour (an index into the palette, the same for a
/// config in every chart) and its points.
pub(super) type Series = (String, usize, Vec<(f64, f64)>);

/// The plot's size and margins.
const W: f64 = 420.0;
const H: f64 = 260.0;
const LEFT: f64 = 52.0;
const RIGHT: f64 = 12.0;
const TOP: f64 = 24.0;
const BOTTOM: f64 = 40.0;

/// The largest value a chart plots: beyond it a value is a broken record
/// (a hand-edited file, an overflow), not a measurement.
const MAX_PLOTTED: f64 = 1e15;

/// The series with only the points a chart can place: finite, not negative
/// (a rate or a latency never is), at most [`MAX_PLOTTED`], and x above 0 on
/// a log scale; with how many were left out, which the chart says.
fn plottable(series: &[Series], log_x: bool) -> (Vec<Series>, usize) {
    let fits = |v: f64| v.is_finite() && (0.0..=MAX_PLOTTED).contains(&v);
    let mut left_out = 0;
    let kept = series
        .iter()
        .map(|(name, colour, points)| {
            let ok: Vec<(f64, f64)> = points
                .iter()
                .copied()
                .filter(|&(x, y)| fits(x) && fits(y) && (!log_x || x > 0.0))
                .collect();
            left_out += points.len() - ok.len();
            (name.clone(), *colour, ok)
        })
        .collect();
    (kept, left_out)
}

/// Grid lines above the y axis's 0.
const Y_TICKS: u32 = 4;

/// The smallest round step (1, 2, 2.5 or 5 × 10ⁿ) at least `raw`, so the y
/// axis reads 0, 25, 50, 75, 100 and not 0, 24.3, 48.6…; 1 for nothing.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 0.25;
    }
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|&step| step >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * mag)
}

/// The least room between two x labels, in pixels: closer ones are left
/// out, so none overlaps (ticks stay at every value).
const X_LABEL_GAP: f64 = 30.0;

/// Where a value lands in the plot: x on a log₂ scale when asked, y from 0
/// to a little over the largest value.
struct Scale {
    log_x: bool,
    x0: f64,
    x1: f64,
    y1: f64,
}

impl Scale {
    fn of(pts: &[(f64, f64)], log_x: bool) -> Scale {
        let (mut x0, mut x1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| {
            (a.min(Scale::fx(log_x, p.0)), b.max(Scale::fx(log_x, p.0)))
        });
        if pts.is_empty() {
            (x0, x1) = (0.0, 1.0);
        } else if x1 <= x0 {
            x0 -= 1.0;
            x1 += 1.0;
        }
        let top = pts.iter().map(|p| p.1).fold(0.0_f64, f64::max);
        let y1 = nice_step(top / Y_TICKS as f64) * Y_TICKS as f64;
        Scale { log_x, x0, x1, y1 }
    }

    /// x as it is spaced: its log₂ on a log scale.
    fn fx(log_x: bool, x: f64) -> f64 {
        if log_x {
            x.max(1e-9).log2()
        } else {
            x
        }
    }

    fn x(&self, x: f64) -> f64 {
        LEFT + (Scale::fx(self.log_x, x) - self.x0) / (self.x1 - self.x0) * (W - LEFT - RIGHT)
    }

    fn y(&self, y: f64) -> f64 {
        TOP + (1.0 - y / self.y1) * (H - TOP - BOTTOM)
    }
}

/// The chart, or nothing when no series has a point.
pub(super) fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> String {
    let (w, h) = (W, H);
    let left = LEFT;
    let (series, left_out) = plottable(series, log_x);
    let series = series.as_slice();
    let pts: Vec<(f64, f64)> = series
        .iter()
        .flat_map(|(_, _, p)| p.iter().copied())
        .collect();
    if pts.is_empty() && left_out == 0 {
        return String::new();
    }
    let scale = Scale::of(&pts, log_x);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<div class="chart"><svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{}" viewBox="0 0 {w} {}" role="img"><title>{}</title>"#,
        h + 18.0 * series.len().div_ceil(2) as f64,
        h + 18.0 * series.len().div_ceil(2) as f64,
        esc(title)
    );
    let _ = write!(
        s,
        r#"<text x="{left}" y="14" font-weight="600">{}</text>"#,
        esc(title)
    );
    if left_out > 0 {
        let _ = write!(
            s,
            r#"<text x="{}" y="14" text-anchor="end" class="dim">{left_out} point(s) left out: not finite or out of range</text>"#,
            w - RIGHT
        );
    }
    axes(&mut s, &scale, &pts, x_label, y_label);
    for (i, one) in series.iter().enumerate() {
        line(&mut s, &scale, i, one);
    }
    s.push_str("</svg></div>");
    s
}

/// The y grid with its labels, the x ticks at the distinct x values, the
/// axes and their labels.
fn axes(s: &mut String, scale: &Scale, pts: &[(f64, f64)], x_label: &str, y_label: &str) {
    let (w, h) = (W, H);
    let (left, right, top, bottom) = (LEFT, RIGHT, TOP, BOTTOM);
    // Y grid: a line with its label at each round step.
    for k in 0..=Y_TICKS {
        let y = scale.y1 * f64::from(k) / f64::from(Y_TICKS);
        let py = scale.y(y);
        let _ = write!(
            s,
            r#"<line class="grid" x1="{left}" x2="{}" y1="{py:.1}" y2="{py:.1}"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            w - right,
            left - 4.0,
            py + 4.0,
            short(y)
        );
    }
    // X ticks at the distinct x values.
    let mut xs: Vec<f64> = pts.iter().map(|p| p.0).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    // A tick at every value; a label where it does not touch the last one.
    let mut last_label = f64::NEG_INFINITY;
    for x in &xs {
        let px = scale.x(*x);
        let _ = write!(
            s,
            r#"<line class="axis" x1="{px:.1}" x2="{px:.1}" y1="{}" y2="{}"/>"#,
            h - bottom,
            h - bottom + 4.0,
        );
        if px - last_label >= X_LABEL_GAP {
            last_label = px;
            let _ = write!(
                s,
                r#"<text x="{px:.1}" y="{}" text-anchor="middle">{}</text>"#,
                h - bottom + 16.0,
                short(*x)
            );
        }
    }
    let _ = write!(
        s,
        r#"<line class="axis" x1="{left}" x2="{left}" y1="{top}" y2="{}"/><line class="axis" x1="{left}" x2="{}" y1="{}" y2="{}"/>"#,
        h - bottom,
        w - right,
        h - bottom,
        h - bottom
    );
    let _ = write!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle" class="dim">{}</text><text x="12" y="{}" transform="rotate(-90 12 {})" text-anchor="middle">{}</text>"#,
        (left + w - right) / 2.0,
        h - 6.0,
        esc(x_label),
        (top + h - bottom) / 2.0,
        (top + h - bottom) / 2.0,
        esc(y_label)
    );
}

/// The `i`th series: its points joined in x order, each with its values
/// on hover, and its entry in the legend (two per row under the plot).
fn line(s: &mut String, scale: &Scale, i: usize, (name, colour, points): &Series) {
    let colour = PALETTE[colour % PALETTE.len()];
    let mut p = points.clone();
    p.sort_by(|a, b| a.0.total_cmp(&b.0));
    let path: Vec<String> = p
        .iter()
        .map(|(x, y)| format!("{:.1},{:.1}", scale.x(*x), scale.y(*y)))
        .collect();
    if path.len() > 1 {
        let _ = write!(
            s,
            r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
    }
    for (x, y) in &p {
        let _ = write!(
            s,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{colour}"><title>{}: {} → {}</title></circle>"#,
            scale.x(*x),
            scale.y(*y),
            esc(name),
            short(*x),
            short(*y)
        );
    }
    // Legend, two per row under the plot.
    let lx = LEFT + (i % 2) as f64 * 180.0;
    let ly = H + 4.0 + (i / 2) as f64 * 18.0;
    let _ = write!(
        s,
        r#"<rect x="{lx}" y="{ly}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
        lx + 14.0,
        ly + 9.0,
        esc(name)
    );
}

/// `389`, `1.2k`, `0.85`, `12.5`.
fn short(x: f64) -> String {
    let a = x.abs();
    if a >= 10_000.0 {
        format!("{:.0}k", x / 1000.0)
    } else if a >= 1000.0 {
        format!("{:.1}k", x / 1000.0)
    } else if a >= 100.0 || a == 0.0 || (x.fract() == 0.0 && a >= 1.0) {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_axes_read_in_round_steps_and_no_two_x_labels_touch() {
        assert_eq!(nice_step(24.3), 25.0);
        assert_eq!(nice_step(0.13), 0.2);
        assert_eq!(nice_step(410.0), 500.0);
        assert_eq!(nice_step(1000.0), 1000.0);
        assert_eq!(nice_step(0.0), 0.25);
        // ITL values close together, as a throughput-latency curve has them.
        let pts: Vec<(f64, f64)> = (0..40).map(|i| (8.0 + f64::from(i) * 0.05, 97.3)).collect();
        let svg = line_chart("t", "x", "y", &[("a".into(), 0, pts)], false);
        let labels: Vec<f64> = svg
            .split("text-anchor=\"middle\">")
            .skip(1)
            .filter_map(|t| t.split('<').next()?.parse().ok())
            .collect();
        assert!(labels.len() >= 2 && labels.len() < 40, "{labels:?}");
        let xs: Vec<f64> = svg
            .split("<text x=\"")
            .skip(1)
            .filter(|t| t.contains("text-anchor=\"middle\">") && !t.contains("class=\"dim\""))
            .filter_map(|t| t.split('"').next()?.parse().ok())
            .collect();
        for w in xs.windows(2) {
            assert!(w[1] - w[0] >= X_LABEL_GAP || w[1] < w[0], "{xs:?}");
        }
        // 97.3 at the top: the y axis ends at 100 and reads 0, 25, 50, 75, 100.
        for label in ["0", "25", "50", "75", "100"] {
            assert!(
                svg.contains(&format!("text-anchor=\"end\">{label}</text>")),
                "{label}: {svg}"
            );
        }
        assert_eq!(svg.matches("<line class=\"axis\" x1=").count(), 40 + 2);
    }

    /// Every number written into the SVG's coordinates.
    fn coordinates(svg: &str) -> Vec<f64> {
        let mut out = Vec::new();
        for attr in [
            " x=\"", " y=\"", " cx=\"", " cy=\"", " x1=\"", " x2=\"", " y1=\"", " y2=\"",
        ] {
            for part in svg.split(attr).skip(1) {
                let v = part.split('"').next().unwrap_or("");
                out.push(v.parse::<f64>().unwrap_or(f64::NAN));
            }
        }
        for part in svg.split("points=\"").skip(1) {
            let v = part.split('"').next().unwrap_or("");
            for n in v.split([' ', ',']) {
                out.push(n.parse::<f64>().unwrap_or(f64::NAN));
            }
        }
        out
    }

    #[test]
    fn values_a_chart_cannot_place_are_left_out_and_said_the_axes_stay_finite() {
        let series: Vec<Series> = vec![
            (
                "a".into(),
                0,
                vec![(1.0, 100.0), (2.0, 1.7e308), (4.0, -5.0)],
            ),
            (
                "b".into(),
                1,
                vec![(8.0, f64::NAN), (f64::INFINITY, 3.0), (0.0, 2.0)],
            ),
        ];
        let svg = line_chart("t", "x", "y", &series, true);
        let coords = coordinates(&svg);
        assert!(!coords.is_empty());
        assert!(coords.iter().all(|v| v.is_finite()), "{svg}");
        assert!(svg.contains("5 point(s) left out"), "{svg}");
        // The one good point is drawn; the y axis is scaled to it.
        assert_eq!(svg.matches("<circle").count(), 1, "{svg}");
        // Nothing placeable at all: the chart says so with finite axes.
        let none: Vec<Series> = vec![("a".into(), 0, vec![(1.0, f64::NAN)])];
        let svg = line_chart("t", "x", "y", &none, false);
        assert!(svg.contains("1 point(s) left out"), "{svg}");
        assert!(coordinates(&svg).iter().all(|v| v.is_finite()), "{svg}");
    }
}
