//! The selected cell's workload charted across its phase, for the
//! dashboard's chart: the value against concurrency (or context), a series
//! per config.

use super::{context_label, Chart, ChartSeries, Column, Grid, ValueMode};
use crate::model::Status;
use crate::view::state::ViewState;

impl Grid {
    /// The selected cell's workload charted across its phase: the value
    /// against concurrency (the columns of its workload and context), or
    /// against context when it has one concurrency only; a series per config
    /// of the phase, failed and pending cells left out.
    pub fn chart(
        &self,
        v: &ViewState,
        mode: ValueMode,
        config: usize,
        col: usize,
    ) -> Option<Chart> {
        let row = self.configs.get(config)?;
        let at = self.columns.get(col)?;
        let by_concurrency: Vec<usize> = (0..self.columns.len())
            .filter(|&c| {
                let k = &self.columns[c];
                k.workload == at.workload && k.context == at.context
            })
            .collect();
        let by_context = by_concurrency.len() <= 1;
        let (cols, x_label, x_of): (Vec<usize>, &str, fn(&Column) -> f64) = if by_context {
            let by_context = (0..self.columns.len())
                .filter(|&c| {
                    let k = &self.columns[c];
                    k.workload == at.workload && k.concurrency == at.concurrency
                })
                .collect();
            (by_context, "context (tokens)", |k| k.context as f64)
        } else {
            (by_concurrency, "concurrency", |k| f64::from(k.concurrency))
        };
        let base = self.baselines.get(&row.phase);
        let mut series = Vec::new();
        for (i, cfg) in self.configs.iter().enumerate() {
            if cfg.phase != row.phase {
                continue;
            }
            let points: Vec<(f64, f64)> = cols
                .iter()
                .filter_map(|&c| {
                    let r = v.records.get(self.cell_id(&cfg.id, c)?)?;
                    let m = r.metrics.as_ref().filter(|_| r.status == Status::Ok)?;
                    let metric = mode.metric();
                    let value = metric.value(m).number()?;
                    let y = match mode {
                        ValueMode::Metric(_) => value,
                        ValueMode::Speedup(_) => {
                            let b = self.baseline_record(v, &row.phase, c)?;
                            let b = b.metrics.as_ref().filter(|_| b.status == Status::Ok)?;
                            let b = metric.value(b).number().filter(|b| *b > 0.0)?;
                            value / b
                        }
                    };
                    Some((x_of(&self.columns[c]), y))
                })
                .collect();
            series.push(ChartSeries {
                config: i,
                name: cfg.id.clone(),
                baseline: base == Some(&cfg.id),
                points,
            });
        }
        let what = if by_context {
            format!("{} c{}", at.workload, at.concurrency)
        } else {
            format!("{} {}", at.workload, context_label(at.context))
        };
        Some(Chart {
            title: format!("{} · {what} · phase {}", mode.title(), row.phase),
            x_label: x_label.to_string(),
            y_label: mode.title(),
            xs: cols.iter().map(|&c| x_of(&self.columns[c])).collect(),
            series,
        })
    }
}
