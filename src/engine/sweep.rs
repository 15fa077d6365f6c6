//! The sweep loop: every config in plan order (then the cells queued to run
//! again), and per config its cells on one server, relaunched when it dies or
//! stalls, until every cell has a record or the user quits.

use std::collections::VecDeque;
use std::time::Duration;

use super::commands::Between;
use super::outcome::CellEnd;
use super::{process, Engine, EngineError, Outcome};
use crate::model::{
    Event, Failure, FailureKind, FailureSource, Level, RunState, Status, Timestamp,
};
use crate::plan::{Cell, Config, Port};
use crate::store;

pub(super) enum Flow {
    Continue,
    Quit,
}

impl Engine {
    /// Run the sweep to the end (or until asked to quit).
    pub async fn run(mut self) -> Result<Outcome, EngineError> {
        let plan = self.plan.clone();
        self.emit(Event::SweepStarted {
            at: Timestamp::now(),
            plan: plan.name.clone(),
            run_dir: self.run.path.display().to_string(),
            configs: plan.configs.len(),
            cells: plan.cells.len(),
            already_done: self.done.len(),
        });
        // `--retry` is recorded like the `r` key, with its source.
        for (target, why) in std::mem::take(&mut self.opts.retry) {
            self.emit(Event::Action {
                at: Timestamp::now(),
                action: "retry".into(),
                target: Some(target),
                source: format!("command line ({why})"),
            });
        }
        let source = std::mem::replace(&mut self.opts.gpu, crate::gpu::GpuSource::Disabled);
        let mut gpu_log = store::GpuLog::open(&self.run.path);
        self.gpu = Some(crate::gpu::Telemetry::start(
            source,
            self.opts.gpu_interval,
            self.bus.events.clone(),
            Box::new(move |snap| gpu_log.keep(snap)),
        ));
        if let Some((pgid, start)) = store::recorded_server(&self.run.path) {
            if let Some(how) = process::stop_leftover(pgid, start).await {
                self.notice(
                    Level::Warn,
                    format!("stopped server process group {pgid} left by an earlier run ({how})"),
                );
            }
            self.run.clear_server();
        }
        // Servers of this run that were never recorded (killed between their
        // start and `server.pid`), found by their tag.
        for pgid in process::tagged_groups(&self.run_tag) {
            let how = process::stop_group(pgid).await;
            self.notice(
                Level::Warn,
                format!("stopped server process group {pgid} left by an earlier run of this directory ({how})"),
            );
        }
        let total = plan.configs.len();
        for (i, config) in plan.configs.iter().enumerate() {
            let mut pending: Vec<Cell> = plan
                .cells_of(&config.id)
                .filter(|c| !self.done.contains(&c.id))
                .cloned()
                .collect();
            if pending.is_empty() {
                continue;
            }
            match self.between_steps().await {
                Between::Quit => return self.interrupted("quit").await,
                Between::SkipConfig => {
                    self.skip_all(&pending)?;
                    continue;
                }
                Between::SkipCell => {
                    let first = pending.remove(0);
                    self.skip_all(&[first])?;
                }
                Between::Continue => {}
            }
            // An excluded config's cells are recorded as skipped, so the run
            // accounts for every cell.
            if self.excluded.contains(&config.id) {
                self.skip_all(&pending)?;
                continue;
            }
            if pending.is_empty() {
                continue;
            }
            if let Flow::Quit = self.run_config(config, i, total, pending).await? {
                return self.interrupted("quit").await;
            }
        }
        // Cells queued for another try run last, grouped by config.
        while let Some(target) = self.retry_queue.pop_front() {
            let cells: Vec<Cell> = plan
                .cells
                .iter()
                .filter(|c| c.id == target || c.config == target)
                .cloned()
                .collect();
            let Some(config) = cells.first().and_then(|c| plan.config(&c.config)) else {
                continue;
            };
            let i = plan
                .configs
                .iter()
                .position(|c| c.id == config.id)
                .unwrap_or(0);
            if self.excluded.contains(&config.id) {
                continue;
            }
            if let Between::Quit = self.between_steps().await {
                return self.interrupted("quit").await;
            }
            if let Flow::Quit = self.run_config(config, i, total, cells).await? {
                return self.interrupted("quit").await;
            }
        }
        // Counted per cell (the last record wins), so a retried cell counts once.
        let count = |s: Status| self.statuses.values().filter(|&&v| v == s).count();
        self.settle_gpu().await;
        let (ok, failed, skipped) = (
            count(Status::Ok),
            count(Status::Failed),
            count(Status::Skipped),
        );
        self.emit(Event::SweepFinished {
            at: Timestamp::now(),
            ok,
            failed,
            skipped,
        });
        self.run.set_state(RunState::Finished)?;
        Ok(Outcome::Finished)
    }

    /// One GPU sample after the last server stopped, so views end on the GPUs'
    /// real state rather than the last busy sample.
    async fn settle_gpu(&self) {
        if let Some(g) = &self.gpu {
            let _ = g.fresh_after(Timestamp::now()).await;
        }
    }

    async fn interrupted(mut self, reason: &str) -> Result<Outcome, EngineError> {
        self.settle_gpu().await;
        self.emit(Event::SweepInterrupted {
            at: Timestamp::now(),
            reason: reason.to_string(),
        });
        self.run.set_state(RunState::Interrupted)?;
        Ok(Outcome::Interrupted)
    }

    /// One config's cells on its server: launched (again after a crash, up to
    /// the plan's retries, or after a stall), each cell run and recorded.
    async fn run_config(
        &mut self,
        config: &Config,
        index: usize,
        total: usize,
        cells: Vec<Cell>,
    ) -> Result<Flow, EngineError> {
        let mut remaining: VecDeque<Cell> = cells.into();
        let mut attempt = 0u32;
        // Stalls restart the server for the next cell; this bounds the loop.
        let mut restarts_left = 2 + config.retries;
        while !remaining.is_empty() {
            let mut live = match self.launch(config, index, total, attempt).await {
                Ok(Some(live)) => live,
                Ok(None) => return Ok(Flow::Quit),
                Err(failure) if failure.source == FailureSource::Client => {
                    // Skipped by the user while the server was starting.
                    let cells: Vec<Cell> = remaining.drain(..).collect();
                    self.skip_all(&cells)?;
                    return Ok(Flow::Continue);
                }
                Err(failure) => {
                    let retry =
                        failure.source != FailureSource::Preflight && attempt < config.retries;
                    if retry {
                        attempt += 1;
                        self.note_relaunch(config, &failure, attempt);
                        continue;
                    }
                    let cells: Vec<Cell> = remaining.drain(..).collect();
                    self.fail_all(&cells, &failure)?;
                    return Ok(Flow::Continue);
                }
            };
            while let Some(cell) = remaining.front().cloned() {
                match self.between_steps().await {
                    Between::Quit => {
                        self.stop(config, &mut live.server).await;
                        return Ok(Flow::Quit);
                    }
                    Between::SkipConfig => {
                        let cells: Vec<Cell> = remaining.drain(..).collect();
                        self.skip_all(&cells)?;
                        break;
                    }
                    Between::SkipCell => {
                        if let Some(c) = remaining.pop_front() {
                            self.skip_all(&[c])?;
                        }
                        continue;
                    }
                    Between::Continue => {}
                }
                if self.excluded.contains(&config.id) {
                    let cells: Vec<Cell> = remaining.drain(..).collect();
                    self.skip_all(&cells)?;
                    break;
                }
                remaining.pop_front();
                match self.run_cell(config, &cell, &mut live).await {
                    CellEnd::Done(r) | CellEnd::Skipped(r) => self.record(r)?,
                    CellEnd::SkipConfig(r) => {
                        self.record(r)?;
                        let cells: Vec<Cell> = remaining.drain(..).collect();
                        self.skip_all(&cells)?;
                    }
                    CellEnd::Quit => {
                        self.stop(config, &mut live.server).await;
                        return Ok(Flow::Quit);
                    }
                    CellEnd::Stalled(r) => {
                        self.record(r)?;
                        self.stop(config, &mut live.server).await;
                        if restarts_left == 0 {
                            let failure = Failure::new(
                                FailureKind::Stalled,
                                FailureSource::Client,
                                format!("not run: the server of {} stalled too often", config.id),
                            );
                            let cells: Vec<Cell> = remaining.drain(..).collect();
                            self.fail_all(&cells, &failure)?;
                            return Ok(Flow::Continue);
                        }
                        restarts_left -= 1;
                        break;
                    }
                    CellEnd::ServerDied(r, failure) => {
                        // Recorded even when the config is relaunched: a crash
                        // the retry does not repeat is still a crash (the
                        // retry's record, appended later, is the cell's result).
                        self.record(r)?;
                        self.stop(config, &mut live.server).await;
                        if attempt < config.retries {
                            attempt += 1;
                            self.note_relaunch(config, &failure, attempt);
                            remaining.push_front(cell);
                            break;
                        }
                        let not_run = Failure {
                            message: format!(
                                "not run: the server died in {} ({})",
                                cell.id, failure.message
                            ),
                            ..failure
                        };
                        let cells: Vec<Cell> = remaining.drain(..).collect();
                        self.fail_all(&cells, &not_run)?;
                        return Ok(Flow::Continue);
                    }
                }
            }
            self.stop(config, &mut live.server).await;
            if let Port::Fixed(p) = config.port {
                if !process::wait_port_free(&config.host, p, Duration::from_secs(60)).await {
                    self.notice(
                        Level::Warn,
                        format!(
                            "{}: port {p} is still held after the server stopped",
                            config.id
                        ),
                    );
                }
            }
        }
        Ok(Flow::Continue)
    }

    fn note_relaunch(&mut self, config: &Config, failure: &Failure, attempt: u32) {
        let message = format!(
            "{}: {} — relaunching (attempt {} of {})",
            config.id,
            failure.message,
            attempt + 1,
            config.retries + 1
        );
        self.notice(Level::Warn, message);
    }
}
