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
        let _ = core.book().run.record_servers(&[]);
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
        let flow = schedule::schedule(core.clone()).await;
        dispatcher.abort();
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
                core.book().run.set_state(RunState::Interrupted)?;
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
                core.book().run.set_state(RunState::Finished)?;
                Ok(Outcome::Finished)
            }
        }
    }
}
