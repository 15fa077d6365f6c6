//! The plain-text table `sweeptop gpus` prints: a status line, then one row per GPU,
//! "N/A" for any metric the card did not report.

use super::{GpuProcess, GpuSample, GpuSnapshot};
use crate::model::text::display;

const NA: &str = "N/A";

/// Column titles and whether the column is numeric (right-aligned).
const COLUMNS: [(&str, bool); 8] = [
    ("IDX", true),
    ("NAME", false),
    ("UTIL", true),
    ("MEM USED/TOTAL MiB", true),
    ("TEMP", true),
    ("POWER/LIMIT W", true),
    ("SM MHz", true),
    ("PROCESSES", false),
];

pub fn render_table(snap: &GpuSnapshot) -> String {
    let mut out = format!("GPU telemetry: {}", snap.status.label());
    if snap.status.is_live() {
        let n = snap.gpus.len();
        out.push_str(&format!(", {n} GPU{}", if n == 1 { "" } else { "s" }));
    }
    out.push('\n');
    if snap.gpus.is_empty() {
        return out;
    }

    let mut rows: Vec<[String; 8]> = vec![COLUMNS.map(|(title, _)| title.to_string())];
    rows.extend(snap.gpus.iter().map(row));
    let mut widths = [0usize; 8];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let last = i + 1 == row.len();
            if i > 0 {
                line.push_str("  ");
            }
            if last {
                line.push_str(cell);
            } else if COLUMNS[i].1 {
                line.push_str(&format!("{cell:>w$}", w = widths[i]));
            } else {
                line.push_str(&format!("{cell:<w$}", w = widths[i]));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if snap.gpus.iter().flat_map(|g| &g.processes).any(|p| p.ours) {
        out.push_str("* = process of the sweep's server\n");
    }
    out
}

fn row(gpu: &GpuSample) -> [String; 8] {
    [
        gpu.index.to_string(),
        display(&gpu.name).into_owned(),
        gpu.util_pct.map_or_else(na, |u| format!("{u}%")),
        pair(gpu.mem_used_mib, gpu.mem_total_mib, |v| v.to_string()),
        gpu.temp_c.map_or_else(na, |t| format!("{t}C")),
        pair(gpu.power_w, gpu.power_limit_w, |w| format!("{w:.0}")),
        gpu.sm_clock_mhz.map_or_else(na, |c| c.to_string()),
        processes(&gpu.processes),
    ]
}

fn na() -> String {
    NA.to_string()
}

/// "used / total", "N/A / total", or a single "N/A" when neither is known.
fn pair<T: Copy>(a: Option<T>, b: Option<T>, fmt: impl Fn(T) -> String) -> String {
    match (a, b) {
        (None, None) => na(),
        (a, b) => format!("{} / {}", a.map_or_else(na, &fmt), b.map_or_else(na, &fmt)),
    }
}

fn processes(procs: &[GpuProcess]) -> String {
    if procs.is_empty() {
        return "-".to_string();
    }
    procs
        .iter()
        .map(|p| {
            let mem = p.used_mib.map_or_else(na, |m| format!("{m} MiB"));
            let mark = if p.ours { "*" } else { "" };
            format!("{}{mark} {} ({mem})", p.pid, display(&p.name))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::super::{GpuSample, GpuStatus};
    use super::*;

    #[test]
    fn rows_show_na_for_missing_metrics() {
        let mut full = GpuSample::unknown(0);
        full.name = "NVIDIA H200".into();
        full.util_pct = Some(97);
        full.mem_used_mib = Some(107_328);
        full.mem_total_mib = Some(143_771);
        full.temp_c = Some(71);
        full.power_w = Some(612.4);
        full.power_limit_w = Some(700.0);
        full.sm_clock_mhz = Some(1980);
        full.processes = vec![GpuProcess {
            pid: 4242,
            name: "python3".into(),
            used_mib: Some(106_800),
            ours: true,
        }];
        let mut bare = GpuSample::unknown(1);
        bare.mem_total_mib = Some(143_771);
        let snap = GpuSnapshot {
            at_ms: 0,
            status: GpuStatus::Nvml {
                driver: Some("550.54.15".into()),
                cuda: None,
            },
            gpus: vec![full, bare],
        };
        let table = render_table(&snap);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "GPU telemetry: NVML (driver 550.54.15), 2 GPUs");
        assert!(lines[1].starts_with("IDX  NAME"), "{table}");
        assert!(lines[2].contains("97%"), "{table}");
        assert!(lines[2].contains("107328 / 143771"), "{table}");
        assert!(lines[2].contains("612 / 700"), "{table}");
        assert!(lines[2].contains("4242* python3 (106800 MiB)"), "{table}");
        assert!(lines[3].contains("N/A / 143771"), "{table}");
        assert_eq!(lines[3].matches("N/A").count(), 5, "{table}");
        assert_eq!(lines[4], "* = process of the sweep's server");
    }

    #[test]
    fn no_gpus_is_just_the_status_line() {
        let snap = GpuSnapshot {
            at_ms: 0,
            status: GpuStatus::DriverNotLoaded { detail: "x".into() },
            gpus: vec![],
        };
        assert_eq!(
            render_table(&snap),
            "GPU telemetry: NVIDIA driver not loaded\n"
        );
    }
}
