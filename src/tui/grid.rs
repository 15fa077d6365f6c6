//! The results grid as a model: rows are configs grouped by phase, columns are
//! workload × context × concurrency, and what each cell shows for the chosen
//! value. Navigation and drawing both read it.

use std::collections::HashMap;

use crate::load::Metrics;
use crate::store::{CellRecord, Status};

use super::state::ViewState;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Column {
    pub workload: String,
    pub context: u64,
    pub concurrency: u32,
}

impl Column {
    fn of(r: &CellRecord) -> Column {
        Column {
            workload: r.workload.clone(),
            context: r.context_tokens,
            concurrency: r.concurrency,
        }
    }

    /// `8k c4`, `32760 c1`.
    pub fn label(&self) -> String {
        format!("{} c{}", context_label(self.context), self.concurrency)
    }
}

pub fn context_label(tokens: u64) -> String {
    if tokens >= 1024 && tokens.is_multiple_of(1024) {
        format!("{}k", tokens / 1024)
    } else {
        tokens.to_string()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigRow {
    pub id: String,
    pub phase: String,
    pub baseline: bool,
}

/// A displayed row: a phase heading or a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Row {
    Phase(String),
    Config(usize),
}

#[derive(Debug, Clone, Default)]
pub struct Grid {
    pub columns: Vec<Column>,
    pub configs: Vec<ConfigRow>,
    /// Phase headings and configs in display order.
    pub rows: Vec<Row>,
    /// (config, column) → cell id.
    cells: HashMap<(String, usize), String>,
    /// phase → its baseline config.
    baselines: HashMap<String, String>,
}

impl Grid {
    /// From the plan when there is one (every planned cell has its place from the
    /// start), else from the records.
    pub fn build(v: &ViewState) -> Grid {
        let mut g = Grid::default();
        let mut col_index: HashMap<Column, usize> = HashMap::new();
        let mut add_col = |g: &mut Grid, c: Column| -> usize {
            *col_index.entry(c.clone()).or_insert_with(|| {
                g.columns.push(c);
                g.columns.len() - 1
            })
        };
        match &v.plan {
            Some(plan) => {
                for cell in &plan.cells {
                    let i = add_col(
                        &mut g,
                        Column {
                            workload: cell.workload.clone(),
                            context: cell.context_tokens,
                            concurrency: cell.concurrency,
                        },
                    );
                    g.cells.insert((cell.config.clone(), i), cell.id.clone());
                }
                for phase in &plan.phases {
                    g.rows.push(Row::Phase(phase.id.clone()));
                    for id in &phase.configs {
                        let baseline = plan.config(id).is_some_and(|c| c.baseline);
                        if baseline {
                            g.baselines.insert(phase.id.clone(), id.clone());
                        }
                        g.rows.push(Row::Config(g.configs.len()));
                        g.configs.push(ConfigRow {
                            id: id.clone(),
                            phase: phase.id.clone(),
                            baseline,
                        });
                    }
                }
            }
            None => {
                let mut records: Vec<&CellRecord> = v.records.values().collect();
                records.sort_by(|a, b| {
                    (&a.workload, a.context_tokens, a.concurrency, &a.started_at).cmp(&(
                        &b.workload,
                        b.context_tokens,
                        b.concurrency,
                        &b.started_at,
                    ))
                });
                for r in &records {
                    add_col(&mut g, Column::of(r));
                }
                records.sort_by(|a, b| a.started_at.cmp(&b.started_at));
                let mut phases: Vec<(String, Vec<String>)> = Vec::new();
                for r in &records {
                    let i = col_index[&Column::of(r)];
                    g.cells.insert((r.config.clone(), i), r.cell.clone());
                    match phases.iter_mut().find(|(p, _)| *p == r.phase) {
                        Some((_, configs)) => {
                            if !configs.contains(&r.config) {
                                configs.push(r.config.clone());
                            }
                        }
                        None => phases.push((r.phase.clone(), vec![r.config.clone()])),
                    }
                }
                for (phase, configs) in phases {
                    g.rows.push(Row::Phase(phase.clone()));
                    for id in configs {
                        g.rows.push(Row::Config(g.configs.len()));
                        g.configs.push(ConfigRow {
                            id,
                            phase: phase.clone(),
                            baseline: false,
                        });
                    }
                }
            }
        }
        g
    }

    pub fn cell_id(&self, config: &str, col: usize) -> Option<&str> {
        self.cells
            .get(&(config.to_string(), col))
            .map(String::as_str)
    }

    /// The display row of a config.
    pub fn display_row(&self, config: usize) -> usize {
        self.rows
            .iter()
            .position(|r| *r == Row::Config(config))
            .unwrap_or(0)
    }

    pub fn config_index(&self, id: &str) -> Option<usize> {
        self.configs.iter().position(|c| c.id == id)
    }

    /// The record of the phase's baseline config in the same column.
    fn baseline_record<'a>(
        &self,
        v: &'a ViewState,
        phase: &str,
        col: usize,
    ) -> Option<&'a CellRecord> {
        let base = self.baselines.get(phase)?;
        v.records.get(self.cell_id(base, col)?)
    }

    /// What one cell shows.
    pub fn cell(&self, v: &ViewState, mode: ValueMode, config: usize, col: usize) -> CellView {
        let Some(row) = self.configs.get(config) else {
            return CellView::Absent;
        };
        let Some(id) = self.cell_id(&row.id, col) else {
            return CellView::Absent;
        };
        if v.running.as_ref().is_some_and(|r| r.cell == id) {
            return CellView::Running;
        }
        if v.retry_queued.contains(id) || v.retry_queued.contains(&row.id) {
            return CellView::Queued;
        }
        let Some(r) = v.records.get(id) else {
            return if v.excluded.contains(&row.id) {
                CellView::Excluded
            } else {
                CellView::Pending
            };
        };
        match r.status {
            Status::Skipped => CellView::Skipped,
            Status::Failed => CellView::Failed(
                r.failure
                    .as_ref()
                    .map(|f| f.kind.badge().to_string())
                    .unwrap_or_else(|| "FAILED".into()),
            ),
            Status::Ok => {
                let Some(m) = &r.metrics else {
                    return CellView::Value {
                        text: "ok".into(),
                        tone: Tone::Plain,
                    };
                };
                let base = self
                    .baseline_record(v, &row.phase, col)
                    .filter(|b| b.status == Status::Ok)
                    .and_then(|b| b.metrics.as_ref());
                mode.show(m, base, row.baseline)
            }
        }
    }
}

/// What a grid cell shows.
#[derive(Debug, Clone, PartialEq)]
pub enum CellView {
    /// The plan has no such cell.
    Absent,
    Pending,
    Running,
    Queued,
    Excluded,
    Skipped,
    Failed(String),
    Value {
        text: String,
        tone: Tone,
    },
}

/// How a value compares with the phase's baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    Baseline,
    Better,
    Worse,
}

/// The value the grid shows for ok cells (`v` cycles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ValueMode {
    #[default]
    OutputTokS,
    DecodeTokS,
    Speedup,
    TtftP50,
    AcceptLen,
}

impl ValueMode {
    pub const ALL: [ValueMode; 5] = [
        ValueMode::OutputTokS,
        ValueMode::DecodeTokS,
        ValueMode::Speedup,
        ValueMode::TtftP50,
        ValueMode::AcceptLen,
    ];

    pub fn next(self) -> ValueMode {
        let i = ValueMode::ALL.iter().position(|m| *m == self).unwrap_or(0);
        ValueMode::ALL[(i + 1) % ValueMode::ALL.len()]
    }

    pub fn title(self) -> &'static str {
        match self {
            ValueMode::OutputTokS => "output tok/s",
            ValueMode::DecodeTokS => "decode tok/s per request (p50)",
            ValueMode::Speedup => "speedup vs the phase baseline (output tok/s)",
            ValueMode::TtftP50 => "TTFT p50",
            ValueMode::AcceptLen => "acceptance length",
        }
    }

    fn raw(self, m: &Metrics) -> Option<f64> {
        match self {
            ValueMode::OutputTokS | ValueMode::Speedup => Some(m.output_tok_s),
            ValueMode::DecodeTokS => m.decode_tok_s_p50,
            ValueMode::TtftP50 => Some(m.ttft_ms_p50),
            ValueMode::AcceptLen => m.accept_len,
        }
    }

    fn lower_is_better(self) -> bool {
        self == ValueMode::TtftP50
    }

    fn show(self, m: &Metrics, base: Option<&Metrics>, is_baseline: bool) -> CellView {
        let value = self.raw(m);
        let base_value = base.and_then(|b| self.raw(b)).filter(|b| *b > 0.0);
        let ratio = match (value, base_value) {
            (Some(v), Some(b)) => Some(v / b),
            _ => None,
        };
        let tone = if is_baseline {
            Tone::Baseline
        } else {
            match ratio {
                Some(r) => {
                    let r = if self.lower_is_better() { 1.0 / r } else { r };
                    if r >= 1.05 {
                        Tone::Better
                    } else if r <= 0.95 {
                        Tone::Worse
                    } else {
                        Tone::Plain
                    }
                }
                None => Tone::Plain,
            }
        };
        let text = match self {
            ValueMode::Speedup => match ratio {
                Some(r) => format!("{r:.2}x"),
                None => "n/a".into(),
            },
            ValueMode::TtftP50 => value.map(ms_label).unwrap_or_else(|| "n/a".into()),
            ValueMode::AcceptLen => value
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "n/a".into()),
            ValueMode::OutputTokS | ValueMode::DecodeTokS => {
                value.map(rate_label).unwrap_or_else(|| "n/a".into())
            }
        };
        CellView::Value { text, tone }
    }
}

/// A rate in at most 7 characters: `83.4`, `1234.5`, `12345`.
pub fn rate_label(v: f64) -> String {
    if v < 10_000.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// A duration in milliseconds: `85ms`, `1.24s`.
pub fn ms_label(ms: f64) -> String {
    if ms < 1000.0 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.2}s", ms / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(tok_s: f64, ttft: f64) -> Metrics {
        serde_json::from_value(serde_json::json!({
            "requests": 4, "failed_requests": 0, "short_requests": 0,
            "output_tokens": 100, "duration_s": 1.0, "output_tok_s": tok_s,
            "request_per_s": 1.0, "decode_tok_s_p50": tok_s / 2.0, "decode_tok_s_mean": null,
            "ttft_ms_p50": ttft, "ttft_ms_p90": ttft, "ttft_ms_p99": ttft, "ttft_ms_mean": ttft,
            "itl_ms_p50": null, "itl_ms_p90": null, "itl_ms_p99": null, "itl_ms_mean": null,
            "tpot_ms_p50": null, "e2e_ms_p50": 1.0, "e2e_ms_p99": 1.0,
            "prompt_tokens_mean": 1000.0, "tokens_estimated": false, "accept_len": null,
            "gpu_mem_peak_mib": null, "gpu_util_mean": null
        }))
        .unwrap()
    }

    #[test]
    fn values_are_toned_against_the_baseline() {
        let base = metrics(100.0, 50.0);
        let fast = metrics(150.0, 100.0);
        let same = metrics(102.0, 50.0);
        assert_eq!(
            ValueMode::OutputTokS.show(&fast, Some(&base), false),
            CellView::Value {
                text: "150.0".into(),
                tone: Tone::Better
            }
        );
        assert_eq!(
            ValueMode::Speedup.show(&fast, Some(&base), false),
            CellView::Value {
                text: "1.50x".into(),
                tone: Tone::Better
            }
        );
        // TTFT: lower is better, so twice the TTFT is worse.
        assert_eq!(
            ValueMode::TtftP50.show(&fast, Some(&base), false),
            CellView::Value {
                text: "100ms".into(),
                tone: Tone::Worse
            }
        );
        assert_eq!(
            ValueMode::OutputTokS.show(&same, Some(&base), false),
            CellView::Value {
                text: "102.0".into(),
                tone: Tone::Plain
            }
        );
        assert_eq!(
            ValueMode::Speedup.show(&base, Some(&base), true),
            CellView::Value {
                text: "1.00x".into(),
                tone: Tone::Baseline
            }
        );
        assert_eq!(
            ValueMode::AcceptLen.show(&fast, None, false),
            CellView::Value {
                text: "n/a".into(),
                tone: Tone::Plain
            }
        );
    }

    #[test]
    fn labels_stay_short() {
        assert_eq!(context_label(32768), "32k");
        assert_eq!(context_label(32760), "32760");
        assert_eq!(rate_label(12345.67), "12346");
        assert_eq!(ms_label(1234.0), "1.23s");
        assert_eq!(ValueMode::AcceptLen.next(), ValueMode::OutputTokS);
    }
}
