//! Which configs the dashboard's grid shows and in what order: a filter by
//! name, by failure or by phase, and a sort by the value in a column. Phase
//! headings stay over their configs.

use super::{Grid, Row, ValueMode};
use crate::model::{Better, Status};
use crate::view::state::ViewState;

/// Which configs the dashboard's grid shows, and in what order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arrange {
    /// Only configs whose id contains this (case-insensitively); `/` in the grid.
    pub name: String,
    /// Only configs with a failed cell.
    pub failures_only: bool,
    /// Only this phase.
    pub phase: Option<String>,
    /// Sort each phase's configs by the value in this column, best first.
    pub sort_by: Option<usize>,
}

impl Arrange {
    pub fn is_plain(&self) -> bool {
        *self == Arrange::default()
    }
}

impl Grid {
    /// Choose and order the rows the dashboard shows: configs whose id
    /// contains the filter text, only those with a failed cell, one phase;
    /// within each phase, sorted by the value in a column (best first, cells
    /// without a value last). Phase headings stay over their configs.
    pub fn arrange(&mut self, v: &ViewState, a: &Arrange, mode: ValueMode) {
        let needle = a.name.to_lowercase();
        // One pass over the records, not one per config.
        let failing: std::collections::HashSet<&str> = if a.failures_only {
            v.records
                .values()
                .filter(|r| r.status == Status::Failed)
                .map(|r| r.config.as_str())
                .collect()
        } else {
            Default::default()
        };
        let keep = |i: usize| {
            let c = &self.configs[i];
            (needle.is_empty() || c.id.to_lowercase().contains(&needle))
                && a.phase.as_ref().is_none_or(|p| *p == c.phase)
                && (!a.failures_only || failing.contains(c.id.as_str()))
        };
        let mut shown = Vec::with_capacity(self.rows.len());
        let mut i = 0;
        while i < self.rows.len() {
            let Row::Phase(phase) = &self.rows[i] else {
                i += 1;
                continue;
            };
            let mut configs: Vec<usize> = Vec::new();
            i += 1;
            while let Some(Row::Config(c)) = self.rows.get(i) {
                if keep(*c) {
                    configs.push(*c);
                }
                i += 1;
            }
            if let Some(col) = a.sort_by {
                let key = |c: usize| self.sort_key(v, mode, c, col);
                // Stable: equal values keep the plan's order.
                configs.sort_by(|x, y| key(*y).total_cmp(&key(*x)));
            }
            if !configs.is_empty() {
                shown.push(Row::Phase(phase.clone()));
                shown.extend(configs.into_iter().map(Row::Config));
            }
        }
        self.shown = shown;
    }

    /// Configs in the order shown (for moving the selection).
    pub fn shown_configs(&self) -> impl Iterator<Item = usize> + '_ {
        self.shown.iter().filter_map(|r| match r {
            Row::Config(c) => Some(*c),
            Row::Phase(_) => None,
        })
    }

    /// Higher sorts first: the value turned so that better is larger, then
    /// failed cells, then cells without a record.
    fn sort_key(&self, v: &ViewState, mode: ValueMode, config: usize, col: usize) -> f64 {
        let Some(r) = self
            .cell_id(&self.configs[config].id, col)
            .and_then(|id| v.records.get(id))
        else {
            return f64::NEG_INFINITY;
        };
        let metric = mode.metric();
        match (
            r.status,
            r.metrics.as_ref().and_then(|m| metric.value(m).number()),
        ) {
            (Status::Ok, Some(x)) if metric.better == Better::Lower => -x,
            (Status::Ok, Some(x)) => x,
            _ => f64::MIN,
        }
    }
}
