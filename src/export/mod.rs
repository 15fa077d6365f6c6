//! The results as files: CSV and JSON (one record per cell, every field) and
//! Markdown (the dashboard's grid, each failure's kind and message, then every
//! metric of every cell). Columns
//! come from the metric table and the grid from [`crate::view::grid`], so an
//! export says what the dashboard says. Never recomputes a metric.
//!
//! One file per format (`csv`, `json`, `markdown`) behind [`render`]; the
//! HTML [`report`] and the run [`compare`]ison read the same records.

pub mod compare;
mod csv;
mod json;
mod markdown;
pub mod report;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use self::csv::csv;
use self::json::json;
pub use self::markdown::markdown;
use crate::model::{CellRecord, ServerMeta};
use crate::plan::Plan;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Csv,
    Json,
    Md,
}

/// What was benchmarked, by config id (the last launch's).
pub type Servers = BTreeMap<String, ServerMeta>;

/// The records as `format`, each with what its config benchmarked. Markdown
/// lays them out on the plan's grid when there is a plan.
pub fn render(
    format: Format,
    plan: Option<Arc<Plan>>,
    records: &[CellRecord],
    servers: &Servers,
) -> String {
    let axes = Axes::of(plan.as_deref());
    match format {
        Format::Csv => csv(records, servers, &axes),
        Format::Json => json(records, servers, &axes),
        Format::Md => markdown(plan, records, servers),
    }
}

/// The plan's axes (`tp`, `method`, `budget`…), each config's value of each:
/// columns to group by without parsing config ids.
#[derive(Debug, Default)]
pub struct Axes {
    /// Axis names in plan order (first seen first).
    pub names: Vec<String>,
    /// config → axis → value.
    values: BTreeMap<String, indexmap::IndexMap<String, String>>,
}

impl Axes {
    pub fn of(plan: Option<&Plan>) -> Axes {
        let mut a = Axes::default();
        for c in plan.map(|p| p.configs.as_slice()).unwrap_or_default() {
            for k in c.axes.keys() {
                if !a.names.contains(k) {
                    a.names.push(k.clone());
                }
            }
            a.values.insert(c.id.clone(), c.axes.clone());
        }
        a
    }

    fn value(&self, config: &str, axis: &str) -> String {
        self.values
            .get(config)
            .and_then(|v| v.get(axis))
            .cloned()
            .unwrap_or_default()
    }
}
