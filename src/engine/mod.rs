//! The sweep: per config, preflight, launch the server, wait until it is ready,
//! run its cells, record each result durably, stop the server. The engine is the
//! only writer of sweep state; everything else learns about it from events.
//!
//! Configs run in *lanes*: one at a time, or, in a phase that packs, several
//! side by side on GPUs they do not share. What all lanes share (the run
//! directory, the statuses, what the user asked for) is the [`Core`]; a
//! [`Lane`] is one config's worker.
//!
//! One file per step of a sweep:
//! - [`sweep`]: the loop over phases, placing configs onto free GPUs (and
//!   queued retries), and per config the loop over its cells on one server,
//!   relaunching it when it dies or stalls;
//! - [`place`]: which GPUs a config gets, and when;
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
mod place;
pub mod process;
mod server;
mod sweep;

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};

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
    #[error("a config's worker stopped unexpectedly: {0}")]
    Lane(String),
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

/// A sweep, ready to run.
pub struct Engine {
    core: Arc<Core>,
    commands: mpsc::Receiver<Request>,
    gpu_source: crate::gpu::GpuSource,
    gpu_interval: Duration,
    retry: Vec<(String, String)>,
}

/// What every lane of a sweep shares.
pub(crate) struct Core {
    plan: Arc<Plan>,
    bus: Bus,
    patterns: Arc<LogPatterns>,
    seq: Arc<AtomicU64>,
    /// For the server's side endpoints (health, models, tokenize, metrics).
    http: reqwest::Client,
    /// What this run's servers carry as [`process::RUN_TAG`].
    run_tag: String,
    run_path: PathBuf,
    sweeptop_exe: PathBuf,
    gpu: OnceLock<crate::gpu::Telemetry>,
    book: Mutex<Book>,
    /// Bumped after every command applied: lanes wake and look.
    steer: watch::Sender<u64>,
}

/// The sweep's mutable state, one lock for all lanes.
pub(crate) struct Book {
    run: RunDir,
    done: HashSet<String>,
    /// The latest status of every recorded cell.
    statuses: HashMap<String, Status>,
    excluded: HashSet<String>,
    retry_queue: VecDeque<String>,
    paused: bool,
    quit: bool,
    /// Skips asked for and not yet taken, each for a config (`None`: the
    /// next config to look).
    skips: Vec<(Option<String>, Skip)>,
    /// Configs with a live server, in the order they started.
    lanes: Vec<LaneInfo>,
    /// Each running cell and the configs that ran beside it so far.
    beside: HashMap<String, BTreeSet<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    Config,
    Cell,
}

pub(crate) struct LaneInfo {
    config: String,
    gpus: Vec<u32>,
    pgid: u32,
    start: u64,
}

/// One config's worker: its server, its cells, the GPUs it was given.
pub(crate) struct Lane {
    core: Arc<Core>,
    steer: watch::Receiver<u64>,
    /// The GPUs this config runs on: its list, the free ones picked for
    /// `auto:N`, or every GPU when it says nothing.
    gpus: Vec<u32>,
}

impl std::ops::Deref for Lane {
    type Target = Core;
    fn deref(&self) -> &Core {
        &self.core
    }
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
        let mut done: HashSet<String> = results.records.iter().map(|r| r.cell.clone()).collect();
        let statuses = results
            .records
            .iter()
            .map(|r| (r.cell.clone(), r.status))
            .collect();
        let run_tag = std::fs::canonicalize(&run.path)
            .unwrap_or_else(|_| run.path.clone())
            .display()
            .to_string();
        // Cells asked to run again are pending again; their old records stay
        // in results.jsonl until the new ones follow them.
        for (cell, _) in &opts.retry {
            done.remove(cell);
        }
        let mut run = run;
        let repairs = std::mem::take(&mut run.repairs);
        let core = Core {
            plan,
            patterns: Arc::new(patterns),
            seq: Arc::new(AtomicU64::new(0)),
            http: crate::load::http_client(),
            run_tag,
            run_path: run.path.clone(),
            sweeptop_exe: opts.sweeptop_exe,
            gpu: OnceLock::new(),
            steer: watch::channel(0).0,
            bus,
            book: Mutex::new(Book {
                run,
                done,
                statuses,
                excluded: HashSet::new(),
                retry_queue: VecDeque::new(),
                paused: false,
                quit: false,
                skips: Vec::new(),
                lanes: Vec::new(),
                beside: HashMap::new(),
            }),
        };
        for p in repairs.into_iter().chain(results.problems) {
            core.notice(Level::Warn, p);
        }
        Ok(Engine {
            core: Arc::new(core),
            commands,
            gpu_source: opts.gpu,
            gpu_interval: opts.gpu_interval,
            retry: opts.retry,
        })
    }
}

impl Book {
    /// `server.pid` lists the live servers.
    fn record_servers(&self) -> Result<(), store::StoreError> {
        let live: Vec<(u32, u64)> = self.lanes.iter().map(|l| (l.pgid, l.start)).collect();
        self.run.record_servers(&live)
    }
}

impl Core {
    /// The shared state; a lane that panicked while holding it leaves it
    /// consistent (every change is one statement), so it is used anyway.
    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn gpu(&self) -> Option<&crate::gpu::Telemetry> {
        self.gpu.get()
    }

    fn emit(&self, ev: Event) {
        let mut book = self.book();
        if ev.persisted() {
            if let Err(e) = book.run.append_event(&ev) {
                // Events are the story, results are the data: keep going, say so.
                let _ = self.bus.events.send(Event::Notice {
                    at: Timestamp::now(),
                    level: Level::Error,
                    message: format!("cannot write events.jsonl: {e}"),
                });
            }
        }
        // Sent under the lock, so every view sees events in the file's order.
        let _ = self.bus.events.send(ev);
    }

    fn notice(&self, level: Level, message: String) {
        self.emit(Event::Notice {
            at: Timestamp::now(),
            level,
            message,
        });
    }

    fn lane(self: &Arc<Core>, gpus: Vec<u32>) -> Lane {
        Lane {
            core: self.clone(),
            steer: self.steer.subscribe(),
            gpus,
        }
    }

    /// A server of `config` is live on `gpus`: recorded (for a later
    /// `--resume` to stop), and counted beside every cell running now.
    fn server_started(&self, config: &str, gpus: &[u32], pgid: u32, start: u64) {
        let problem = {
            let mut book = self.book();
            book.lanes.retain(|l| l.config != config);
            book.lanes.push(LaneInfo {
                config: config.to_string(),
                gpus: gpus.to_vec(),
                pgid,
                start,
            });
            // (A cell's own config is left out when it is recorded.)
            for set in book.beside.values_mut() {
                set.insert(config.to_string());
            }
            book.record_servers().err()
        };
        if let Some(e) = problem {
            self.notice(
                Level::Warn,
                format!("cannot record the server's process group: {e}"),
            );
        }
    }

    fn server_stopped(&self, config: &str) {
        let mut book = self.book();
        book.lanes.retain(|l| l.config != config);
        let _ = book.record_servers();
    }

    /// A cell starts: the configs live beside it now.
    fn cell_started(&self, cell: &str, config: &str) {
        let mut book = self.book();
        let others: BTreeSet<String> = book
            .lanes
            .iter()
            .filter(|l| l.config != config)
            .map(|l| l.config.clone())
            .collect();
        book.beside.insert(cell.to_string(), others);
    }

    /// Whether the user asked to quit.
    fn quitting(&self) -> bool {
        self.book().quit
    }
}
