//! The GPU panel: per-GPU utilisation and memory bars, temperature, power and a
//! utilisation sparkline; one row per GPU (or several GPUs per row) when space is
//! short; the telemetry state ("NVML not found", "no GPUs") when there is nothing
//! to show.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;

use super::{bar, fit, Symbols};
use crate::model::{GpuSample, GpuStatus};
use crate::tui::app::App;
use crate::tui::theme::Theme;
use crate::tui::ui::Focus;
use crate::view::state::History;

/// Temperatures from here on are drawn hot.
const HOT_C: u32 = 85;

pub fn draw(frame: &mut Frame, app: &App, area: Rect) {
    let gpu = &app.view.gpu;
    let status = gpu.status();
    let block = app.block(title(app), app.ui.focus == Focus::Gpu);
    let inner = block.inner(area);
    frame.render_widget(block, area);
    // A state without devices is explained inside the panel.
    let snap = match (&gpu.latest, status) {
        (None, _) => {
            return message(frame, app, inner, &["waiting for the first sample…"]);
        }
        (Some(_), Some(st)) if !st.is_live() => {
            let lines = status_lines(st);
            let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
            return message(frame, app, inner, &refs);
        }
        (Some(s), _) => s,
    };
    if snap.gpus.is_empty() {
        return message(frame, app, inner, &["no GPUs"]);
    }
    let active = app.view.active_gpus().unwrap_or_default();
    let panel = Panel {
        gpus: &snap.gpus,
        active: &active,
        w: inner.width as usize,
        h: inner.height as usize,
    };
    let (n, w, h) = (panel.gpus.len(), panel.w, panel.h);
    // Zoomed (Tab to the GPUs, then `z`), every GPU gets the full form and,
    // with the rows to spare, a utilisation chart as nvtop draws it.
    let zoomed = app.ui.zoom && app.ui.focus == Focus::Gpu;
    let lines = if (n < 8 || zoomed) && n * 3 <= h && w >= 40 {
        full_rows(app, &panel)
    } else if n <= h {
        compact_rows(app, &panel, zoomed)
    } else {
        packed_rows(app, &panel)
    };
    frame.render_widget(Paragraph::new(lines), inner);
}

/// The panel's title: the telemetry source and, for a recorded run, when
/// its last sample was taken, so it is not read as the GPUs' state now or
/// as the selected config's.
fn title(app: &App) -> String {
    let sym = app.symbols();
    let gpu = &app.view.gpu;
    let when = match (&gpu.latest, app.read_only()) {
        (Some(s), true) => format!(
            "{}last sample {}",
            sym.sep,
            crate::model::Timestamp::from_unix_ms(i64::try_from(s.at_ms).unwrap_or(0)).clock()
        ),
        _ => String::new(),
    };
    match gpu.status() {
        Some(s) if s.is_live() => format!(" GPUs{}{}{when} ", sym.sep, s.label()),
        _ => format!(" GPUs{when} "),
    }
}

/// Why there are no GPU figures, in the panel's words.
fn status_lines(st: &GpuStatus) -> Vec<String> {
    match st {
        GpuStatus::LibraryNotFound { detail } => vec![
            "NVML not found".into(),
            detail.clone(),
            "GPU telemetry is off; the sweep runs without it".into(),
        ],
        GpuStatus::DriverNotLoaded { detail } => vec![
            "NVIDIA driver not loaded".into(),
            detail.clone(),
            "GPU telemetry is off; the sweep runs without it".into(),
        ],
        GpuStatus::NoGpus => vec!["no GPUs".into(), "NVML sees no devices".into()],
        GpuStatus::Error { detail } => vec!["NVML error".into(), detail.clone()],
        GpuStatus::Disabled => vec!["GPU telemetry off (--no-gpu)".into()],
        GpuStatus::Nvml { .. } | GpuStatus::Simulated => vec![],
    }
}

/// The GPUs of the latest sample, those the running configs use, and the
/// panel's room for them.
struct Panel<'a> {
    gpus: &'a [GpuSample],
    active: &'a [u32],
    w: usize,
    h: usize,
}

/// Three rows per GPU, each with its history below when there are rows to
/// spare: utilisation, and memory in use beside it when there are more.
fn full_rows(app: &App, p: &Panel) -> Vec<Line<'static>> {
    let Panel { gpus, active, w, h } = *p;
    let n = gpus.len();
    let chart_h = ((h - n * 3) / n).min(24);
    let mut lines = Vec::new();
    for g in gpus {
        lines.extend(full(app, g, active.contains(&g.index), w));
        if chart_h >= 8 {
            // Half each, the memory's under its title.
            let util_h = chart_h / 2;
            lines.extend(chart(app, &app.view.gpu.util, g.index, w, util_h));
            lines.push(Line::styled(" memory in use", app.theme().dim));
            lines.extend(chart(
                app,
                &app.view.gpu.mem,
                g.index,
                w,
                chart_h - util_h - 1,
            ));
        } else if chart_h >= 3 {
            lines.extend(chart(app, &app.view.gpu.util, g.index, w, chart_h));
        }
    }
    lines
}

/// One row per GPU; zoomed with rows to spare, the running config's GPUs
/// (else all) as one chart of their mean utilisation.
fn compact_rows(app: &App, p: &Panel, zoomed: bool) -> Vec<Line<'static>> {
    let Panel { gpus, active, w, h } = *p;
    let n = gpus.len();
    let columns = Columns::fit(gpus, w);
    let mut lines: Vec<Line> = gpus
        .iter()
        .map(|g| compact(app, g, active.contains(&g.index), &columns))
        .collect();
    // Rows to spare (zoomed, or a tall panel): the running config's GPUs
    // (else all) as charts of their mean utilisation, and memory in use
    // when there is room for both.
    let spare = h.saturating_sub(n);
    if spare >= 5 && (zoomed || spare >= 8) {
        let which: Vec<u32> = if active.is_empty() {
            gpus.iter().map(|g| g.index).collect()
        } else {
            active.to_vec()
        };
        let list = which
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let dim = app.theme().dim;
        let both = spare >= 12;
        let util_h = if both { (spare - 2) / 2 } else { spare - 1 };
        lines.push(Line::styled(
            format!(" mean utilisation of GPU {list}"),
            dim,
        ));
        lines.extend(mean_chart(app, &app.view.gpu.util, &which, w, util_h));
        if both {
            lines.push(Line::styled(
                format!(" mean memory in use of GPU {list}"),
                dim,
            ));
            lines.extend(mean_chart(
                app,
                &app.view.gpu.mem,
                &which,
                w,
                spare - 2 - util_h,
            ));
        }
    }
    lines
}

/// Several GPUs per row; then, on rows of their own when there are any,
/// whose GPUs are whose (configs side by side) and the hottest GPU with the
/// total draw (packed rows have no room for temperature and power).
fn packed_rows(app: &App, p: &Panel) -> Vec<Line<'static>> {
    let Panel { gpus, active, w, h } = *p;
    let t = app.theme();
    let sym = app.symbols();
    let per_row = gpus.len().div_ceil(h.max(1));
    let cell_w = w / per_row;
    let mut lines: Vec<Line> = gpus
        .chunks(per_row)
        .map(|chunk| {
            let spans: Vec<Span> = chunk
                .iter()
                .flat_map(|g| packed(t, sym, g, active.contains(&g.index), cell_w))
                .collect();
            Line::from(spans)
        })
        .collect();
    let live: Vec<_> = app.view.live_configs().collect();
    if live.len() > 1 && lines.len() < h {
        let owners: Vec<String> = live
            .iter()
            .map(|c| {
                let gpus: Vec<String> = app.view.gpus_of(c).iter().map(u32::to_string).collect();
                format!("{} {}", gpus.join(","), c.id)
            })
            .collect();
        lines.push(Line::styled(
            fit(&format!(" {}", owners.join(sym.sep)), w, false),
            t.gpu_active,
        ));
    }
    if lines.len() < h {
        let hottest = gpus.iter().filter_map(|g| g.temp_c).max();
        let power: Vec<f64> = gpus.iter().filter_map(|g| g.power_w).collect();
        let mut parts = Vec::new();
        if let Some(c) = hottest {
            parts.push(format!("hottest {c}C"));
        }
        if !power.is_empty() {
            parts.push(format!("total {:.0}W", power.iter().sum::<f64>()));
        }
        if !parts.is_empty() {
            lines.push(Line::styled(format!(" {}", parts.join(sym.sep)), t.dim));
        }
    }
    lines
}

/// The config a GPU runs for, when several configs run side by side.
fn owner(app: &App, gpu: u32) -> Option<&str> {
    app.view.live_configs().nth(1)?;
    app.view.owner_of(gpu)
}

fn message(frame: &mut Frame, app: &App, area: Rect, text: &[&str]) {
    let t = app.theme();
    let lines: Vec<Line> = text
        .iter()
        .enumerate()
        .map(|(i, l)| Line::styled(l.to_string(), if i == 0 { t.title } else { t.dim }))
        .collect();
    let y = area.y + area.height.saturating_sub(lines.len() as u16) / 2;
    let h = (lines.len() as u16).min(area.height);
    frame.render_widget(
        Paragraph::new(lines)
            .centered()
            .wrap(ratatui::widgets::Wrap { trim: true }),
        Rect::new(area.x, y, area.width, h.max(area.height.min(3))),
    );
}

fn gib(mib: u64) -> String {
    let g = mib as f64 / 1024.0;
    if g >= 100.0 {
        format!("{g:.0}")
    } else {
        format!("{g:.1}")
    }
}

fn mem_text(g: &GpuSample) -> String {
    match (g.mem_used_mib, g.mem_total_mib) {
        (Some(u), Some(t)) => format!("{}/{}G", gib(u), gib(t)),
        (Some(u), None) => format!("{}G", gib(u)),
        _ => "N/A".into(),
    }
}

fn mem_frac(g: &GpuSample) -> f64 {
    match (g.mem_used_mib, g.mem_total_mib) {
        (Some(u), Some(t)) if t > 0 => u as f64 / t as f64,
        _ => 0.0,
    }
}

fn util_text(g: &GpuSample) -> String {
    g.util_pct
        .map(|u| format!("{u:>3}%"))
        .unwrap_or_else(|| " N/A".into())
}

fn temp_span(t: &Theme, g: &GpuSample) -> Span<'static> {
    match g.temp_c {
        Some(c) => Span::styled(
            format!("{c:>3}C"),
            if c >= HOT_C { t.gpu_hot } else { t.text },
        ),
        None => Span::styled(" N/A", t.dim),
    }
}

fn power_text(g: &GpuSample, with_limit: bool) -> String {
    match (g.power_w, g.power_limit_w) {
        (Some(p), Some(l)) if with_limit => format!("{p:.0}/{l:.0}W"),
        (Some(p), _) => format!("{p:.0}W"),
        _ => "N/A W".into(),
    }
}

fn marker(app: &App, active: bool) -> Span<'static> {
    let t = app.theme();
    if active {
        Span::styled(app.symbols().active_gpu.to_string(), t.gpu_active)
    } else {
        Span::raw(" ")
    }
}

/// A GPU's history as a bar chart `h` rows high, newest sample at the
/// right, one column per sample, with a 0-100 % scale on the left.
fn chart(app: &App, history: &History, index: u32, w: usize, h: usize) -> Vec<Line<'static>> {
    let seen = app.view.gpu.seen.get(&index).copied().unwrap_or(0);
    let series: Vec<Option<u8>> = history
        .get(&index)
        .map(|h| h.iter().copied().collect())
        .unwrap_or_default();
    bars(app, &series, seen, w, h)
}

/// The mean of some GPUs' histories over time: one chart for many GPUs when
/// each cannot have its own.
fn mean_chart(
    app: &App,
    history: &History,
    indices: &[u32],
    w: usize,
    h: usize,
) -> Vec<Line<'static>> {
    let histories: Vec<_> = indices.iter().filter_map(|i| history.get(i)).collect();
    let len = histories.iter().map(|h| h.len()).max().unwrap_or(0);
    let series: Vec<Option<u8>> = (0..len)
        .map(|k| {
            // Aligned at the newest sample.
            let vals: Vec<u32> = histories
                .iter()
                .filter_map(|h| {
                    let at = (k + h.len()).checked_sub(len)?;
                    h.get(at).copied().flatten().map(u32::from)
                })
                .collect();
            let n = u32::try_from(vals.len()).ok().filter(|n| *n > 0)?;
            u8::try_from(vals.iter().sum::<u32>() / n).ok()
        })
        .collect();
    let seen = indices
        .iter()
        .filter_map(|i| app.view.gpu.seen.get(i))
        .copied()
        .max()
        .unwrap_or(0);
    bars(app, &series, seen, w, h)
}

/// How many samples one column of a history chart stands for, unless zoomed:
/// a column keeps its place for that many samples (only the newest changes),
/// so the chart does not scroll, and resend itself over SSH, every second.
const SAMPLES_PER_COLUMN: u64 = 5;

/// `series` (the last samples, the newest being the `seen`-th) as bars, `h`
/// rows high: a column per [`SAMPLES_PER_COLUMN`] samples (their mean), one
/// per sample when zoomed.
fn bars(app: &App, series: &[Option<u8>], seen: u64, w: usize, h: usize) -> Vec<Line<'static>> {
    let t = app.theme();
    let ascii = app.look.ascii;
    let gutter = 6;
    let cols = w.saturating_sub(gutter + 1);
    let per = if app.ui.zoom { 1 } else { SAMPLES_PER_COLUMN };
    let columns = columns_of(series, seen, per);
    let history = &columns[columns.len().saturating_sub(cols)..];
    let pad = cols.saturating_sub(history.len());
    // Eighths of a row for each filled level; the top level is a full row.
    const EIGHTHS: [&str; 9] = [" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"];
    (0..h)
        .map(|row| {
            let scale = match row {
                0 => "100% ",
                r if r == h - 1 => "  0% ",
                r if r == h / 2 => " 50% ",
                _ => "     ",
            };
            // Eighths below this row's bottom edge.
            let below = (h - 1 - row) * 8;
            let mut bars = " ".repeat(pad);
            for u in history {
                let filled = u.map_or(0, |u| (usize::from(u) * h * 8 + 50) / 100);
                let level = filled.saturating_sub(below).min(8);
                bars.push_str(match (ascii, level) {
                    (false, l) => EIGHTHS[l],
                    (true, 8) => "#",
                    (true, l) if l >= 4 => "+",
                    (true, _) => " ",
                });
            }
            Line::from(vec![
                Span::styled(format!(" {scale}"), t.dim),
                Span::styled(bars, t.sparkline),
            ])
        })
        .collect()
}

/// `series` in columns of `per` samples each, aligned to the samples seen
/// since the start (the last column may be partial): each the mean of its
/// reported samples, `None` when none was.
fn columns_of(series: &[Option<u8>], seen: u64, per: u64) -> Vec<Option<u8>> {
    let per = per.max(1);
    let first = seen.saturating_sub(series.len() as u64);
    let mut out: Vec<(u32, u32)> = Vec::new();
    let mut bucket = None;
    for (k, v) in series.iter().enumerate() {
        let b = (first + k as u64) / per;
        if bucket != Some(b) {
            bucket = Some(b);
            out.push((0, 0));
        }
        if let (Some(v), Some(last)) = (v, out.last_mut()) {
            last.0 += u32::from(*v);
            last.1 += 1;
        }
    }
    out.into_iter()
        .map(|(sum, n)| (n > 0).then(|| u8::try_from(sum / n).unwrap_or(100)))
        .collect()
}

/// The last `w` utilisation samples as a sparkline.
fn sparkline(app: &App, index: u32, w: usize) -> Span<'static> {
    let sym = app.symbols();
    let Some(h) = app.view.gpu.util.get(&index) else {
        return Span::raw(" ".repeat(w));
    };
    let mut s = String::new();
    let skip = h.len().saturating_sub(w);
    for _ in 0..w.saturating_sub(h.len()) {
        s.push(' ');
    }
    for u in h.iter().skip(skip) {
        match u {
            Some(u) => {
                let i = (*u as usize * (sym.spark.len() - 1) + 50) / 100;
                s.push_str(sym.spark[i.min(sym.spark.len() - 1)]);
            }
            None => s.push(' '),
        }
    }
    Span::styled(s, app.theme().sparkline)
}

/// Three rows per GPU: name, temperature and power; utilisation bar and
/// sparkline; memory bar.
fn full(app: &App, g: &GpuSample, active: bool, w: usize) -> Vec<Line<'static>> {
    let t = app.theme();
    let sym = app.symbols();
    let power = power_text(g, true);
    let right = format!("  {power}");
    let name_w = w.saturating_sub(4 + 5 + right.chars().count());
    let l1 = Line::from(vec![
        marker(app, active),
        Span::styled(format!("{:<2}", g.index), t.title),
        Span::styled(
            fit(
                &match owner(app, g.index) {
                    Some(o) => format!("{o}{}{}", sym.sep, g.name),
                    None => g.name.clone(),
                },
                name_w,
                false,
            ),
            t.text,
        ),
        Span::raw(" "),
        temp_span(t, g),
        Span::styled(right, t.text),
    ]);
    let bar_w = (w.saturating_sub(14) / 2).clamp(6, 30);
    let mut l2 = vec![Span::styled("   util ", t.dim)];
    l2.extend(bar(
        sym,
        g.util_pct.unwrap_or(0) as f64 / 100.0,
        bar_w,
        t.gpu_util,
        t.gpu_bar_empty,
    ));
    l2.push(Span::styled(util_text(g), t.text));
    let spark_w = w.saturating_sub(8 + bar_w + 4 + 1);
    l2.push(Span::raw(" "));
    l2.push(sparkline(app, g.index, spark_w));
    let mut l3 = vec![Span::styled("   mem  ", t.dim)];
    l3.extend(bar(sym, mem_frac(g), bar_w, t.gpu_mem, t.gpu_bar_empty));
    l3.push(Span::styled(format!(" {}", mem_text(g)), t.text));
    vec![l1, Line::from(l2), Line::from(l3)]
}

/// Column widths shared by every row of the compact form, so bars line up.
struct Columns {
    mem_w: usize,
    power_w: usize,
    bar_w: usize,
    spark_w: usize,
    extras: bool,
}

impl Columns {
    /// Parts drop out as the width shrinks: sparkline, then temperature and
    /// power, then the bars.
    fn fit(gpus: &[GpuSample], w: usize) -> Columns {
        let mem_w = gpus.iter().map(|g| mem_text(g).len()).max().unwrap_or(3);
        let power_w = gpus
            .iter()
            .map(|g| power_text(g, false).len())
            .max()
            .unwrap_or(3);
        // marker + index 3, util 4, spaces.
        let fixed = 3 + 4 + 1 + mem_w;
        let extras_w = 1 + 4 + 1 + power_w;
        let extras = w >= fixed + extras_w + 2 * 4;
        let room = w.saturating_sub(fixed + if extras { extras_w } else { 0 });
        let (bar_w, spark_w) = if room >= 36 {
            (10, room - 2 * 11)
        } else {
            ((room / 2).saturating_sub(1), 0)
        };
        Columns {
            mem_w,
            power_w,
            bar_w,
            spark_w,
            extras,
        }
    }
}

/// One row per GPU.
fn compact(app: &App, g: &GpuSample, active: bool, c: &Columns) -> Line<'static> {
    let t = app.theme();
    let sym = app.symbols();
    let mut spans = vec![
        marker(app, active),
        Span::styled(format!("{:<2}", g.index), t.title),
    ];
    if c.bar_w >= 3 {
        spans.extend(bar(
            sym,
            g.util_pct.unwrap_or(0) as f64 / 100.0,
            c.bar_w,
            t.gpu_util,
            t.gpu_bar_empty,
        ));
    }
    spans.push(Span::styled(util_text(g), t.text));
    spans.push(Span::raw(" "));
    if c.bar_w >= 3 {
        spans.extend(bar(sym, mem_frac(g), c.bar_w, t.gpu_mem, t.gpu_bar_empty));
        spans.push(Span::raw(" "));
    }
    spans.push(Span::styled(fit(&mem_text(g), c.mem_w, true), t.text));
    if c.extras {
        spans.push(Span::raw(" "));
        spans.push(temp_span(t, g));
        spans.push(Span::styled(
            format!(" {}", fit(&power_text(g, false), c.power_w, true)),
            t.text,
        ));
    }
    // With configs side by side, the room of the sparkline says whose GPU it is.
    match owner(app, g.index) {
        Some(o) => {
            spans.push(Span::raw(" "));
            spans.push(Span::styled(fit(o, c.spark_w.max(12), false), t.gpu_active));
        }
        None if c.spark_w > 2 => {
            spans.push(Span::raw(" "));
            spans.push(sparkline(app, g.index, c.spark_w - 1));
        }
        None => {}
    }
    Line::from(spans)
}

/// A GPU in a fraction of a row: `●0  87% 41G`.
fn packed(t: &Theme, sym: &Symbols, g: &GpuSample, active: bool, w: usize) -> Vec<Span<'static>> {
    let mark = if active { sym.active_gpu } else { " " };
    let mem = g.mem_used_mib.map(gib).unwrap_or_else(|| "N/A".into());
    let text = format!("{mark}{:<2}{} {mem}G", g.index, util_text(g));
    let style: Style = if active { t.gpu_active } else { t.text };
    vec![Span::styled(fit(&text, w, false), style)]
}

#[cfg(test)]
mod history_tests {
    use super::columns_of;

    #[test]
    fn a_history_column_keeps_its_place_as_samples_come() {
        // 12 samples seen, the last 7 kept: columns of 5 by absolute index
        // (samples 5..9, then 10..11, partial).
        let series = [
            Some(10),
            Some(20),
            None,
            Some(40),
            Some(50),
            Some(60),
            Some(70),
        ];
        assert_eq!(columns_of(&series, 12, 5), vec![Some(30), Some(65)]);
        // One more sample: only the newest column changes.
        let mut more = series.to_vec();
        more.push(Some(0));
        assert_eq!(columns_of(&more, 13, 5), vec![Some(30), Some(43)]);
        // A column with nothing reported reads as none; one per sample when zoomed.
        assert_eq!(columns_of(&[None, None], 2, 5), vec![None]);
        assert_eq!(
            columns_of(&[Some(1), Some(2)], 2, 1),
            vec![Some(1), Some(2)]
        );
    }
}
