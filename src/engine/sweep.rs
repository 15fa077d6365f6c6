//! The sweep loop: phase by phase, each config placed on GPUs and run in a
//! lane (one at a time, or side by side where the phase packs and their GPUs
//! do not overlap), then the cells queued to run again; per config its cells
//! on one server, relaunched when it dies or stalls, until every cell has a
//! record or the user quits.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::commands::Between;
use super::outcome::CellEnd;
use super::place::{self, Place};
use super::{process, Core, Engine, EngineError, Lane, Outcome};
use crate::model::{
    Event, Failure, FailureKind, FailureSource, Level, RunState, Status, Timestamp,
};
use crate::plan::{Cell, Config, Port};
use crate::store;

pub(super) enum Flow {
    Continue,
    Quit,
}

/// How long a config may wait for free GPUs with nothing of ours running
/// (memory another process is still releasing) before it fails.
const WAIT_FOR_FREE: Duration = Duration::from_secs(20);

/// How long a server's unexplained death waits for a stop of the sweep that
/// may have caused it (signals reach the two processes a moment apart).
const QUIT_GRACE: Duration = Duration::from_millis(1500);

impl Engine {
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
        let flow = core.clone().schedule().await;
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

/// A lane's end: its config and how it ended.
type LaneEnd = (String, Result<Flow, EngineError>);

impl Core {
    /// Every phase in plan order, then the queued retries.
    async fn schedule(self: Arc<Core>) -> Result<Flow, EngineError> {
        let plan = self.plan.clone();
        for phase in &plan.phases {
            let configs: Vec<&Config> = phase
                .configs
                .iter()
                .filter_map(|id| plan.config(id))
                .collect();
            if let Flow::Quit = self.clone().run_phase(&configs, phase.pack).await? {
                return Ok(Flow::Quit);
            }
        }
        // Cells queued for another try run last, grouped by config, one at a time.
        loop {
            let Some(target) = self.book().retry_queue.pop_front() else {
                break;
            };
            let cells: Vec<Cell> = plan
                .cells
                .iter()
                .filter(|c| c.id == target || c.config == target)
                .cloned()
                .collect();
            let Some(config) = cells.first().and_then(|c| plan.config(&c.config)) else {
                continue;
            };
            if self.book().excluded.contains(&config.id) {
                continue;
            }
            if let Flow::Quit = self.clone().run_phase_cells(config, cells).await? {
                return Ok(Flow::Quit);
            }
        }
        Ok(Flow::Continue)
    }

    /// A retry: one config's given cells, alone.
    async fn run_phase_cells(
        self: Arc<Core>,
        config: &Config,
        cells: Vec<Cell>,
    ) -> Result<Flow, EngineError> {
        let gpus = match self.wait_for_place(config).await {
            Some(Ok(gpus)) => gpus,
            Some(Err(failure)) => {
                self.fail_all(&cells, &failure)?;
                return Ok(Flow::Continue);
            }
            None => return Ok(Flow::Quit),
        };
        let (index, total) = self.position(config);
        self.lane(gpus)
            .run_config(config, index, total, cells)
            .await
    }

    /// Where a config alone may run, waiting out a pause and memory being
    /// released; `None`: quit.
    async fn wait_for_place(&self, config: &Config) -> Option<Result<Vec<u32>, Failure>> {
        let since = Instant::now();
        let mut steer = self.steer.subscribe();
        loop {
            if self.quitting() {
                return None;
            }
            let snapshot = self.gpu_snapshot().await;
            if !self.book().paused {
                match place::place(config, &[], snapshot.as_ref()) {
                    Place::Now(gpus) => return Some(Ok(gpus)),
                    Place::Never(f) => return Some(Err(f)),
                    Place::Later if since.elapsed() >= WAIT_FOR_FREE => {
                        return Some(Err(place::none_free(config, snapshot.as_ref())))
                    }
                    Place::Later => {}
                }
            }
            tokio::select! {
                _ = steer.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            }
        }
    }

    /// The GPUs as last sampled (waiting for the first sample once).
    async fn gpu_snapshot(&self) -> Option<crate::model::GpuSnapshot> {
        let g = self.gpu()?;
        match g.latest() {
            Some(s) => Some(s),
            None => g.fresh_after(Timestamp::default()).await,
        }
    }

    fn position(&self, config: &Config) -> (usize, usize) {
        let index = self
            .plan
            .configs
            .iter()
            .position(|c| c.id == config.id)
            .unwrap_or(0);
        (index, self.plan.configs.len())
    }

    /// A phase's configs with cells left: one at a time, or (`pack`) each
    /// started as soon as GPUs it does not share with a running one are free,
    /// in plan order, a later config going first when it fits and an earlier
    /// one does not.
    async fn run_phase(
        self: Arc<Core>,
        configs: &[&Config],
        pack: bool,
    ) -> Result<Flow, EngineError> {
        let mut queue: VecDeque<&Config> = configs.iter().copied().collect();
        let mut lanes: JoinSet<LaneEnd> = JoinSet::new();
        let mut held: Vec<(String, Vec<u32>)> = Vec::new();
        let mut steer = self.steer.subscribe();
        let mut outcome: Result<Flow, EngineError> = Ok(Flow::Continue);
        let mut waiting_since: Option<Instant> = None;
        loop {
            let stopping = self.quitting() || !matches!(outcome, Ok(Flow::Continue));
            if !stopping && !self.book().paused {
                let snapshot = if queue
                    .iter()
                    .any(|c| c.gpus_wanted().is_none() || c.gpu_count.is_some())
                {
                    self.gpu_snapshot().await
                } else {
                    None
                };
                let mut i = 0;
                while i < queue.len() {
                    if !pack && !lanes.is_empty() {
                        break;
                    }
                    let config = queue[i];
                    let pending: Vec<Cell> = {
                        let book = self.book();
                        self.plan
                            .cells_of(&config.id)
                            .filter(|c| !book.done.contains(&c.id))
                            .cloned()
                            .collect()
                    };
                    if pending.is_empty() {
                        queue.remove(i);
                        continue;
                    }
                    let taken: Vec<Vec<u32>> = held.iter().map(|(_, g)| g.clone()).collect();
                    match place::place(config, &taken, snapshot.as_ref()) {
                        Place::Now(gpus) => {
                            queue.remove(i);
                            waiting_since = None;
                            held.push((config.id.clone(), gpus.clone()));
                            let (index, total) = self.position(config);
                            let mut lane = self.lane(gpus);
                            let config = config.clone();
                            lanes.spawn(async move {
                                let end = lane.run_config(&config, index, total, pending).await;
                                (config.id, end)
                            });
                            if !pack {
                                break;
                            }
                        }
                        Place::Never(failure) => {
                            queue.remove(i);
                            self.fail_all(&pending, &failure)?;
                        }
                        Place::Later if lanes.is_empty() => {
                            // Nothing of ours holds a GPU: only others' memory
                            // stands in the way, for a while at most.
                            let since = *waiting_since.get_or_insert_with(Instant::now);
                            if since.elapsed() >= WAIT_FOR_FREE {
                                queue.remove(i);
                                waiting_since = None;
                                self.fail_all(
                                    &pending,
                                    &place::none_free(config, snapshot.as_ref()),
                                )?;
                                continue;
                            }
                            i += 1;
                        }
                        Place::Later => i += 1,
                    }
                }
            }
            let stopping = self.quitting() || !matches!(outcome, Ok(Flow::Continue));
            if lanes.is_empty() && (queue.is_empty() || stopping) {
                break;
            }
            tokio::select! {
                end = lanes.join_next(), if !lanes.is_empty() => {
                    let Some(end) = end else { continue };
                    let (config, flow) = match end {
                        Ok(e) => e,
                        Err(e) => (String::new(), Err(EngineError::Lane(e.to_string()))),
                    };
                    held.retain(|(c, _)| *c != config);
                    // A skip meant for it that came too late is not left for a retry.
                    self.book().skips.retain(|(c, _)| c.as_deref() != Some(config.as_str()));
                    match flow {
                        Ok(Flow::Continue) => {}
                        Ok(Flow::Quit) => {
                            if matches!(outcome, Ok(Flow::Continue)) {
                                outcome = Ok(Flow::Quit);
                            }
                        }
                        Err(e) => {
                            // The others stop as if quit, then the error is said.
                            if outcome.is_ok() {
                                outcome = Err(e);
                            }
                            self.book().quit = true;
                            self.steer.send_modify(|n| *n += 1);
                        }
                    }
                }
                _ = steer.changed() => {}
                // GPUs freed by others, or memory released after a stop.
                _ = tokio::time::sleep(Duration::from_millis(500)), if !queue.is_empty() => {}
            }
        }
        if self.quitting() && matches!(outcome, Ok(Flow::Continue)) {
            outcome = Ok(Flow::Quit);
        }
        outcome
    }
}

impl Lane {
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
        // What was asked before it started: the same as between its cells.
        match self.between_steps(&config.id).await {
            Between::Quit => return Ok(Flow::Quit),
            Between::SkipConfig => {
                self.skip_all(&Vec::from(remaining))?;
                return Ok(Flow::Continue);
            }
            Between::SkipCell => {
                if let Some(first) = remaining.pop_front() {
                    self.skip_all(&[first])?;
                }
            }
            Between::Continue => {}
        }
        // An excluded config's cells are recorded as skipped, so the run
        // accounts for every cell.
        if self.book().excluded.contains(&config.id) {
            self.skip_all(&Vec::from(remaining))?;
            return Ok(Flow::Continue);
        }
        let mut attempt = 0u32;
        // Stalls restart the server for the next cell; this bounds the loop.
        let mut restarts_left = 2 + config.retries;
        while !remaining.is_empty() {
            let mut live = match self.launch(config, index, total, attempt).await {
                Ok(Some(live)) => live,
                Ok(None) => return Ok(Flow::Quit),
                // A launch the stop cut short is not the config's failure.
                Err(_) if self.quitting() => return Ok(Flow::Quit),
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
                match self.between_steps(&config.id).await {
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
                if self.book().excluded.contains(&config.id) {
                    let cells: Vec<Cell> = remaining.drain(..).collect();
                    self.skip_all(&cells)?;
                    break;
                }
                remaining.pop_front();
                let end = self.run_cell(config, &cell, &mut live).await;
                // Asked to stop meanwhile: a server that went down with the
                // sweep (a batch scheduler's SIGTERM reaches both) or a cell
                // cut short by it says nothing of the config; the cell stays
                // unrecorded for a resume. A cell that finished whole counts.
                let whole = matches!(&end, CellEnd::Done(r) if r.status != Status::Failed);
                let stopped_with_us = match &end {
                    CellEnd::ServerDied(_, f) => self.stopped_with_us(f).await,
                    _ => self.quitting(),
                };
                if stopped_with_us && !whole {
                    self.stop(config, &mut live.server).await;
                    return Ok(Flow::Quit);
                }
                match end {
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

    /// Whether a server's death came with a stop of the sweep: a death with
    /// no cause of its own (a clean exit, a signal) waits a moment for the
    /// quit that a scheduler's signal to the sweep brings just after.
    async fn stopped_with_us(&mut self, failure: &Failure) -> bool {
        if failure.kind != FailureKind::ServerExited {
            return self.quitting();
        }
        let grace = tokio::time::sleep(QUIT_GRACE);
        tokio::pin!(grace);
        loop {
            if self.quitting() {
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
        self.notice(Level::Warn, message);
    }
}
