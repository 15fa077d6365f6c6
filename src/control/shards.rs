//! Steering a sweep directory's shards, which may run on other machines,
//! through their commands files ([`super::file`]): which shard(s) a command
//! is for, from how the plan was split and where each shard stands.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::file::append_command;
use crate::engine::Request;
use crate::model::{Command, Event};
use crate::plan::Plan;
use crate::store::{self, sweep};

/// The shard of each config of a sweep: how its plan was split.
pub fn shard_map(plan: &Plan, shards: u32) -> HashMap<String, u32> {
    plan.configs
        .iter()
        .map(|c| c.id.clone())
        .zip(plan.shard_of_configs(shards))
        .collect()
}

/// The shards of the sweep in `dir` that are running now.
fn running_shards(dir: &Path) -> Vec<u32> {
    sweep::shard_dirs(dir)
        .into_iter()
        .filter(|(_, d)| sweep::shard_state(d).is_running())
        .map(|(i, _)| i)
        .collect()
}

/// `attach --send` to a sweep directory split into `shards`: a command
/// about a config (or a cell) is for the shard that runs it, any other for
/// every running shard.
pub fn send_targets(dir: &Path, plan: &Plan, shards: u32, cmd: &Command) -> Vec<u32> {
    match cmd.target() {
        Some(t) => {
            let config = plan
                .cells
                .iter()
                .find(|c| c.id == t)
                .map_or(t.as_str(), |c| c.config.as_str());
            shard_map(plan, shards)
                .get(config)
                .copied()
                .into_iter()
                .collect()
        }
        None => running_shards(dir),
    }
}

/// Where a sweep viewer's keys go: the shards' commands files.
#[derive(Clone)]
pub struct ShardRouter {
    dir: PathBuf,
    /// The shard of each config (how the plan was split).
    shard_of: HashMap<String, u32>,
    /// The shard whose config started last (what a skip is for).
    latest: Option<u32>,
}

impl ShardRouter {
    /// A router that knows which shard started a config last from what the
    /// shards recorded so far.
    pub fn new(dir: &Path, shard_of: HashMap<String, u32>) -> ShardRouter {
        let mut router = ShardRouter {
            dir: dir.to_path_buf(),
            shard_of,
            latest: None,
        };
        for (i, d) in sweep::shard_dirs(dir) {
            for ev in store::read_events(&d) {
                router.note(i, &ev);
            }
        }
        router
    }

    /// An event of shard `shard`: a config or cell starting makes it the
    /// shard a skip is for.
    pub fn note(&mut self, shard: u32, ev: &Event) {
        if let Event::ConfigStarting { .. } | Event::CellStarted { .. } = ev {
            self.latest = Some(shard);
        }
    }

    /// Write a key's command to the commands files of the shards it is for,
    /// as sent by `source` on `host` (best effort: a shard whose file cannot
    /// be written is not waited for).
    pub fn send(&self, req: &Request, host: &str) {
        let from = format!("{}@{host}", req.source);
        let found = sweep::Sweep::open(&self.dir);
        for (i, cmd) in self.route(&req.command) {
            // Never into something foreign in a shard's place.
            if let Some(shard) = found.as_ref().and_then(|s| s.shard_path(i)) {
                let _ = append_command(&shard, &cmd, &from);
            }
        }
    }

    /// A key's command to the shards it is for: one that names a config or a
    /// cell (retry, exclude, include) to the shard of that config, a skip of
    /// no config in particular to the shard whose config started last, a
    /// pause, resume or quit to every running shard (a toggle becomes a
    /// pause while any of them runs unpaused).
    fn route(&self, cmd: &Command) -> Vec<(u32, Command)> {
        let running = running_shards(&self.dir);
        // By name and target, not by variant: a command that names a config
        // or a cell goes to its shard whatever its kind.
        match (cmd.name(), cmd.target()) {
            ("pause" | "resume" | "quit", _) => running.iter().map(|&i| (i, cmd.clone())).collect(),
            ("toggle_pause", _) => {
                let cmd = if running.iter().all(|&i| self.paused(i)) {
                    Command::Resume
                } else {
                    Command::Pause
                };
                running.iter().map(|&i| (i, cmd.clone())).collect()
            }
            (_, Some(target)) => {
                // A cell id is `<config>/…`.
                let config = target.split('/').next().unwrap_or(&target);
                self.shard_of
                    .get(config)
                    .map(|&i| vec![(i, cmd.clone())])
                    .unwrap_or_default()
            }
            // A skip of no config in particular: the shard whose config
            // started last.
            (_, None) => self
                .latest
                .filter(|i| running.contains(i))
                .map(|i| vec![(i, cmd.clone())])
                .unwrap_or_default(),
        }
    }

    /// Whether shard `i` said last that it paused.
    fn paused(&self, i: u32) -> bool {
        store::read_events(&sweep::shard_dir(&self.dir, i))
            .iter()
            .rev()
            .find_map(|e| match e {
                Event::Paused { .. } => Some(true),
                Event::Resumed { .. } | Event::SweepStarted { .. } => Some(false),
                _ => None,
            })
            .unwrap_or(false)
    }
}

/// Why a command could not be sent to a sweep directory's shards.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// Its `sweep.json` does not read.
    #[error(transparent)]
    Store(#[from] store::StoreError),
    /// Its frozen plan does not read.
    #[error(transparent)]
    Plan(#[from] crate::plan::PlanError),
    #[error("cannot write to {}: {source}", .shard.join(super::file::COMMANDS).display())]
    Write {
        shard: PathBuf,
        source: std::io::Error,
    },
}

/// A command to a sweep directory through its shards' commands files: one
/// about a config (or a cell) to the shard that runs it, any other to every
/// running shard; never into something foreign in a shard's place, nor a
/// shard that has not started. The shards it went to.
pub fn send_to_sweep(dir: &Path, cmd: &Command, from: &str) -> Result<Vec<u32>, SendError> {
    let meta = sweep::read_sweep(dir)?;
    let plan = Plan::load(&dir.join(store::PLAN))?;
    let found = sweep::Sweep::open(dir);
    let mut sent = Vec::new();
    for i in send_targets(dir, &plan, meta.shards, cmd) {
        let Some(shard) = found.as_ref().and_then(|s| s.shard_path(i)) else {
            continue;
        };
        if !shard.join(store::PLAN).exists() {
            continue;
        }
        append_command(&shard, cmd, from).map_err(|source| SendError::Write { shard, source })?;
        sent.push(i);
    }
    Ok(sent)
}
