//! The configs started last and their servers: starting, ready, exited by
//! themselves or stopped; those running side by side, and what each
//! benchmarked.

use super::{Sweep, ViewState};
use crate::model::text::display;
use crate::model::{ServerMeta, Timestamp};

#[derive(Debug, Clone, PartialEq)]
pub enum Server {
    Starting,
    Ready {
        after_s: f64,
        context_limit: Option<u64>,
        model: String,
    },
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    Stopped {
        how: String,
    },
}

/// The config being run (or the last one run).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigRun {
    pub id: String,
    pub phase: String,
    pub index: usize,
    pub total: usize,
    pub attempt: u32,
    pub command: String,
    pub server: Server,
    pub at: Timestamp,
    /// The GPUs it runs on, as the engine said (empty: unknown).
    pub gpus: Vec<u32>,
}

impl ConfigRun {
    /// Its server is starting or ready.
    pub fn live(&self) -> bool {
        !matches!(self.server, Server::Stopped { .. } | Server::Exited { .. })
    }
}

impl ViewState {
    /// A config starts, unless a newer start of it is shown already.
    pub(super) fn config_starting(&mut self, run: ConfigRun) {
        let stale = self.configs.iter().any(|c| c.id == run.id && c.at > run.at);
        if !stale {
            // The ones that ended make way; those running stay beside it.
            self.configs.retain(|c| c.live() && c.id != run.id);
            self.configs.push(run);
        }
    }

    /// A config's server is ready, with what it benchmarks when it says.
    pub(super) fn server_ready(
        &mut self,
        at: Timestamp,
        config: &str,
        meta: Option<&ServerMeta>,
        ready: Server,
    ) {
        if let Some(meta) = meta {
            self.servers.insert(config.to_string(), shown_meta(meta));
        }
        self.set_server(config, at, ready);
    }

    /// A config's server was stopped: its cell runs no more.
    pub(super) fn server_stopped(&mut self, at: Timestamp, config: &str, how: &str) {
        self.set_server(
            config,
            at,
            Server::Stopped {
                how: how.to_string(),
            },
        );
        self.running
            .retain(|r| !(r.config == config && r.since <= at));
    }

    /// A config's server changed, unless its config started again since.
    pub(super) fn set_server(&mut self, config: &str, at: Timestamp, server: Server) {
        if let Some(c) = self.configs.iter_mut().find(|c| c.id == config) {
            if c.at <= at {
                c.server = server;
            }
        }
    }

    /// The config to name when one is named: the latest started of those
    /// running, else the one that ran last.
    pub fn config(&self) -> Option<&ConfigRun> {
        self.configs
            .iter()
            .rev()
            .find(|c| c.live())
            .or(self.configs.last())
    }

    /// The config the header names as the one running: none once the
    /// sweep has ended (the one that ran last runs no more).
    pub fn config_now(&self) -> Option<&ConfigRun> {
        match self.sweep.sweep {
            Sweep::Finished { .. } | Sweep::Interrupted { .. } => None,
            Sweep::Waiting | Sweep::Running => self.config(),
        }
    }

    /// A config's place in the plan shown and how many configs it has
    /// (`config 7/8`). The engine's count is of the plan it runs: a shard's
    /// part of a sweep directory shown whole would read `2/3` beside a grid
    /// of 8; without a plan, the engine's count.
    pub fn config_place(&self, run: &ConfigRun) -> (usize, usize) {
        let of_plan = self.plan.as_ref().and_then(|p| {
            let i = p.configs.iter().position(|c| c.id == run.id)?;
            Some((i + 1, p.configs.len()))
        });
        of_plan.unwrap_or((run.index, run.total))
    }

    /// The configs whose servers run now, in the order they started.
    pub fn live_configs(&self) -> impl Iterator<Item = &ConfigRun> {
        self.configs.iter().filter(|c| c.live())
    }
}

/// Server meta with every text made safe to show (a version string is the
/// server's to write).
fn shown_meta(meta: &ServerMeta) -> ServerMeta {
    let d = |s: &String| display(s).into_owned();
    let o = |s: &Option<String>| s.as_ref().map(d);
    ServerMeta {
        kind: d(&meta.kind),
        version: o(&meta.version),
        model: d(&meta.model),
        model_path: o(&meta.model_path),
        model_config_sha256: o(&meta.model_config_sha256),
        model_file_head_sha256: o(&meta.model_file_head_sha256),
        command: d(&meta.command),
        host: d(&meta.host),
        gpus: meta.gpus.iter().map(d).collect(),
        driver: o(&meta.driver),
        cuda: o(&meta.cuda),
        sweeptop_version: d(&meta.sweeptop_version),
    }
}
