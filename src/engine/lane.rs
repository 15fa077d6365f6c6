//! One config's worker: its cells on its server, launched (again after a
//! crash, up to the plan's retries, or after a stall), each cell run through
//! the one cell pipeline and recorded, and what the user asks between cells
//! (pause, skips, quit) honoured, until every cell of it has a record or the
//! sweep stops.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::cell::{self, Cause, CellSpec, Judged};
use super::commands::Between;
use super::core::{Core, Skip};
use super::launch::{self, Launcher, Live};
use super::outcome::{self, CellEnd};
use super::watch::Watch;
use super::{process, EngineError};
use crate::model::{Event, Failure, FailureKind, FailureSource, Level, Status, Timestamp};
use crate::plan::{Cell, Config, Port};

/// How long a server's unexplained death waits for a stop of the sweep that
/// may have caused it (signals reach the two processes a moment apart).
const QUIT_GRACE: Duration = Duration::from_millis(1500);

/// Whether the sweep goes on after a config.
pub(super) enum Flow {
    Continue,
    Quit,
}

pub(crate) struct Lane {
    core: Arc<Core>,
    /// Wakes when a command was applied.
    steer: watch::Receiver<u64>,
    /// The GPUs this config runs on: its list, the free ones picked for
    /// `auto:N`, or every GPU when it says nothing.
    gpus: Vec<u32>,
}

/// A launch's outcome for the loop over a config's cells.
enum Started {
    Live(Box<Live>),
    /// Launch again (a retry of a crashed start).
    Again,
    /// The config is done with (skipped, failed, or the sweep quits).
    Done(Flow),
}

impl Lane {
    pub(super) fn new(core: Arc<Core>, gpus: Vec<u32>) -> Lane {
        let steer = core.steer.subscribe();
        Lane { core, steer, gpus }
    }

    /// One config's cells on its server: launched (again after a crash, up to
    /// the plan's retries, or after a stall), each cell run and recorded.
    pub(super) async fn run_config(
        &mut self,
        config: &Config,
        index: usize,
        total: usize,
        cells: Vec<Cell>,
    ) -> Result<Flow, EngineError> {
        let mut remaining: VecDeque<Cell> = cells.into();
        // What was asked before it started: the same as between its cells.
        match self.between_steps(&config.id).await {
            Between::Quit => return Ok(Flow::Quit),
            Between::SkipConfig => {
                self.core.skip_all(&Vec::from(remaining))?;
                return Ok(Flow::Continue);
            }
            Between::SkipCell => {
                if let Some(first) = remaining.pop_front() {
                    self.core.skip_all(&[first])?;
                }
            }
            Between::Continue => {}
        }
        // An excluded config's cells are recorded as skipped, so the run
        // accounts for every cell.
        if self.core.book().excluded.contains(&config.id) {
            self.core.skip_all(&Vec::from(remaining))?;
            return Ok(Flow::Continue);
        }
        // What it needs put in place first (a model copied after a reboot).
        match super::prepare::wait_for_steps(&self.core, &mut self.steer, config, &mut remaining)
            .await?
        {
            super::prepare::Waited::Ready => {}
            super::prepare::Waited::Quit => return Ok(Flow::Quit),
            super::prepare::Waited::Failed | super::prepare::Waited::Skipped => {
                return Ok(Flow::Continue)
            }
        }
        let mut attempt = 0u32;
        // Stalls restart the server for the next cell; this bounds the loop.
        let mut restarts_left = 2 + config.retries;
        while !remaining.is_empty() {
            let mut live = match self
                .start(config, index, total, &mut attempt, &mut remaining)
                .await?
            {
                Started::Live(live) => live,
                Started::Again => continue,
                Started::Done(flow) => return Ok(flow),
            };
            let done = self
                .cells_on(
                    config,
                    &mut live,
                    &mut remaining,
                    &mut attempt,
                    &mut restarts_left,
                )
                .await?;
            launch::stop(&self.core, config, &mut live.server).await;
            if let Some(flow) = done {
                return Ok(flow);
            }
            if let Port::Fixed(p) = config.port {
                if !process::wait_port_free(&config.host, p, Duration::from_secs(60)).await {
                    self.core.notice(
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

    /// Launch the config's server; a failed launch is retried (as the plan
    /// allows) or fails the cells left.
    async fn start(
        &mut self,
        config: &Config,
        index: usize,
        total: usize,
        attempt: &mut u32,
        remaining: &mut VecDeque<Cell>,
    ) -> Result<Started, EngineError> {
        let mut launcher = Launcher {
            core: &self.core,
            steer: &mut self.steer,
            gpus: &self.gpus,
        };
        let failure = match launcher.launch(config, index, total, *attempt).await {
            Ok(Some(live)) => return Ok(Started::Live(Box::new(live))),
            Ok(None) => return Ok(Started::Done(Flow::Quit)),
            Err(failure) => failure,
        };
        // A launch the stop cut short is not the config's failure.
        if self.core.quitting() {
            return Ok(Started::Done(Flow::Quit));
        }
        let retry = failure.source != FailureSource::Preflight && *attempt < config.retries;
        if failure.source != FailureSource::Client && retry {
            *attempt += 1;
            self.note_relaunch(config, &failure, *attempt);
            return Ok(Started::Again);
        }
        let cells: Vec<Cell> = remaining.drain(..).collect();
        if failure.source == FailureSource::Client {
            // Skipped by the user while the server was starting.
            self.core.skip_all(&cells)?;
        } else {
            self.core.fail_all(&cells, &failure)?;
        }
        Ok(Started::Done(Flow::Continue))
    }

    /// The config's cells on one live server, until they are all recorded,
    /// the server must be launched again (`None`), or the config is done
    /// with (`Some`).
    async fn cells_on(
        &mut self,
        config: &Config,
        live: &mut Live,
        remaining: &mut VecDeque<Cell>,
        attempt: &mut u32,
        restarts_left: &mut u32,
    ) -> Result<Option<Flow>, EngineError> {
        while let Some(cell) = remaining.front().cloned() {
            match self.between_steps(&config.id).await {
                Between::Quit => return Ok(Some(Flow::Quit)),
                Between::SkipConfig => {
                    let cells: Vec<Cell> = remaining.drain(..).collect();
                    self.core.skip_all(&cells)?;
                    return Ok(None);
                }
                Between::SkipCell => {
                    if let Some(c) = remaining.pop_front() {
                        self.core.skip_all(&[c])?;
                    }
                    continue;
                }
                Between::Continue => {}
            }
            if self.core.book().excluded.contains(&config.id) {
                let cells: Vec<Cell> = remaining.drain(..).collect();
                self.core.skip_all(&cells)?;
                return Ok(None);
            }
            remaining.pop_front();
            let end = self.run_cell(config, &cell, live).await;
            // Asked to stop meanwhile: a server that went down with the
            // sweep (a batch scheduler's SIGTERM reaches both) or a cell
            // cut short by it says nothing of the config; the cell stays
            // unrecorded for a resume. A cell that finished whole counts.
            let whole = matches!(&end, CellEnd::Done(r) if r.status != Status::Failed);
            let stopped_with_us = match &end {
                CellEnd::ServerDied(_, f) => self.stopped_with_us(f).await,
                _ => self.core.quitting(),
            };
            if stopped_with_us && !whole {
                return Ok(Some(Flow::Quit));
            }
            match end {
                CellEnd::Done(r) | CellEnd::Skipped(r) => self.core.record(r)?,
                CellEnd::SkipConfig(r) => {
                    self.core.record(r)?;
                    let cells: Vec<Cell> = remaining.drain(..).collect();
                    self.core.skip_all(&cells)?;
                }
                CellEnd::Quit => return Ok(Some(Flow::Quit)),
                CellEnd::Stalled(r) => {
                    self.core.record(r)?;
                    launch::stop(&self.core, config, &mut live.server).await;
                    if *restarts_left == 0 {
                        let failure = Failure::new(
                            FailureKind::Stalled,
                            FailureSource::Client,
                            format!("not run: the server of {} stalled too often", config.id),
                        );
                        let cells: Vec<Cell> = remaining.drain(..).collect();
                        self.core.fail_all(&cells, &failure)?;
                        return Ok(Some(Flow::Continue));
                    }
                    *restarts_left -= 1;
                    return Ok(None);
                }
                CellEnd::ServerDied(r, failure) => {
                    // Recorded even when the config is relaunched: a crash
                    // the retry does not repeat is still a crash (the
                    // retry's record, appended later, is the cell's result).
                    self.core.record(r)?;
                    launch::stop(&self.core, config, &mut live.server).await;
                    if *attempt < config.retries {
                        *attempt += 1;
                        self.note_relaunch(config, &failure, *attempt);
                        remaining.push_front(cell);
                        return Ok(None);
                    }
                    let not_run = Failure {
                        message: format!(
                            "not run: the server died in {} ({})",
                            cell.id, failure.message
                        ),
                        ..failure
                    };
                    let cells: Vec<Cell> = remaining.drain(..).collect();
                    self.core.fail_all(&cells, &not_run)?;
                    return Ok(Some(Flow::Continue));
                }
            }
        }
        Ok(None)
    }

    /// Run one cell on a live server through the cell pipeline and say how
    /// it ended.
    async fn run_cell(&mut self, config: &Config, cell: &Cell, live: &mut Live) -> CellEnd {
        let core = self.core.clone();
        let started_at = Timestamp::now();
        core.cell_started(&cell.id, &config.id);
        core.emit(Event::CellStarted {
            at: started_at,
            cell: cell.id.clone(),
            config: config.id.clone(),
        });
        let failed = |f: Failure| outcome::failed(cell, started_at, f);
        launch::say_log_cuts(&core, &config.id, &live.server);
        // A server that died between cells cannot run this one.
        if live.server.exited().is_some() {
            live.server.drain_logs(Duration::from_secs(2)).await;
        }
        if let Some(f) = live.server.death() {
            return CellEnd::ServerDied(failed(f.clone()), f);
        }
        let spec = match CellSpec::of(&core.plan, cell) {
            Ok(spec) => spec,
            Err(f) => return CellEnd::Done(failed(f)),
        };
        let mut watch = Watch {
            core: &core,
            steer: &mut self.steer,
            gpus: &self.gpus,
            server: &mut live.server,
            cell,
            started_at,
        };
        match cell::run(&mut watch, &mut live.session, &spec).await {
            Judged::Ok {
                best,
                repetitions,
                spread,
                ..
            } => {
                let mut record = outcome::ok(cell, started_at, best.metrics);
                record.warnings = best.warnings;
                record.repetitions = repetitions;
                record.spread = spread;
                CellEnd::Done(record)
            }
            Judged::NotRun(f) => CellEnd::Done(failed(f)),
            Judged::Failed { failure, cause, .. } => match cause {
                Cause::ServerDied => CellEnd::ServerDied(failed(failure.clone()), failure),
                Cause::Stalled => CellEnd::Stalled(failed(live.server.stall_evidence(failure))),
                Cause::Invalid => CellEnd::Done(failed(failure)),
            },
            Judged::Stopped(end) => end,
        }
    }

    /// Between cells of `config`: what was asked for it, holding while paused.
    async fn between_steps(&mut self, config: &str) -> Between {
        loop {
            if self.core.quitting() {
                return Between::Quit;
            }
            match self.core.take_skip(config) {
                Some(Skip::Config) => return Between::SkipConfig,
                Some(Skip::Cell) => return Between::SkipCell,
                None => {}
            }
            if !self.core.book().paused {
                return Between::Continue;
            }
            if self.steer.changed().await.is_err() {
                return Between::Continue;
            }
        }
    }

    /// Whether a server's death came with a stop of the sweep: a death with
    /// no cause of its own (a clean exit, a signal) waits a moment for the
    /// quit that a scheduler's signal to the sweep brings just after.
    async fn stopped_with_us(&mut self, failure: &Failure) -> bool {
        if failure.kind != FailureKind::ServerExited {
            return self.core.quitting();
        }
        let grace = tokio::time::sleep(QUIT_GRACE);
        tokio::pin!(grace);
        loop {
            if self.core.quitting() {
                return true;
            }
            tokio::select! {
                _ = &mut grace => return false,
                changed = self.steer.changed() => {
                    if changed.is_err() {
                        return false;
                    }
                }
            }
        }
    }

    fn note_relaunch(&self, config: &Config, failure: &Failure, attempt: u32) {
        let message = format!(
            "{}: {} — relaunching (attempt {} of {})",
            config.id,
            failure.message,
            attempt + 1,
            config.retries + 1
        );
        self.core.notice(Level::Warn, message);
    }
}
