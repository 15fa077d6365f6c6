//! A sweep from start to end: the shared state opened on the run directory
//! (what is recorded already, cells asked to run again), the GPU telemetry
//! started, servers an earlier run left behind stopped, commands applied as
//! they arrive, the configs scheduled, and the end said and recorded
//! (finished, or interrupted for a resume).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::core::{Book, Core};
use super::lane::Flow;
use super::{process, schedule, Bus, EngineError, Options, Outcome, Request};
use crate::detect::LogPatterns;
use crate::model::{Event, Level, RunState, Status, Timestamp};
use crate::plan::Plan;
use crate::store::{self, RunDir};

/// How long the end of a sweep waits for the run directory to take what is
/// still queued for it: longer after the last cell (the results are the
/// data), shorter when the user or a signal stopped it (it must exit).
const END_DEADLINE_FINISHED: Duration = Duration::from_secs(60);
const END_DEADLINE_INTERRUPTED: Duration = Duration::from_secs(10);

/// How long the end of a sweep waits for prepare steps still running to
/// stop (SIGINT, grace, SIGTERM, SIGKILL).
const STEPS_SETTLE: Duration = Duration::from_secs(20);

/// A sweep, ready to run.
pub struct Engine {
    core: Arc<Core>,
    commands: mpsc::Receiver<Request>,
    gpu_source: crate::gpu::GpuSource,
    gpu_interval: Duration,
    retry: Vec<(String, String)>,
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
        let run_path = run.path.clone();
        let tell = {
            let events = bus.events.clone();
            Box::new(move |level, message| {
                let _ = events.send(Event::Notice {
                    at: Timestamp::now(),
                    level,
                    message,
                });
            })
        };
        let recorder = store::Recorder::start(run, tell).map_err(|e| {
            EngineError::Store(store::StoreError::Io {
                path: run_path.clone(),
                source: e,
            })
        })?;
        let core = Core {
            plan,
            patterns: Arc::new(patterns),
            seq: Arc::new(AtomicU64::new(0)),
            books: Arc::default(),
            http: crate::load::http_client(),
            run_tag,
            run_path,
            recorder,
            sweeptop_exe: opts.sweeptop_exe,
            gpu: OnceLock::new(),
            steer: watch::channel(0).0,
            bus,
            book: Mutex::new(Book {
                done,
                statuses,
                excluded: HashSet::new(),
                retry_queue: VecDeque::new(),
                paused: false,
                quit: false,
                skips: Vec::new(),
                lanes: Vec::new(),
                beside: HashMap::new(),
                steps: HashMap::new(),
                steps_stop: false,
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

    /// Run the sweep to the end (or until asked to quit).
    pub async fn run(self) -> Result<Outcome, EngineError> {
        let Engine {
            core,
            mut commands,
            gpu_source,
            gpu_interval,
            retry,
        } = self;
        let plan = core.plan.clone();
        let already_done = core.book().done.len();
        core.emit(Event::SweepStarted {
            at: Timestamp::now(),
            plan: plan.name.clone(),
            run_dir: core.run_path.display().to_string(),
            configs: plan.configs.len(),
            cells: plan.cells.len(),
            already_done,
        });
        // `--retry` is recorded like the `r` key, with its source.
        for (target, why) in retry {
            core.emit(Event::Action {
                at: Timestamp::now(),
                action: "retry".into(),
                target: Some(target),
                source: format!("command line ({why})"),
            });
        }
        let mut gpu_log = store::GpuLog::open(&core.run_path);
        let _ = core.gpu.set(crate::gpu::Telemetry::start(
            gpu_source,
            gpu_interval,
            core.bus.events.clone(),
            Box::new(move |snap| gpu_log.keep(snap)),
        ));
        for (pgid, start) in store::recorded_servers(&core.run_path) {
            if let Some(how) = process::stop_leftover(pgid, start).await {
                core.notice(
                    Level::Warn,
                    format!("stopped server process group {pgid} left by an earlier run ({how})"),
                );
            }
        }
        core.recorder.servers(Vec::new());
        // Servers of this run that were never recorded (killed between their
        // start and `server.pid`), found by their tag.
        for pgid in process::tagged_groups(&core.run_tag) {
            let how = process::stop_group(pgid).await;
            core.notice(
                Level::Warn,
                format!("stopped server process group {pgid} left by an earlier run of this directory ({how})"),
            );
        }
        // One reader of the commands applies them all; lanes look when woken.
        let dispatcher = {
            let core = core.clone();
            tokio::spawn(async move {
                while let Some(req) = commands.recv().await {
                    core.apply(&req);
                }
            })
        };
        let watchdog = tokio::spawn(watch_run_dir(core.clone()));
        let flow = schedule::schedule(core.clone()).await;
        // A step still running (a quit stops it) ends before the sweep does.
        super::prepare::settled(&core, STEPS_SETTLE).await;
        if let Some(g) = core.gpu() {
            // One sample after the last server stopped, so views end on the
            // GPUs' real state rather than the last busy sample.
            let _ = g.fresh_after(Timestamp::now()).await;
        }
        match flow? {
            Flow::Quit => {
                core.emit(Event::SweepInterrupted {
                    at: Timestamp::now(),
                    reason: "quit".to_string(),
                });
                let end = record_end(&core, RunState::Interrupted).await;
                dispatcher.abort();
                watchdog.abort();
                end?;
                Ok(Outcome::Interrupted)
            }
            Flow::Continue => {
                // Counted per cell (the last record wins), so a retried cell counts once.
                let (ok, failed, skipped) = {
                    let book = core.book();
                    let count = |s: Status| book.statuses.values().filter(|&&v| v == s).count();
                    (
                        count(Status::Ok),
                        count(Status::Failed),
                        count(Status::Skipped),
                    )
                };
                core.emit(Event::SweepFinished {
                    at: Timestamp::now(),
                    ok,
                    failed,
                    skipped,
                });
                let end = record_end(&core, RunState::Finished).await;
                dispatcher.abort();
                watchdog.abort();
                end?;
                Ok(Outcome::Finished)
            }
        }
    }
}

/// Record the sweep's end once everything before it is written, waiting a
/// while for a disk that stalls; a quit (a signal, `q`) meanwhile cuts the
/// wait to the short deadline: the process must exit.
async fn record_end(core: &Core, state: RunState) -> Result<(), store::Unrecorded> {
    let limit = match state {
        RunState::Finished => END_DEADLINE_FINISHED,
        _ => END_DEADLINE_INTERRUPTED,
    };
    let mut steer = core.steer.subscribe();
    let finish = core.recorder.finish(state, limit);
    tokio::pin!(finish);
    loop {
        tokio::select! {
            end = &mut finish => return end,
            changed = steer.changed() => {
                if changed.is_err() || core.quitting() {
                    let short = tokio::time::timeout(END_DEADLINE_INTERRUPTED, &mut finish).await;
                    return short.unwrap_or_else(|_| Err(store::Unrecorded::Stuck {
                        limit: END_DEADLINE_INTERRUPTED,
                        results_waiting: core.recorder.results_waiting(),
                    }));
                }
            }
        }
    }
}

/// Tell when a write to the run directory has not returned for a while (a
/// hung mount, a failing disk), and when it answers again: the sweep goes on
/// meanwhile, its results queued.
async fn watch_run_dir(core: Arc<Core>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut told: Option<store::Stall> = None;
    loop {
        tick.tick().await;
        let now = core.recorder.stalled(store::shared::FILE_DEADLINE);
        match (now, told) {
            (Some(s), None) => {
                core.notice(
                    Level::Warn,
                    format!(
                        "writing {} in {} has not returned for {:.0} s (a hung mount or a failing disk?): \
                         the sweep goes on, {} result(s) wait to be written",
                        s.file,
                        core.run_path.display(),
                        s.for_s,
                        s.results_waiting
                    ),
                );
                told = Some(s);
            }
            (None, Some(s)) => {
                core.notice(
                    Level::Info,
                    format!(
                        "{} answers again (a write to {} took over {:.0} s)",
                        core.run_path.display(),
                        s.file,
                        s.for_s
                    ),
                );
                told = None;
            }
            _ => {}
        }
    }
}
