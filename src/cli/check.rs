//! `sweeptop check PLAN [--json]`: validate a plan and print its expanded
//! matrix; an error names `file:line:col`.

use std::path::PathBuf;

use super::{user, Result};
use crate::plan::Plan;

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    plan: PathBuf,
    #[arg(long)]
    json: bool,
}

pub fn check(args: CheckArgs) -> Result<u8> {
    let plan = Plan::load(&args.plan).map_err(|e| user(e.to_string()))?;
    plan.check_files().map_err(|e| user(e.to_string()))?;
    if args.json {
        let v = serde_json::json!({
            "name": plan.name,
            "configs": plan.configs,
            "cells": plan.cells,
            "phases": plan.phases,
            "workloads": plan.workloads,
            "limits": plan.limits,
            "count": {"configs": plan.configs.len(), "cells": plan.cells.len()},
        });
        super::print(&format!("{}\n", crate::model::text::to_json_pretty(&v)?))?;
    } else {
        super::print(&crate::plan::describe(&plan))?;
    }
    Ok(0)
}
