//! The read model of a sweep: a pure fold over [`Event`]s. The live dashboard,
//! an attached one, a resumed run, `sweeptop open` and the exports all build it
//! the same way, so it must not care about duplicates or order: a cell's record
//! is the one that finished last (a retry replaces it), and a state change older
//! than the one shown is ignored.
//!
//! [`ViewState::apply`] hands each event to the file of its family: `sweep`
//! (starts, ends, pauses, the header's badge and the ETA), `configs` (configs
//! starting and their servers), `cells` (running and finished cells, the
//! alert), `gpu` (samples and which config owns which GPU), `actions` (what
//! was asked and noticed), `prepare` (steps running and what they feed) and
//! `log` (the log tail and sweeptop's own notes in it).

mod actions;
mod cells;
mod configs;
mod gpu;
mod log;
mod prepare;
mod sweep;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

pub use cells::Running;
pub use configs::{ConfigRun, Server};
pub use gpu::{GpuView, History, GPU_HISTORY};
pub use log::{LineKind, LogLine, LogTail};
pub use prepare::Preparing;
pub use sweep::{Shown, Sweep, SweepState};

use crate::model::text::{display, display_string};
use crate::model::{CellRecord, Event, Level, ServerMeta, Timestamp};
use crate::plan::Plan;

#[derive(Debug, Clone, Default)]
pub struct ViewState {
    pub plan: Option<Arc<Plan>>,
    pub plan_name: String,
    pub run_dir: String,
    pub total_configs: usize,
    pub total_cells: usize,
    /// When the latest (re)start of the sweep began.
    pub started: Option<Timestamp>,
    /// Cells finished since then.
    pub finished_since_start: usize,
    /// Seconds spent paused since then, and when the pause in progress began:
    /// the ETA counts only the time the sweep was working.
    pub paused_s: f64,
    pub paused_since: Option<Timestamp>,
    pub sweep: SweepState,
    /// The configs started last, in the order they started: those running
    /// side by side, and the one that ran last (until another starts).
    pub configs: Vec<ConfigRun>,
    /// The running cell of each config that runs one.
    pub running: Vec<Running>,
    pub records: HashMap<String, CellRecord>,
    pub excluded: BTreeSet<String>,
    /// Cells or configs queued to run again, and when: a cell recorded
    /// after its retry was asked for is no longer queued (a retried cell that
    /// failed again without starting, as a crashed config's rest does).
    pub retry_queued: BTreeMap<String, Timestamp>,
    /// The failed cell that finished last.
    pub last_failure: Option<String>,
    /// Prepare steps running now, in the order they started.
    pub preparing: Vec<Preparing>,
    /// The latest warning or error notice.
    pub last_notice: Option<(Level, String)>,
    pub gpu: GpuView,
    pub log: LogTail,
    /// What each config benchmarked (its last launch), as it may be shown.
    pub servers: BTreeMap<String, ServerMeta>,
    /// The newest event time seen (the clock of a recorded run).
    pub latest_at: Timestamp,
    /// Attached views watching the sweep, as the sweep last said.
    pub viewers: Option<u32>,
    /// Who made the pause in force (an `Action`'s source), if it is known.
    pub paused_by: Option<String>,
    /// The source of the latest pause/resume action, for the `Paused` that follows.
    pub pause_source: Option<String>,
}

impl ViewState {
    pub fn new(plan: Option<Arc<Plan>>) -> ViewState {
        let mut v = ViewState::default();
        if let Some(p) = &plan {
            v.plan_name = p.name.clone();
            v.total_configs = p.configs.len();
            v.total_cells = p.cells.len();
        }
        v.plan = plan;
        v
    }

    /// Fold one event in: its change to the state, then sweeptop's note of
    /// it in the log pane.
    pub fn apply(&mut self, ev: &Event) {
        if let Some(at) = ev.at() {
            self.latest_at = self.latest_at.max(at);
        }
        match ev {
            Event::SweepStarted {
                at,
                plan,
                run_dir,
                configs,
                cells,
                ..
            } => self.sweep_started(*at, plan, run_dir, *configs, *cells),
            Event::SweepFinished {
                at,
                ok,
                failed,
                skipped,
            } => self.end_sweep(
                *at,
                Sweep::Finished {
                    ok: *ok,
                    failed: *failed,
                    skipped: *skipped,
                },
            ),
            Event::SweepInterrupted { at, reason } => self.end_sweep(
                *at,
                Sweep::Interrupted {
                    reason: reason.clone(),
                },
            ),
            Event::Paused { at } => self.pause(*at, true),
            Event::Resumed { at } => self.pause(*at, false),
            Event::ConfigStarting {
                at,
                config,
                phase,
                index,
                total,
                command,
                attempt,
                gpus,
            } => self.config_starting(ConfigRun {
                id: config.clone(),
                phase: phase.clone(),
                index: *index,
                total: *total,
                attempt: *attempt,
                command: display(command).into_owned(),
                server: Server::Starting,
                at: *at,
                gpus: gpus.clone(),
            }),
            Event::ServerReady {
                at,
                config,
                after_s,
                context_limit,
                model,
                server,
                ..
            } => self.server_ready(
                *at,
                config,
                server.as_deref(),
                Server::Ready {
                    after_s: *after_s,
                    context_limit: *context_limit,
                    model: display(model).into_owned(),
                },
            ),
            Event::ServerExited {
                at,
                config,
                code,
                signal,
            } => self.set_server(
                config,
                *at,
                Server::Exited {
                    code: *code,
                    signal: *signal,
                },
            ),
            Event::ServerStopped {
                at, config, how, ..
            } => self.server_stopped(*at, config, how),
            Event::CellStarted { at, cell, config } => self.cell_started(*at, cell, config),
            Event::CellFinished { record, .. } => self.record((**record).clone()),
            Event::Action {
                at,
                action,
                target,
                source,
            } => self.action(*at, action, target.as_deref(), source),
            Event::Notice { level, message, .. } => self.notice(*level, message),
            Event::PrepareStarted {
                at,
                step,
                expect_bytes,
                configs,
                ..
            } => self.prepare_started(*at, step, *expect_bytes, configs),
            Event::PrepareProgress {
                at,
                step,
                bytes,
                rate_bps,
                ..
            } => self.prepare_progress(*at, step, *bytes, *rate_bps),
            Event::PrepareEnded { at, step, .. } => self.prepare_ended(*at, step),
            Event::Gpu { snapshot } => self.gpu_sample(snapshot),
            Event::Viewers { count } => self.viewers = Some(*count),
            Event::Log { config, line, mark } => self.log_line(config, line, *mark),
        }
        self.note(ev);
    }
}

/// `s` as it may be shown: untrusted text (server logs, HTTP bodies, process
/// names) is sanitised once, where it enters the view model.
fn shown(s: &mut String) {
    *s = display_string(std::mem::take(s));
}
