//! The sweep: per config, preflight, launch the server, wait until it is ready,
//! run its cells, record each result durably, stop the server. The engine is the
//! only writer of sweep state; everything else learns about it from events.
//!
//! Configs run in *lanes*: one at a time, or, in a phase that packs, several
//! side by side on GPUs they do not share. What all lanes share (the run
//! directory, the statuses, what the user asked for) is the [`core::Core`],
//! one lock for all; a [`lane::Lane`] is one config's worker, holding the
//! core, its wake-ups and its GPUs as its own fields.
//!
//! One file per step of a sweep, each type's methods in its own file:
//! - [`sweep`]: a sweep from start to end ([`Engine`]);
//! - [`schedule`]: which config runs when, phase by phase, then the retries;
//! - [`place`]: which GPUs a config gets, and when;
//! - [`core`]: the shared state and every change to it, events included;
//! - [`lane`]: one config's cells on its server, relaunched when it dies or
//!   stalls;
//! - [`commands`]: what the user asked for, as a lane sees it;
//! - [`prepare`]: the plan's prepare steps, run once before the first
//!   config that needs them;
//! - [`preflight`]: what must hold before a server is launched;
//! - [`launch`]: starting a server, waiting until it is ready, stopping it;
//! - [`cell`]: **the one cell pipeline** (prepare prompts → warm up →
//!   measure → server figures → validate → outcome), which `loadtest` runs
//!   too, and what it learns about a server from cell to cell;
//! - [`watch`]: the sweep's side of a cell: the server, the timeout and the
//!   user's commands watched while it runs;
//! - [`outcome`]: how a cell ended and the records made of it;
//! - [`server`] and [`process`]: the server process itself and the OS calls.

pub(crate) mod cell;
mod commands;
pub use commands::target_problem;
mod core;
mod lane;
mod launch;
mod outcome;
mod place;
mod preflight;
mod prepare;
pub mod process;
mod retry;
pub use place::missing_gpus;
pub use retry::cells_to_retry;
mod log_file;
mod schedule;
mod server;
mod sweep;
pub use sweep::Engine;
mod watch;

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::broadcast;

use crate::model::{Command, Event};
use crate::store;

/// A command and who sent it (`key`, `attach`, `signal SIGINT`).
#[derive(Debug, Clone)]
pub struct Request {
    pub command: Command,
    pub source: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Finished,
    Interrupted,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("cannot record results, sweep stopped (everything recorded before is intact)")]
    Store(#[from] store::StoreError),
    #[error("the sweep's end is not recorded")]
    Unrecorded(#[source] store::Unrecorded),
    #[error("plan pattern")]
    Pattern(#[source] regex::Error),
    #[error("a config's worker stopped unexpectedly: {0}")]
    Lane(#[source] tokio::task::JoinError),
}

impl From<store::Unrecorded> for EngineError {
    fn from(e: store::Unrecorded) -> Self {
        match e {
            store::Unrecorded::Store(e) => EngineError::Store(e),
            stuck => EngineError::Unrecorded(stuck),
        }
    }
}

/// The channels the engine talks on.
#[derive(Clone)]
pub struct Bus {
    /// Sweep events (few; every consumer sees all of them).
    pub events: broadcast::Sender<Event>,
    /// Server log lines (many; a slow consumer misses some, the log file has all).
    pub logs: broadcast::Sender<Event>,
}

impl Bus {
    pub fn new() -> Bus {
        Bus {
            events: broadcast::channel(4096).0,
            logs: broadcast::channel(512).0,
        }
    }
}

impl Default for Bus {
    fn default() -> Self {
        Self::new()
    }
}

pub struct Options {
    /// The program used for `{sweeptop}` in commands (the simulated server).
    pub sweeptop_exe: PathBuf,
    pub gpu: crate::gpu::GpuSource,
    pub gpu_interval: Duration,
    /// Recorded cells to measure again (`--retry`), each with why.
    pub retry: Vec<(String, String)>,
}
