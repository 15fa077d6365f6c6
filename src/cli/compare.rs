//! `sweeptop compare RUN_A RUN_B [...] [--value KEY] [--format table|md|json]
//! [--noise PCT] [--force]`: the same cells of several runs side by side.

use std::path::PathBuf;

use super::{user, Result};
use crate::export::compare::{self, RunResults};
use crate::model::Metric;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CompareFormat {
    Table,
    Md,
    Json,
}

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    /// Two or more run directories; changes are against the first.
    #[arg(required = true, num_args = 2.., value_name = "RUN_DIR")]
    runs: Vec<PathBuf>,
    /// The value compared: a metric key as in the CSV header (output_tok_s,
    /// ttft_ms_p99, itl_ms_p50, accept_len…).
    #[arg(long, default_value = "output_tok_s", value_name = "KEY")]
    value: String,
    /// table (aligned text), md (a Markdown table) or json.
    #[arg(long, value_enum, default_value_t = CompareFormat::Table)]
    format: CompareFormat,
    /// Changes within ± this many percent are marked `≈` (not a change one can
    /// claim from one measurement per cell).
    #[arg(long, default_value_t = 2.0, value_name = "PCT")]
    noise: f64,
    /// Give changes for the cells of workloads whose settings differ between
    /// the runs' plans too (by default they are marked not comparable).
    #[arg(long)]
    force: bool,
}

pub fn compare(args: CompareArgs) -> Result<u8> {
    let metric = Metric::by_key(&args.value).ok_or_else(|| {
        let keys: Vec<&str> = crate::model::METRICS.iter().map(|m| m.key).collect();
        user(format!(
            "--value {}: no such metric; one of {}",
            args.value,
            keys.join(", ")
        ))
    })?;
    if !(args.noise.is_finite() && args.noise >= 0.0) {
        return Err(user(format!(
            "--noise {}: a percentage of 0 or more",
            args.noise
        )));
    }
    let mut runs = Vec::new();
    for dir in &args.runs {
        let (plan, results) = super::read_run(dir)?;
        runs.push(RunResults {
            name: dir.display().to_string(),
            plan,
            records: results.records,
        });
    }
    let cmp = compare::compare(&runs, metric, args.noise, args.force);
    let text = match args.format {
        CompareFormat::Table => compare::table(&cmp, metric),
        CompareFormat::Md => compare::markdown(&cmp, metric),
        CompareFormat::Json => format!("{}\n", crate::model::text::to_json_pretty(&cmp)?),
    };
    super::print(&text)?;
    Ok(0)
}
