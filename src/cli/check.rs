//! `sweeptop check PLAN [--json]`: validate a plan and print its expanded
//! matrix; an error names `file:line:col`.

use std::path::PathBuf;

use super::{user, Result};
use crate::plan::Plan;

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// The plan file (TOML).
    plan: PathBuf,
    /// The expanded plan as JSON (configs, cells, phases, workloads, limits).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    gpu: super::GpuArgs,
}

/// Configs whose own GPU list names GPUs this machine does not have, as
/// NVML shows them (nothing is said when it shows none, or with --no-gpu).
fn missing_gpus(plan: &Plan, gpu: &super::GpuArgs) -> Vec<String> {
    if plan.configs.iter().all(|c| c.gpus.is_none()) {
        return Vec::new();
    }
    let snap = crate::gpu::sample_once(&gpu.source(false), &|_| false);
    plan.configs
        .iter()
        .filter_map(|c| {
            let why = crate::engine::missing_gpus(c.gpus.as_deref()?, Some(&snap))?;
            Some(format!("config `{}`: {why}", c.id))
        })
        .collect()
}

pub fn check(args: CheckArgs) -> Result<u8> {
    let plan = Plan::load(&args.plan).map_err(|e| user(e.to_string()))?;
    plan.check_files().map_err(|e| user(e.to_string()))?;
    let missing = missing_gpus(&plan, &args.gpu);
    if !missing.is_empty() {
        return Err(user(missing.join("\n")));
    }
    if args.json {
        let v = serde_json::json!({
            "name": plan.name,
            "configs": plan.configs,
            "cells": plan.cells,
            "phases": plan.phases,
            "workloads": plan.workloads,
            "limits": plan.limits,
            "count": {"configs": plan.configs.len(), "cells": plan.cells.len()},
            "warnings": crate::plan::missing_requires(&plan),
        });
        super::print(&format!("{}\n", crate::model::text::to_json_pretty(&v)?))?;
    } else {
        let mut text = crate::plan::describe(&plan);
        for w in crate::plan::missing_requires(&plan) {
            text.push_str(&format!("\nwarning: {w}\n"));
        }
        super::print(&text)?;
    }
    Ok(0)
}
