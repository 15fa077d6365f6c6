//! The results grid as a model: rows are configs grouped by phase, columns are
//! workload × context × concurrency, and what each cell shows for the chosen
//! value. The dashboard (navigation and drawing) and the exports all read it, so
//! a cell says the same thing everywhere.
//!
//! Here: the rows, the columns and a cell's place; `cell` says what a cell
//! shows, `arrange` filters and sorts the rows the dashboard shows, `chart`
//! charts a workload across a phase.

mod arrange;
mod cell;
mod chart;

use std::collections::HashMap;

pub use arrange::Arrange;
pub use cell::{CellView, Tone, ValueMode};

use super::state::ViewState;
use crate::model::{CellRecord, Status};

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
    /// Phase headings and configs in plan order (what exports show).
    pub rows: Vec<Row>,
    /// The rows the dashboard shows, after [`Grid::arrange`]: filtered and
    /// sorted; every row until then.
    pub shown: Vec<Row>,
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
                records.sort_by_key(|r| r.started_at);
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
        g.shown = g.rows.clone();
        g
    }

    pub fn cell_id(&self, config: &str, col: usize) -> Option<&str> {
        self.cells
            .get(&(config.to_string(), col))
            .map(String::as_str)
    }

    /// The shown row of a config (0 when it is filtered out).
    pub fn display_row(&self, config: usize) -> usize {
        self.shown
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
        if v.is_running(id) {
            return CellView::Running;
        }
        if v.retry_waits(id, &row.id) {
            return CellView::Queued;
        }
        let excluded = v.excluded.contains(&row.id);
        let Some(r) = v.records.get(id) else {
            return if excluded {
                CellView::Excluded
            } else if let Some(p) = v.preparing_for(&row.id) {
                CellView::Preparing(p.percent())
            } else {
                CellView::Pending
            };
        };
        // An excluded config's cells are recorded as skipped when the sweep
        // reaches them (so the run accounts for each): still excluded.
        if excluded && r.status == Status::Skipped {
            return CellView::Excluded;
        }
        let base_record = self
            .baseline_record(v, &row.phase, col)
            .filter(|b| b.status == Status::Ok);
        let base = base_record.and_then(|b| b.metrics.as_ref());
        let shown = CellView::of_record(r, mode, base, row.baseline);
        // A speedup inside the measured noise of either cell (their
        // repetitions' spread) is not one: marked `≈`, not coloured.
        match (mode, shown, base_record) {
            (ValueMode::Speedup(m), CellView::Value { text, tone }, Some(b)) if !row.baseline => {
                let noise = crate::model::Spread::band(r.spread, b.spread);
                let ratio = match (r.metrics.as_ref(), b.metrics.as_ref()) {
                    (Some(x), Some(y)) => match (m.value(x).number(), m.value(y).number()) {
                        (Some(x), Some(y)) if y > 0.0 => Some(x / y),
                        _ => None,
                    },
                    _ => None,
                };
                match (noise, ratio) {
                    (Some(n), Some(q)) if ((q - 1.0) * 100.0).abs() <= n => CellView::Value {
                        text: format!("≈{text}"),
                        tone: Tone::Plain,
                    },
                    _ => CellView::Value { text, tone },
                }
            }
            (_, shown, _) => shown,
        }
    }
}

/// A workload across a phase's configs, for the dashboard's chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    /// The x values of the columns charted, ascending.
    pub xs: Vec<f64>,
    pub series: Vec<ChartSeries>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChartSeries {
    /// Index into `Grid::configs`.
    pub config: usize,
    pub name: String,
    pub baseline: bool,
    pub points: Vec<(f64, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_stay_short() {
        assert_eq!(context_label(32768), "32k");
        assert_eq!(context_label(32760), "32760");
    }
}
