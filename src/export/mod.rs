//! Views of a run's results: CSV and JSON (one record per cell, every field) and
//! Markdown (the grid). Reads recorded results; never recomputes metrics.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::plan::Plan;
use crate::store::{CellRecord, Status};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    Json,
    Md,
}

/// Columns of the CSV, in order: the one table the CSV is written from.
const COLUMNS: &[&str] = &[
    "cell",
    "config",
    "phase",
    "workload",
    "context_tokens",
    "concurrency",
    "status",
    "failure_kind",
    "failure_source",
    "failure_message",
    "requests",
    "failed_requests",
    "short_requests",
    "output_tokens",
    "duration_s",
    "output_tok_s",
    "request_per_s",
    "decode_tok_s_p50",
    "ttft_ms_p50",
    "ttft_ms_p90",
    "ttft_ms_p99",
    "itl_ms_p50",
    "itl_ms_p99",
    "tpot_ms_p50",
    "e2e_ms_p50",
    "e2e_ms_p99",
    "prompt_tokens_mean",
    "tokens_estimated",
    "accept_len",
    "gpu_mem_peak_mib",
    "gpu_util_mean",
    "started_at",
    "finished_at",
];

fn field(r: &CellRecord, col: &str) -> String {
    let f = |v: f64| format!("{v:.3}");
    let of = |v: Option<f64>| v.map(f).unwrap_or_default();
    let m = r.metrics.as_ref();
    match col {
        "cell" => r.cell.clone(),
        "config" => r.config.clone(),
        "phase" => r.phase.clone(),
        "workload" => r.workload.clone(),
        "context_tokens" => r.context_tokens.to_string(),
        "concurrency" => r.concurrency.to_string(),
        "status" => r.status.as_str().to_string(),
        "failure_kind" => r
            .failure
            .as_ref()
            .map(|x| x.kind.as_str().to_string())
            .unwrap_or_default(),
        "failure_source" => r
            .failure
            .as_ref()
            .and_then(|x| serde_json::to_value(x.source).ok())
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        "failure_message" => r
            .failure
            .as_ref()
            .map(|x| x.message.clone())
            .unwrap_or_default(),
        "started_at" => r.started_at.clone(),
        "finished_at" => r.finished_at.clone(),
        _ => {
            let Some(m) = m else { return String::new() };
            match col {
                "requests" => m.requests.to_string(),
                "failed_requests" => m.failed_requests.to_string(),
                "short_requests" => m.short_requests.to_string(),
                "output_tokens" => m.output_tokens.to_string(),
                "duration_s" => f(m.duration_s),
                "output_tok_s" => f(m.output_tok_s),
                "request_per_s" => f(m.request_per_s),
                "decode_tok_s_p50" => of(m.decode_tok_s_p50),
                "ttft_ms_p50" => f(m.ttft_ms_p50),
                "ttft_ms_p90" => f(m.ttft_ms_p90),
                "ttft_ms_p99" => f(m.ttft_ms_p99),
                "itl_ms_p50" => of(m.itl_ms_p50),
                "itl_ms_p99" => of(m.itl_ms_p99),
                "tpot_ms_p50" => of(m.tpot_ms_p50),
                "e2e_ms_p50" => f(m.e2e_ms_p50),
                "e2e_ms_p99" => f(m.e2e_ms_p99),
                "prompt_tokens_mean" => f(m.prompt_tokens_mean),
                "tokens_estimated" => m.tokens_estimated.to_string(),
                "accept_len" => of(m.accept_len),
                "gpu_mem_peak_mib" => m
                    .gpu_mem_peak_mib
                    .map(|v| v.to_string())
                    .unwrap_or_default(),
                "gpu_util_mean" => of(m.gpu_util_mean),
                _ => String::new(),
            }
        }
    }
}

fn csv_escape(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn render(format: Format, plan: Option<&Plan>, records: &[CellRecord]) -> String {
    match format {
        Format::Csv => csv(records),
        Format::Json => serde_json::to_string_pretty(records).unwrap_or_default() + "\n",
        Format::Md => markdown(plan, records),
    }
}

pub fn csv(records: &[CellRecord]) -> String {
    let mut s = COLUMNS.join(",");
    s.push('\n');
    for r in records {
        let row: Vec<String> = COLUMNS.iter().map(|c| csv_escape(&field(r, c))).collect();
        s.push_str(&row.join(","));
        s.push('\n');
    }
    s
}

/// The short label a cell shows in the grid.
pub fn cell_label(r: &CellRecord) -> String {
    match r.status {
        Status::Ok => r
            .metrics
            .as_ref()
            .map(|m| format!("{:.1}", m.output_tok_s))
            .unwrap_or_default(),
        Status::Skipped => "skipped".into(),
        Status::Failed => match &r.failure {
            Some(f) => match (&f.context, f.kind) {
                (Some(n), crate::detect::FailureKind::ContextOverflow) => {
                    let status = (f.source == crate::detect::FailureSource::Http).then_some(400);
                    n.summary(status)
                }
                _ => f.kind.badge().to_string(),
            },
            None => "failed".into(),
        },
    }
}

/// The grid: rows = configs grouped by phase, columns = workload × context ×
/// concurrency; ok cells show output tok/s, failed cells a short label.
pub fn markdown(plan: Option<&Plan>, records: &[CellRecord]) -> String {
    // Column and row order come from the plan when there is one, else from the records.
    let mut columns: Vec<(String, u64, u32)> = Vec::new();
    let mut rows: Vec<(String, String)> = Vec::new();
    match plan {
        Some(p) => {
            for c in &p.cells {
                let col = (c.workload.clone(), c.context_tokens, c.concurrency);
                if !columns.contains(&col) {
                    columns.push(col);
                }
            }
            for phase in &p.phases {
                for cfg in &phase.configs {
                    rows.push((phase.id.clone(), cfg.clone()));
                }
            }
        }
        None => {
            let cols: BTreeSet<(String, u64, u32)> = records
                .iter()
                .map(|r| (r.workload.clone(), r.context_tokens, r.concurrency))
                .collect();
            columns = cols.into_iter().collect();
            for r in records {
                let row = (r.phase.clone(), r.config.clone());
                if !rows.contains(&row) {
                    rows.push(row);
                }
            }
        }
    }
    let mut s = String::new();
    let _ = writeln!(s, "Output tok/s per cell (failed cells show why).\n");
    let mut header = String::from("| phase | config |");
    let mut rule = String::from("|---|---|");
    for (w, ctx, conc) in &columns {
        let _ = write!(header, " {w} ctx{ctx} c{conc} |");
        rule.push_str("---:|");
    }
    let _ = writeln!(s, "{header}\n{rule}");
    for (phase, config) in &rows {
        let _ = write!(s, "| {phase} | {config} |");
        for (w, ctx, conc) in &columns {
            let label = records
                .iter()
                .find(|r| {
                    &r.config == config
                        && &r.workload == w
                        && r.context_tokens == *ctx
                        && r.concurrency == *conc
                })
                .map(cell_label)
                .unwrap_or_else(|| "·".into());
            let _ = write!(s, " {} |", label.replace('|', "\\|"));
        }
        s.push('\n');
    }
    s
}
