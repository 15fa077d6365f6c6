//! The sweep: per config, preflight, launch the server, wait until it is ready,
//! run its cells, record each result durably, stop the server. The engine is the
//! only writer of sweep state; everything else learns about it from events.
//!
//! One file per step of a sweep:
//! - [`sweep`]: the loop over configs (and queued retries), and per config the
//!   loop over its cells on one server, relaunching it when it dies or stalls;
//! - [`commands`]: what the user asked for, applied between and during cells;
//! - [`preflight`]: what must hold before a server is launched;
//! - [`launch`]: starting a server, waiting until it is ready, stopping it;
//! - [`cell`]: running one cell against a ready server and judging it;
//! - [`outcome`]: turning what happened into records, durably;
//! - [`server`] and [`process`]: the server process itself and the OS calls.

mod cell;
mod commands;
pub use commands::target_problem;
mod launch;
mod outcome;
mod preflight;
mod retry;
pub use retry::cells_to_retry;
pub mod process;
mod server;
mod sweep;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc};

use crate::detect::LogPatterns;
use crate::model::{Command, Event, Level, Status, Timestamp};
use crate::plan::Plan;
use crate::store::{self, RunDir};

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
    #[error("plan pattern")]
    Pattern(#[source] regex::Error),
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

pub struct Engine {
    plan: Arc<Plan>,
    run: RunDir,
    bus: Bus,
    commands: mpsc::Receiver<Request>,
    opts: Options,
    done: HashSet<String>,
    excluded: HashSet<String>,
    retry_queue: VecDeque<String>,
    paused: bool,
    patterns: Arc<LogPatterns>,
    seq: Arc<AtomicU64>,
    /// The latest status of every recorded cell.
    statuses: HashMap<String, Status>,
    gpu: Option<crate::gpu::Telemetry>,
    /// For the server's side endpoints (health, models, tokenize, metrics).
    http: reqwest::Client,
    /// What this run's servers carry as [`process::RUN_TAG`].
    run_tag: String,
}

impl Engine {
    pub fn new(
        plan: Arc<Plan>,
        run: RunDir,
        bus: Bus,
        commands: mpsc::Receiver<Request>,
        opts: Options,
    ) -> Result<Engine, EngineError> {
        let patterns = LogPatterns::with_extra(&plan.patterns).map_err(EngineError::Pattern)?;
        let mut results = store::read_results(&run.path)?;
        results.only_cells(plan.cells.iter().map(|c| c.id.as_str()));
        let done = results.records.iter().map(|r| r.cell.clone()).collect();
        let statuses = results
            .records
            .iter()
            .map(|r| (r.cell.clone(), r.status))
            .collect();
        let run_tag = std::fs::canonicalize(&run.path)
            .unwrap_or_else(|_| run.path.clone())
            .display()
            .to_string();
        let mut engine = Engine {
            plan,
            run,
            bus,
            commands,
            opts,
            done,
            excluded: HashSet::new(),
            retry_queue: VecDeque::new(),
            paused: false,
            patterns: Arc::new(patterns),
            seq: Arc::new(AtomicU64::new(0)),
            statuses,
            gpu: None,
            http: crate::load::http_client(),
            run_tag,
        };
        // Cells asked to run again are pending again; their old records stay
        // in results.jsonl until the new ones follow them.
        for (cell, _) in &engine.opts.retry {
            engine.done.remove(cell);
        }
        let repairs = std::mem::take(&mut engine.run.repairs);
        for p in repairs.into_iter().chain(results.problems) {
            engine.notice(Level::Warn, p);
        }
        Ok(engine)
    }

    fn emit(&mut self, ev: Event) {
        if ev.persisted() {
            if let Err(e) = self.run.append_event(&ev) {
                // Events are the story, results are the data: keep going, say so.
                let _ = self.bus.events.send(Event::Notice {
                    at: Timestamp::now(),
                    level: Level::Error,
                    message: format!("cannot write events.jsonl: {e}"),
                });
            }
        }
        let _ = self.bus.events.send(ev);
    }

    fn notice(&mut self, level: Level, message: String) {
        self.emit(Event::Notice {
            at: Timestamp::now(),
            level,
            message,
        });
    }
}
