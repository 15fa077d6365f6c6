//! Which config runs when: phase by phase, each config placed on GPUs and
//! run in a lane (one at a time, or side by side where the phase packs and
//! their GPUs do not overlap), then the cells queued to run again, one config
//! at a time.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::core::Core;
use super::lane::{Flow, Lane};
use super::place::{self, Place};
use super::EngineError;
use crate::model::{Failure, GpuSnapshot, Timestamp};
use crate::plan::{Cell, Config};

/// How long a config may wait for free GPUs with nothing of ours running
/// (memory another process is still releasing) before it fails.
const WAIT_FOR_FREE: Duration = Duration::from_secs(20);
/// How often GPUs that others hold are looked at again while a config waits
/// for them.
const RECHECK: Duration = Duration::from_millis(500);

/// A lane's end: its config and how it ended.
type LaneEnd = (String, Result<Flow, EngineError>);

/// Every phase in plan order, then the queued retries.
pub(super) async fn schedule(core: Arc<Core>) -> Result<Flow, EngineError> {
    let plan = core.plan.clone();
    for phase in &plan.phases {
        let configs: Vec<&Config> = phase
            .configs
            .iter()
            .filter_map(|id| plan.config(id))
            .collect();
        let run = PhaseRun::new(core.clone(), &configs, phase.pack);
        if let Flow::Quit = run.run().await? {
            return Ok(Flow::Quit);
        }
    }
    // Cells queued for another try run last, grouped by config, one at a time.
    loop {
        let Some(target) = core.book().retry_queue.pop_front() else {
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
        if core.book().excluded.contains(&config.id) {
            continue;
        }
        if let Flow::Quit = run_alone(&core, config, cells).await? {
            return Ok(Flow::Quit);
        }
    }
    Ok(Flow::Continue)
}

/// A retry: one config's given cells, alone.
async fn run_alone(
    core: &Arc<Core>,
    config: &Config,
    cells: Vec<Cell>,
) -> Result<Flow, EngineError> {
    let gpus = match wait_for_place(core, config).await {
        Some(Ok(gpus)) => gpus,
        Some(Err(failure)) => {
            core.fail_all(&cells, &failure)?;
            return Ok(Flow::Continue);
        }
        None => return Ok(Flow::Quit),
    };
    let (index, total) = position(core, config);
    Lane::new(core.clone(), gpus)
        .run_config(config, index, total, cells)
        .await
}

/// Where a config alone may run, waiting out a pause and memory being
/// released; `None`: quit.
async fn wait_for_place(core: &Core, config: &Config) -> Option<Result<Vec<u32>, Failure>> {
    let since = Instant::now();
    let mut steer = core.steer.subscribe();
    loop {
        if core.quitting() {
            return None;
        }
        let snapshot = gpu_snapshot(core).await;
        if !core.book().paused {
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
            _ = tokio::time::sleep(RECHECK) => {}
        }
    }
}

/// The GPUs as last sampled (waiting for the first sample once).
async fn gpu_snapshot(core: &Core) -> Option<GpuSnapshot> {
    let g = core.gpu()?;
    match g.latest() {
        Some(s) => Some(s),
        None => g.fresh_after(Timestamp::default()).await,
    }
}

/// A config's place in the plan (for "config 3/8"), and how many there are.
fn position(core: &Core, config: &Config) -> (usize, usize) {
    let index = core
        .plan
        .configs
        .iter()
        .position(|c| c.id == config.id)
        .unwrap_or(0);
    (index, core.plan.configs.len())
}

/// A phase's configs with cells left: one at a time, or (`pack`) each
/// started as soon as GPUs it does not share with a running one are free,
/// in plan order, a later config going first when it fits and an earlier
/// one does not.
struct PhaseRun<'a> {
    core: Arc<Core>,
    pack: bool,
    /// Configs not started yet.
    queue: VecDeque<&'a Config>,
    lanes: JoinSet<LaneEnd>,
    /// The GPUs of the running lanes' configs.
    held: Vec<(String, Vec<u32>)>,
    outcome: Result<Flow, EngineError>,
    /// Since when nothing of ours runs and others' memory keeps a config out.
    waiting_since: Option<Instant>,
}

impl<'a> PhaseRun<'a> {
    fn new(core: Arc<Core>, configs: &[&'a Config], pack: bool) -> PhaseRun<'a> {
        PhaseRun {
            core,
            pack,
            queue: configs.iter().copied().collect(),
            lanes: JoinSet::new(),
            held: Vec::new(),
            outcome: Ok(Flow::Continue),
            waiting_since: None,
        }
    }

    /// Whether the phase is winding down (a quit, or a lane's error).
    fn stopping(&self) -> bool {
        self.core.quitting() || !matches!(self.outcome, Ok(Flow::Continue))
    }

    async fn run(mut self) -> Result<Flow, EngineError> {
        let mut steer = self.core.steer.subscribe();
        loop {
            if !self.stopping() && !self.core.book().paused {
                self.start_what_fits().await?;
            }
            if self.lanes.is_empty() && (self.queue.is_empty() || self.stopping()) {
                break;
            }
            tokio::select! {
                end = self.lanes.join_next(), if !self.lanes.is_empty() => {
                    if let Some(end) = end {
                        self.lane_ended(end);
                    }
                }
                _ = steer.changed() => {}
                // GPUs freed by others, or memory released after a stop: looked
                // at again only where a config could start on them. One at a
                // time, a running lane's end is what lets the next one in.
                _ = tokio::time::sleep(RECHECK), if !self.queue.is_empty() && (self.pack || self.lanes.is_empty()) => {}
            }
        }
        if self.core.quitting() && matches!(self.outcome, Ok(Flow::Continue)) {
            self.outcome = Ok(Flow::Quit);
        }
        self.outcome
    }

    /// Start every queued config that may run now, in plan order; fail those
    /// that never can, or whose GPUs others' memory holds too long.
    async fn start_what_fits(&mut self) -> Result<(), EngineError> {
        let core = self.core.clone();
        let snapshot = if self
            .queue
            .iter()
            .any(|c| c.gpus_wanted().is_none() || c.gpu_count.is_some())
        {
            gpu_snapshot(&core).await
        } else {
            None
        };
        let mut i = 0;
        while i < self.queue.len() {
            if !self.pack && !self.lanes.is_empty() {
                break;
            }
            let config = self.queue[i];
            let pending: Vec<Cell> = {
                let book = core.book();
                core.plan
                    .cells_of(&config.id)
                    .filter(|c| !book.done.contains(&c.id))
                    .cloned()
                    .collect()
            };
            if pending.is_empty() {
                self.queue.remove(i);
                continue;
            }
            let taken: Vec<Vec<u32>> = self.held.iter().map(|(_, g)| g.clone()).collect();
            match place::place(config, &taken, snapshot.as_ref()) {
                Place::Now(gpus) => {
                    self.queue.remove(i);
                    self.waiting_since = None;
                    self.start(config, gpus, pending);
                    if !self.pack {
                        break;
                    }
                }
                Place::Never(failure) => {
                    self.queue.remove(i);
                    core.fail_all(&pending, &failure)?;
                }
                Place::Later if self.lanes.is_empty() => {
                    // Nothing of ours holds a GPU: only others' memory
                    // stands in the way, for a while at most.
                    let since = *self.waiting_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= WAIT_FOR_FREE {
                        self.queue.remove(i);
                        self.waiting_since = None;
                        core.fail_all(&pending, &place::none_free(config, snapshot.as_ref()))?;
                        continue;
                    }
                    i += 1;
                }
                Place::Later => i += 1,
            }
        }
        Ok(())
    }

    /// A config's lane, started on `gpus`.
    fn start(&mut self, config: &Config, gpus: Vec<u32>, pending: Vec<Cell>) {
        self.held.push((config.id.clone(), gpus.clone()));
        let (index, total) = position(&self.core, config);
        let mut lane = Lane::new(self.core.clone(), gpus);
        let config = config.clone();
        self.lanes.spawn(async move {
            let end = lane.run_config(&config, index, total, pending).await;
            (config.id, end)
        });
    }

    /// A lane ended: its GPUs are free; a quit or an error stops the others.
    fn lane_ended(&mut self, end: Result<LaneEnd, tokio::task::JoinError>) {
        let (config, flow) = match end {
            Ok(e) => e,
            Err(e) => (String::new(), Err(EngineError::Lane(e))),
        };
        self.held.retain(|(c, _)| *c != config);
        // A skip meant for it that came too late is not left for a retry.
        self.core
            .book()
            .skips
            .retain(|(c, _)| c.as_deref() != Some(config.as_str()));
        match flow {
            Ok(Flow::Continue) => {}
            Ok(Flow::Quit) => {
                if matches!(self.outcome, Ok(Flow::Continue)) {
                    self.outcome = Ok(Flow::Quit);
                }
            }
            Err(e) => {
                // The others stop as if quit, then the error is said.
                if self.outcome.is_ok() {
                    self.outcome = Err(e);
                }
                self.core.book().quit = true;
                self.core.steer.send_modify(|n| *n += 1);
            }
        }
    }
}
