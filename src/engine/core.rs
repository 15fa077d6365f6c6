//! What every lane of a sweep shares, behind one lock: the run directory,
//! the cells done and their statuses, what the user asked for (pause, quit,
//! skips, exclusions, retries), the live servers; and every change to it,
//! each followed by the event that tells the views. Results are appended and
//! events sent under the lock, so every view sees them in the file's order.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use tokio::sync::watch;

use super::commands::{target_problem, Between};
use super::outcome;
use super::{Bus, EngineError, Request};
use crate::detect::LogPatterns;
use crate::model::{CellRecord, Command, Event, Failure, Level, Status, Timestamp};
use crate::plan::{Cell, Plan};
use crate::store::Recorder;

/// A prepare step's end as the configs waiting for it see it (`None` while
/// it runs).
pub(super) type StepEnd = Option<Result<(), Failure>>;

/// What every lane of a sweep shares.
pub(crate) struct Core {
    pub(super) plan: Arc<Plan>,
    pub(super) bus: Bus,
    pub(super) patterns: Arc<LogPatterns>,
    pub(super) seq: Arc<AtomicU64>,
    /// Prompt lengths the servers' tokenizers counted, for the servers after.
    pub(super) books: Arc<crate::load::tokenizer::CountBooks>,
    /// For the server's side endpoints (health, models, tokenize, metrics).
    pub(super) http: reqwest::Client,
    /// What this run's servers carry as [`process::RUN_TAG`].
    pub(super) run_tag: String,
    pub(super) run_path: PathBuf,
    pub(super) sweeptop_exe: PathBuf,
    pub(super) gpu: OnceLock<crate::gpu::Telemetry>,
    pub(super) book: Mutex<Book>,
    /// Writes the run directory on a thread of its own; asked under the
    /// book's lock, so the files keep the order the views see.
    pub(super) recorder: Recorder,
    /// Bumped after every command applied: lanes wake and look.
    pub(super) steer: watch::Sender<u64>,
}

/// The sweep's mutable state, one lock for all lanes.
pub(crate) struct Book {
    pub(super) done: HashSet<String>,
    /// The latest status of every recorded cell.
    pub(super) statuses: HashMap<String, Status>,
    pub(super) excluded: HashSet<String>,
    pub(super) retry_queue: VecDeque<String>,
    pub(super) paused: bool,
    pub(super) quit: bool,
    /// Skips asked for and not yet taken, each for a config (`None`: the
    /// next config to look).
    pub(super) skips: Vec<(Option<String>, Skip)>,
    /// Configs with a live server, in the order they started.
    pub(super) lanes: Vec<LaneInfo>,
    /// Each running cell and the configs that ran beside it so far.
    pub(super) beside: HashMap<String, BTreeSet<String>>,
    /// The prepare steps started in this sweep, by key, and how each ended.
    pub(super) steps: HashMap<String, watch::Receiver<StepEnd>>,
    /// The sweep has ended: steps still running stop.
    pub(super) steps_stop: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Skip {
    Config,
    Cell,
}

pub(crate) struct LaneInfo {
    pub(super) config: String,
    pub(super) gpus: Vec<u32>,
    pub(super) pgid: u32,
    pub(super) start: u64,
}

impl Book {
    /// The live servers, as `server.pid` lists them.
    fn servers(&self) -> Vec<(u32, u64)> {
        self.lanes.iter().map(|l| (l.pgid, l.start)).collect()
    }
}

impl Core {
    /// The shared state; a lane that panicked while holding it leaves it
    /// consistent (every change is one statement), so it is used anyway.
    pub(super) fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn gpu(&self) -> Option<&crate::gpu::Telemetry> {
        self.gpu.get()
    }

    pub(super) fn emit(&self, ev: Event) {
        let _book = self.book();
        if ev.persisted() {
            // Events are the story, results are the data: one that cannot be
            // written is told by the recorder, and the sweep goes on.
            self.recorder.event(&ev);
        }
        // Sent under the lock, so every view sees events in the file's order.
        let _ = self.bus.events.send(ev);
    }

    pub(super) fn notice(&self, level: Level, message: String) {
        self.emit(Event::Notice {
            at: Timestamp::now(),
            level,
            message,
        });
    }

    /// A server of `config` is live on `gpus`: recorded (for a later
    /// `--resume` to stop), and counted beside every cell running now.
    pub(super) fn server_started(&self, config: &str, gpus: &[u32], pgid: u32, start: u64) {
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
        self.recorder.servers(book.servers());
    }

    pub(super) fn server_stopped(&self, config: &str) {
        let mut book = self.book();
        book.lanes.retain(|l| l.config != config);
        self.recorder.servers(book.servers());
    }

    /// A cell starts: the configs live beside it now.
    pub(super) fn cell_started(&self, cell: &str, config: &str) {
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
    pub(super) fn quitting(&self) -> bool {
        self.book().quit
    }

    /// Whether running prepare steps must stop: a quit, or the sweep's end.
    pub(super) fn steps_stopping(&self) -> bool {
        let book = self.book();
        book.quit || book.steps_stop
    }

    /// During a step of `config` (a cell, a launch): whether the user asked
    /// to quit or to skip it, after a wake-up from [`Core::apply`].
    pub(super) fn interruption(&self, config: &str) -> Option<Between> {
        if self.quitting() {
            return Some(Between::Quit);
        }
        let mut book = self.book();
        let i = book
            .skips
            .iter()
            .position(|(c, _)| c.as_deref() == Some(config))?;
        Some(match book.skips.remove(i).1 {
            Skip::Config => Between::SkipConfig,
            Skip::Cell => Between::SkipCell,
        })
    }

    /// Record and apply a command, then wake every lane to look. A skip that
    /// names no config goes to the config that started first among those
    /// running (or, between configs, to the next one).
    pub(super) fn apply(&self, req: &Request) {
        if let Some(problem) = target_problem(&self.plan, &req.command) {
            self.notice(
                Level::Warn,
                format!("ignored from {}: {problem}", req.source),
            );
            return;
        }
        self.emit(Event::Action {
            at: Timestamp::now(),
            action: req.command.name().to_string(),
            target: req.command.target(),
            source: req.source.clone(),
        });
        let pause = {
            let mut book = self.book();
            match &req.command {
                Command::Pause => Some(true),
                Command::Resume => Some(false),
                Command::TogglePause => Some(!book.paused),
                Command::Retry { target } => {
                    if !book.retry_queue.contains(target) {
                        book.retry_queue.push_back(target.clone());
                    }
                    // A step that failed is tried again by the retry.
                    book.steps
                        .retain(|_, end| !matches!(&*end.borrow(), Some(Err(_))));
                    None
                }
                Command::Exclude { config } => {
                    book.excluded.insert(config.clone());
                    None
                }
                Command::Include { config } => {
                    book.excluded.remove(config);
                    None
                }
                Command::Quit => {
                    book.quit = true;
                    None
                }
                Command::SkipConfig { config } | Command::SkipCell { config } => {
                    let skip = if matches!(req.command, Command::SkipConfig { .. }) {
                        Skip::Config
                    } else {
                        Skip::Cell
                    };
                    let config = config
                        .clone()
                        .or_else(|| book.lanes.first().map(|l| l.config.clone()));
                    book.skips.push((config, skip));
                    None
                }
            }
        };
        if let Some(paused) = pause {
            self.set_paused(paused);
        }
        self.steer.send_modify(|n| *n += 1);
    }

    fn set_paused(&self, paused: bool) {
        let changed = {
            let mut book = self.book();
            let changed = book.paused != paused;
            book.paused = paused;
            changed
        };
        if changed {
            let at = Timestamp::now();
            self.emit(if paused {
                Event::Paused { at }
            } else {
                Event::Resumed { at }
            });
        }
    }

    /// A skip asked for `config` (or for whichever config looks first).
    pub(super) fn take_skip(&self, config: &str) -> Option<Skip> {
        let mut book = self.book();
        let i = book
            .skips
            .iter()
            .position(|(c, _)| c.as_deref().is_none_or(|c| c == config))?;
        Some(book.skips.remove(i).1)
    }

    /// Append one finished cell to `results.jsonl` (fsynced, on the
    /// recorder's thread), then tell everyone. A record that claims `ok` without tokens is never written as
    /// such: it is recorded as `zero_tokens`. A cell that ran carries the
    /// GPUs it ran on and the configs that ran beside it.
    pub(super) fn record(&self, mut record: CellRecord) -> Result<(), EngineError> {
        if !record.holds_invariant() {
            debug_assert!(false, "ok without tokens: {record:?}");
            let requests = record.metrics.as_ref().map_or(0, |m| m.requests);
            record.status = Status::Failed;
            record.metrics = None;
            record.failure = Some(crate::detect::zero_tokens(requests));
        }
        {
            let mut book = self.book();
            if let Some(beside) = book.beside.remove(&record.cell) {
                record.beside = beside.into_iter().filter(|c| *c != record.config).collect();
                if let Some(lane) = book.lanes.iter().find(|l| l.config == record.config) {
                    record.gpus = lane.gpus.clone();
                }
            }
            self.recorder.result(&record)?;
            book.done.insert(record.cell.clone());
            book.statuses.insert(record.cell.clone(), record.status);
        }
        self.emit(Event::CellFinished {
            at: Timestamp::now(),
            record: Box::new(record),
        });
        Ok(())
    }

    /// Mark cells that cannot run with the same failure.
    pub(super) fn fail_all(&self, cells: &[Cell], failure: &Failure) -> Result<(), EngineError> {
        for c in cells {
            self.record(outcome::failed(c, Timestamp::now(), failure.clone()))?;
        }
        Ok(())
    }

    pub(super) fn skip_all(&self, cells: &[Cell]) -> Result<(), EngineError> {
        for c in cells {
            self.record(outcome::skipped(c, Timestamp::now()))?;
        }
        Ok(())
    }
}
