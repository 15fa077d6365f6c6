//! The read model of a sweep: a pure fold over [`Event`]s. The live dashboard,
//! an attached one, a resumed run, `sweeptop open` and the exports all build it
//! the same way, so it must not care about duplicates or order: a cell's record
//! is the one that finished last (a retry replaces it), and a state change older
//! than the one shown is ignored.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use crate::model::text::{display, display_string};
use crate::model::{
    CellRecord, Event, GpuSnapshot, GpuStatus, Level, LogMark, ServerMeta, Status, Timestamp,
};
use crate::plan::Plan;

/// Log lines kept for scrolling back.
pub const LOG_LINES: usize = 5000;
/// GPU samples kept for the sparklines.
pub const GPU_HISTORY: usize = 240;

/// Where the sweep as a whole stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sweep {
    /// No `SweepStarted` seen yet.
    Waiting,
    Running,
    Finished {
        ok: usize,
        failed: usize,
        skipped: usize,
    },
    Interrupted {
        reason: String,
    },
}

/// What the header's state badge says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    Starting,
    Running,
    Paused,
    Stopping,
    Finished,
    Interrupted,
}

impl Shown {
    pub fn label(self) -> &'static str {
        match self {
            Shown::Starting => "STARTING",
            Shown::Running => "RUNNING",
            Shown::Paused => "PAUSED",
            Shown::Stopping => "STOPPING",
            Shown::Finished => "FINISHED",
            Shown::Interrupted => "INTERRUPTED",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Server {
    Starting,
    Ready {
        after_s: f64,
        context_limit: Option<u64>,
        model: String,
    },
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    Stopped {
        how: String,
    },
}

/// The config being run (or the last one run).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigRun {
    pub id: String,
    pub phase: String,
    pub index: usize,
    pub total: usize,
    pub attempt: u32,
    pub command: String,
    pub server: Server,
    pub at: Timestamp,
    /// The GPUs it runs on, as the engine said (empty: unknown).
    pub gpus: Vec<u32>,
}

impl ConfigRun {
    /// Its server is starting or ready.
    pub fn live(&self) -> bool {
        !matches!(self.server, Server::Stopped { .. } | Server::Exited { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    pub cell: String,
    pub config: String,
    pub since: Timestamp,
}

/// `s` as it may be shown: untrusted text (server logs, HTTP bodies, process
/// names) is sanitised once, where it enters the view model.
fn shown(s: &mut String) {
    *s = display_string(std::mem::take(s));
}

/// How a log line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineKind {
    Plain,
    Failure,
    Ready,
    /// sweeptop's own note (config starting, server stopped, a notice…).
    Note,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub config: String,
    pub text: String,
    pub kind: LineKind,
}

/// The server log tail (plus sweeptop's notes), bounded.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogTail {
    pub lines: VecDeque<LogLine>,
    /// Lines ever pushed (scroll positions are kept stable with it).
    pub pushed: u64,
    /// Lines the view missed because it fell behind (the log file has them).
    pub missed: u64,
}

impl LogTail {
    pub fn push(&mut self, line: LogLine) {
        if self.lines.len() == LOG_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
        self.pushed += 1;
    }
}

/// GPU telemetry as shown: the latest snapshot and a short history per GPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuView {
    pub latest: Option<GpuSnapshot>,
    /// Utilisation history per GPU index (None: not reported at that sample).
    pub util: BTreeMap<u32, VecDeque<Option<u8>>>,
}

impl GpuView {
    pub fn status(&self) -> Option<&GpuStatus> {
        self.latest.as_ref().map(|s| &s.status)
    }
}

#[derive(Debug, Clone, Default)]
pub struct ViewState {
    pub plan: Option<Arc<Plan>>,
    pub plan_name: String,
    pub run_dir: String,
    pub total_configs: usize,
    pub total_cells: usize,
    /// When the latest (re)start of the sweep began.
    pub started: Option<Timestamp>,
    /// Cells finished since then (for the ETA).
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
    /// Cells or configs queued to run again.
    pub retry_queued: BTreeSet<String>,
    /// The failed cell that finished last.
    pub last_failure: Option<String>,
    /// The latest warning or error notice.
    pub last_notice: Option<(Level, String)>,
    pub gpu: GpuView,
    pub log: LogTail,
    /// What each config benchmarked (its last launch), as it may be shown.
    pub servers: std::collections::BTreeMap<String, ServerMeta>,
    /// The newest event time seen (the clock of a recorded run).
    pub latest_at: Timestamp,
    /// Attached views watching the sweep, as the sweep last said.
    pub viewers: Option<u32>,
    /// Who made the pause in force (an `Action`'s source), if it is known.
    pub paused_by: Option<String>,
    /// The source of the latest pause/resume action, for the `Paused` that follows.
    pub pause_source: Option<String>,
}

/// The sweep state with the time of each change, so older events cannot undo newer ones.
#[derive(Debug, Clone)]
pub struct SweepState {
    pub sweep: Sweep,
    pub sweep_at: Timestamp,
    pub paused: bool,
    pub paused_at: Timestamp,
    /// A quit was asked for and the engine is stopping.
    pub stopping: bool,
    pub stopping_at: Timestamp,
}

impl Default for SweepState {
    fn default() -> Self {
        SweepState {
            sweep: Sweep::Waiting,
            sweep_at: Timestamp::default(),
            paused: false,
            paused_at: Timestamp::default(),
            stopping: false,
            stopping_at: Timestamp::default(),
        }
    }
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

    /// Fold one event in.
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
            } => {
                self.plan_name = plan.clone();
                self.run_dir = run_dir.clone();
                self.total_configs = *configs;
                self.total_cells = *cells;
                if self.started.is_none_or(|s| *at >= s) {
                    self.started = Some(*at);
                    (self.paused_s, self.paused_since) = (0.0, None);
                    self.finished_since_start = self
                        .records
                        .values()
                        .filter(|r| r.finished_at >= *at)
                        .count();
                }
                let s = &mut self.sweep;
                if *at >= s.sweep_at {
                    s.sweep = Sweep::Running;
                    s.sweep_at = *at;
                }
                // A fresh start is neither paused nor stopping.
                if *at >= s.paused_at {
                    s.paused = false;
                    s.paused_at = *at;
                }
                if *at >= s.stopping_at {
                    s.stopping = false;
                    s.stopping_at = *at;
                }
                self.running.retain(|r| r.since > *at);
                self.configs.retain(|c| c.at > *at);
            }
            Event::ConfigStarting {
                at,
                config,
                phase,
                index,
                total,
                command,
                attempt,
                gpus,
            } => {
                let stale = self.configs.iter().any(|c| c.id == *config && c.at > *at);
                if !stale {
                    // The ones that ended make way; those running stay beside it.
                    self.configs.retain(|c| c.live() && c.id != *config);
                    self.configs.push(ConfigRun {
                        id: config.clone(),
                        phase: phase.clone(),
                        index: *index,
                        total: *total,
                        attempt: *attempt,
                        command: display(command).into_owned(),
                        server: Server::Starting,
                        at: *at,
                        gpus: gpus.clone(),
                    });
                }
                self.note(config, ev);
            }
            Event::ServerReady {
                at,
                config,
                after_s,
                context_limit,
                model,
                server,
                ..
            } => {
                if let Some(meta) = server {
                    self.servers.insert(config.clone(), shown_meta(meta));
                }
                self.set_server(
                    config,
                    at,
                    Server::Ready {
                        after_s: *after_s,
                        context_limit: *context_limit,
                        model: display(model).into_owned(),
                    },
                );
                self.note(config, ev);
            }
            Event::ServerExited {
                at,
                config,
                code,
                signal,
            } => {
                self.set_server(
                    config,
                    at,
                    Server::Exited {
                        code: *code,
                        signal: *signal,
                    },
                );
                self.note(config, ev);
            }
            Event::ServerStopped {
                at, config, how, ..
            } => {
                self.set_server(config, at, Server::Stopped { how: how.clone() });
                self.running
                    .retain(|r| !(r.config == *config && r.since <= *at));
                self.note(config, ev);
            }
            Event::CellStarted { at, cell, config } => {
                let stale = self.records.get(cell).is_some_and(|r| r.finished_at >= *at)
                    || self
                        .running
                        .iter()
                        .any(|r| r.config == *config && r.since > *at)
                    || self.sweep.sweep_at > *at
                        && !matches!(self.sweep.sweep, Sweep::Running | Sweep::Waiting);
                if !stale {
                    self.running.retain(|r| r.config != *config);
                    self.running.push(Running {
                        cell: cell.clone(),
                        config: config.clone(),
                        since: *at,
                    });
                    self.retry_queued.remove(cell);
                    self.retry_queued.remove(config);
                }
            }
            Event::CellFinished { record, .. } => self.record((**record).clone()),
            Event::Action {
                at,
                action,
                target,
                source,
            } => {
                if matches!(action.as_str(), "pause" | "resume" | "toggle_pause") {
                    self.pause_source = Some(source.clone());
                }
                match (action.as_str(), target) {
                    ("quit", _) if *at >= self.sweep.stopping_at => {
                        self.sweep.stopping = true;
                        self.sweep.stopping_at = *at;
                    }
                    ("exclude", Some(config)) => {
                        self.excluded.insert(config.clone());
                    }
                    ("include", Some(config)) => {
                        self.excluded.remove(config);
                    }
                    ("retry", Some(target)) => {
                        self.retry_queued.insert(target.clone());
                    }
                    _ => {}
                }
                self.note_current(ev);
            }
            Event::Paused { at } | Event::Resumed { at } => {
                if *at >= self.sweep.paused_at {
                    let paused = matches!(ev, Event::Paused { .. });
                    match (paused, self.paused_since) {
                        (true, None) => self.paused_since = Some(*at),
                        (false, Some(since)) => {
                            self.paused_s += at.seconds_since(since).max(0.0);
                            self.paused_since = None;
                        }
                        _ => {}
                    }
                    self.sweep.paused = paused;
                    self.sweep.paused_at = *at;
                    self.paused_by = if paused {
                        self.pause_source.clone()
                    } else {
                        None
                    };
                }
                self.note_current(ev);
            }
            Event::Notice { level, message, .. } => {
                if *level != Level::Info {
                    self.last_notice = Some((*level, display(message).into_owned()));
                }
                self.note_current(ev);
            }
            Event::Gpu { snapshot } => self.gpu_sample(snapshot),
            Event::Viewers { count } => self.viewers = Some(*count),
            Event::Log { config, line, mark } => self.log.push(LogLine {
                config: config.clone(),
                text: display(line).into_owned(),
                kind: match mark {
                    LogMark::Plain => LineKind::Plain,
                    LogMark::Failure => LineKind::Failure,
                    LogMark::Ready => LineKind::Ready,
                },
            }),
            Event::SweepFinished {
                at,
                ok,
                failed,
                skipped,
            } => {
                self.end_sweep(
                    *at,
                    Sweep::Finished {
                        ok: *ok,
                        failed: *failed,
                        skipped: *skipped,
                    },
                );
                self.note("", ev);
            }
            Event::SweepInterrupted { at, reason } => {
                self.end_sweep(
                    *at,
                    Sweep::Interrupted {
                        reason: reason.clone(),
                    },
                );
                self.note("", ev);
            }
        }
    }

    /// A finished cell: it replaces an older record of the same cell, never a newer one.
    /// Its failure's text is kept as it may be shown ([`display`]).
    pub fn record(&mut self, mut record: CellRecord) {
        for f in record.failure.iter_mut().chain(record.warnings.iter_mut()) {
            shown(&mut f.message);
            f.evidence.iter_mut().for_each(shown);
        }
        if let Some(old) = self.records.get(&record.cell) {
            if old.finished_at > record.finished_at {
                return;
            }
            if *old == record {
                return;
            }
        } else if self
            .started
            .as_ref()
            .is_some_and(|s| record.finished_at >= *s)
        {
            self.finished_since_start += 1;
        }
        self.running
            .retain(|r| !(r.cell == record.cell && r.since <= record.finished_at));
        if record.status == Status::Failed {
            let worse = self
                .last_failure
                .as_ref()
                .and_then(|c| self.records.get(c))
                .is_none_or(|r| headline(r) <= headline(&record));
            if worse {
                self.last_failure = Some(record.cell.clone());
            }
        } else if self.last_failure.as_ref() == Some(&record.cell) {
            // A retry succeeded: the alert goes to the worst failure left, if any.
            self.last_failure = None;
        }
        self.records.insert(record.cell.clone(), record);
        if self.last_failure.is_none() {
            self.last_failure = self
                .records
                .values()
                .filter(|r| r.status == Status::Failed)
                .max_by_key(|r| headline(r))
                .map(|r| r.cell.clone());
        }
    }

    fn set_server(&mut self, config: &str, at: &Timestamp, server: Server) {
        if let Some(c) = self.configs.iter_mut().find(|c| c.id == config) {
            if c.at <= *at {
                c.server = server;
            }
        }
    }

    /// The config to name when one is named: the latest started of those
    /// running, else the one that ran last.
    pub fn config(&self) -> Option<&ConfigRun> {
        self.configs
            .iter()
            .rev()
            .find(|c| c.live())
            .or(self.configs.last())
    }

    /// The configs whose servers run now, in the order they started.
    pub fn live_configs(&self) -> impl Iterator<Item = &ConfigRun> {
        self.configs.iter().filter(|c| c.live())
    }

    /// Whether `cell` is running now.
    pub fn is_running(&self, cell: &str) -> bool {
        self.running.iter().any(|r| r.cell == cell)
    }

    /// The running cell of `config`.
    pub fn running_of(&self, config: &str) -> Option<&Running> {
        self.running.iter().find(|r| r.config == config)
    }

    fn end_sweep(&mut self, at: Timestamp, sweep: Sweep) {
        if at >= self.sweep.sweep_at {
            self.sweep.sweep = sweep;
            self.sweep.sweep_at = at;
            self.sweep.stopping = false;
            self.sweep.stopping_at = at;
            self.sweep.paused = false;
            self.sweep.paused_at = at;
            self.running.retain(|r| r.since > at);
        }
    }

    fn gpu_sample(&mut self, snap: &GpuSnapshot) {
        if self
            .gpu
            .latest
            .as_ref()
            .is_some_and(|l| l.at_ms > snap.at_ms)
        {
            return;
        }
        let mut snap = snap.clone();
        for g in &mut snap.gpus {
            shown(&mut g.name);
            g.processes.iter_mut().for_each(|p| shown(&mut p.name));
            let h = self.gpu.util.entry(g.index).or_default();
            if h.len() == GPU_HISTORY {
                h.pop_front();
            }
            h.push_back(g.util_pct.map(|u| u.min(100) as u8));
        }
        self.gpu.latest = Some(snap);
    }

    /// sweeptop's own line in the log pane, worded as the headless progress.
    /// A note attributed to the config running now (none between configs).
    fn note_current(&mut self, ev: &Event) {
        let config = self.config().map(|c| c.id.clone()).unwrap_or_default();
        self.note(&config, ev);
    }

    fn note(&mut self, config: &str, ev: &Event) {
        if let Some(text) = super::text::line(ev) {
            self.log.push(LogLine {
                config: config.to_string(),
                text,
                kind: LineKind::Note,
            });
        }
    }

    /// What the header's badge says.
    pub fn shown(&self) -> Shown {
        match &self.sweep.sweep {
            Sweep::Finished { .. } => Shown::Finished,
            Sweep::Interrupted { .. } => Shown::Interrupted,
            Sweep::Waiting if !self.sweep.stopping => Shown::Starting,
            _ if self.sweep.stopping => Shown::Stopping,
            _ if self.sweep.paused => Shown::Paused,
            _ => Shown::Running,
        }
    }

    /// Cells of the plan that have a record.
    pub fn done(&self) -> usize {
        match &self.plan {
            Some(p) => p
                .cells
                .iter()
                .filter(|c| self.records.contains_key(&c.id))
                .count(),
            None => self.records.len(),
        }
    }

    /// Seconds since the sweep (re)started, at `now`.
    pub fn elapsed_s(&self, now: Timestamp) -> Option<u64> {
        Some(now.seconds_since(self.started?).max(0.0) as u64)
    }

    /// Seconds left, from the pace of the cells finished since the start,
    /// paused time left out (while paused, the ETA stands still).
    pub fn eta_s(&self, now: Timestamp) -> Option<u64> {
        if !matches!(self.sweep.sweep, Sweep::Running) || self.finished_since_start == 0 {
            return None;
        }
        let now = self.paused_since.unwrap_or(now);
        let elapsed = (now.seconds_since(self.started?) - self.paused_s).max(0.0);
        let left = self.total_cells.saturating_sub(self.done()) as f64;
        Some((elapsed / self.finished_since_start as f64 * left).round() as u64)
    }

    /// The alert line: the worst failure (a crash outranks an overflow, the
    /// latest breaks ties) and how many cells of its config failed.
    pub fn alert(&self) -> Option<String> {
        let r = self.records.get(self.last_failure.as_ref()?)?;
        let f = r.failure.as_ref()?;
        let n = self
            .records
            .values()
            .filter(|o| o.config == r.config && o.status == Status::Failed)
            .count();
        Some(format!(
            "{}: {} — {n} cell{} failed",
            r.config,
            f.kind.describe(),
            if n == 1 { "" } else { "s" }
        ))
    }

    /// With more than one kind of failure in the run, how many cells of
    /// each, worst first: `in all 7 ILL-INSTR, 3 CTX 400`.
    pub fn failure_kinds(&self) -> Option<String> {
        let mut kinds: std::collections::BTreeMap<(u8, &'static str), usize> = Default::default();
        for r in self.records.values().filter(|r| r.status == Status::Failed) {
            if let Some(f) = &r.failure {
                *kinds
                    .entry((u8::MAX - f.kind.severity(), f.kind.badge()))
                    .or_default() += 1;
            }
        }
        (kinds.len() > 1).then(|| {
            let each: Vec<String> = kinds
                .iter()
                .map(|((_, badge), count)| format!("{count} {badge}"))
                .collect();
            format!("in all {}", each.join(", "))
        })
    }

    /// The GPUs the running configs use (all when one does not say).
    pub fn active_gpus(&self) -> Option<Vec<u32>> {
        self.live_configs().next()?;
        let mut all: Vec<u32> = self.live_configs().flat_map(|c| self.gpus_of(c)).collect();
        all.sort_unstable();
        all.dedup();
        Some(all)
    }

    /// The GPUs a config runs on: as the engine said, else its plan's list,
    /// else all.
    pub fn gpus_of(&self, c: &ConfigRun) -> Vec<u32> {
        if !c.gpus.is_empty() {
            return c.gpus.clone();
        }
        match self
            .plan
            .as_ref()
            .and_then(|p| p.config(&c.id))
            .and_then(|p| p.gpus.clone())
        {
            Some(g) => g,
            None => self
                .gpu
                .latest
                .as_ref()
                .map(|s| s.gpus.iter().map(|g| g.index).collect())
                .unwrap_or_default(),
        }
    }

    /// The running config a GPU belongs to.
    pub fn owner_of(&self, gpu: u32) -> Option<&str> {
        self.live_configs()
            .find(|c| self.gpus_of(c).contains(&gpu))
            .map(|c| c.id.as_str())
    }
}

/// What decides which failure the alert line shows: severity, then time.
fn headline(r: &CellRecord) -> (u8, Timestamp) {
    (
        r.failure.as_ref().map_or(0, |f| f.kind.severity()),
        r.finished_at,
    )
}

/// Server meta with every text made safe to show (a version string is the
/// server's to write).
fn shown_meta(meta: &ServerMeta) -> ServerMeta {
    let d = |s: &String| display(s).into_owned();
    let o = |s: &Option<String>| s.as_ref().map(d);
    ServerMeta {
        kind: d(&meta.kind),
        version: o(&meta.version),
        model: d(&meta.model),
        model_path: o(&meta.model_path),
        model_config_sha256: o(&meta.model_config_sha256),
        command: d(&meta.command),
        host: d(&meta.host),
        gpus: meta.gpus.iter().map(d).collect(),
        driver: o(&meta.driver),
        cuda: o(&meta.cuda),
        sweeptop_version: d(&meta.sweeptop_version),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u32) -> Timestamp {
        Timestamp::from_unix_ms(1_748_772_000_000 + i64::from(s) * 1000)
    }

    fn rec(cell: &str, config: &str, status: Status, finished: u32) -> CellRecord {
        CellRecord {
            config: config.into(),
            metrics: None,
            started_at: at(finished.saturating_sub(1)),
            finished_at: at(finished),
            ..crate::model::sample_record(cell, status, "boom")
        }
    }

    fn finished(r: CellRecord) -> Event {
        Event::CellFinished {
            at: r.finished_at,
            record: Box::new(r),
        }
    }

    fn started(t: u32, done: usize) -> Event {
        Event::SweepStarted {
            at: at(t),
            plan: "demo".into(),
            run_dir: "runs/demo".into(),
            configs: 2,
            cells: 4,
            already_done: done,
        }
    }

    fn cell_started(t: u32, cell: &str, config: &str) -> Event {
        Event::CellStarted {
            at: at(t),
            cell: cell.into(),
            config: config.into(),
        }
    }

    fn fold(events: &[Event]) -> ViewState {
        let mut v = ViewState::new(None);
        for e in events {
            v.apply(e);
        }
        v
    }

    #[test]
    fn a_sweep_runs_pauses_and_finishes() {
        let mut v = fold(&[started(0, 0), cell_started(1, "a", "c1")]);
        assert_eq!(v.shown(), Shown::Running);
        assert_eq!(v.running.first().map(|r| r.cell.as_str()), Some("a"));
        v.apply(&Event::Paused { at: at(2) });
        assert_eq!(v.shown(), Shown::Paused);
        v.apply(&finished(rec("a", "c1", Status::Ok, 3)));
        assert!(v.running.is_empty());
        assert_eq!(v.done(), 1);
        v.apply(&Event::Resumed { at: at(4) });
        assert_eq!(v.shown(), Shown::Running);
        v.apply(&Event::Action {
            at: at(5),
            action: "quit".into(),
            target: None,
            source: "key".into(),
        });
        assert_eq!(v.shown(), Shown::Stopping);
        v.apply(&Event::SweepInterrupted {
            at: at(6),
            reason: "quit".into(),
        });
        assert_eq!(v.shown(), Shown::Interrupted);
        // Elapsed and ETA come from the events' clock.
        assert_eq!(v.elapsed_s(at(10)), Some(10));
    }

    #[test]
    fn eta_follows_the_pace_of_finished_cells() {
        let v = fold(&[
            started(0, 0),
            finished(rec("a", "c1", Status::Ok, 10)),
            finished(rec("b", "c1", Status::Ok, 20)),
        ]);
        // 2 of 4 cells in 20 s: 20 s left.
        assert_eq!(v.eta_s(at(20)), Some(20));
    }

    #[test]
    fn the_alert_keeps_the_worst_failure_and_counts_each_kind() {
        let crash = rec("a/c1", "a", Status::Failed, 5);
        let overflow = |cell: &str, t| {
            let mut r = rec(cell, "b", Status::Failed, t);
            if let Some(f) = r.failure.as_mut() {
                f.kind = crate::model::FailureKind::ContextOverflow;
            }
            r
        };
        let mut v = fold(&[started(0, 0), finished(crash)]);
        assert_eq!(
            v.alert().as_deref(),
            Some("a: CUDA illegal instruction — 1 cell failed")
        );
        // Later, routine overflows: the crash stays, with the count of each kind.
        v.apply(&finished(overflow("b/c1", 9)));
        v.apply(&finished(overflow("b/c2", 12)));
        assert_eq!(
            v.alert().as_deref(),
            Some("a: CUDA illegal instruction — 1 cell failed")
        );
        assert_eq!(
            v.failure_kinds().as_deref(),
            Some("in all 1 ILL-INSTR, 2 CTX 400")
        );
        // The crashed cell retried fine: the overflow is the headline now.
        v.apply(&finished(rec("a/c1", "a", Status::Ok, 20)));
        assert_eq!(
            v.alert().as_deref(),
            Some("b: context overflow — 2 cells failed")
        );
    }

    #[test]
    fn eta_leaves_paused_time_out() {
        let mut v = fold(&[
            started(0, 0),
            finished(rec("a", "c1", Status::Ok, 10)),
            Event::Paused { at: at(10) },
        ]);
        // 1 of 4 cells in 10 working seconds: 30 s left, however long the pause.
        assert_eq!(v.eta_s(at(15)), Some(30));
        assert_eq!(v.eta_s(at(500)), Some(30));
        v.apply(&Event::Resumed { at: at(500) });
        v.apply(&finished(rec("b", "c1", Status::Ok, 510)));
        // 2 of 4 in 20 working seconds (490 paused): 20 s left.
        assert_eq!(v.eta_s(at(510)), Some(20));
        // A second pause request while paused does not restart the clock.
        v.apply(&Event::Paused { at: at(510) });
        v.apply(&Event::Paused { at: at(600) });
        v.apply(&Event::Resumed { at: at(700) });
        assert_eq!(v.eta_s(at(700)), Some(20));
    }

    #[test]
    fn a_duplicate_finished_cell_changes_nothing() {
        let a = rec("a", "c1", Status::Failed, 5);
        let once = fold(&[started(0, 0), finished(a.clone())]);
        let twice = fold(&[started(0, 0), finished(a.clone()), finished(a)]);
        assert_eq!(once.records, twice.records);
        assert_eq!(once.finished_since_start, twice.finished_since_start);
        assert_eq!(once.alert(), twice.alert());
        assert!(twice.alert().unwrap().ends_with(" — 1 cell failed"));
    }

    #[test]
    fn a_retry_replaces_the_record_and_an_older_one_never_does() {
        let failed = rec("a", "c1", Status::Failed, 5);
        let ok = rec("a", "c1", Status::Ok, 50);
        // In order: the retry wins.
        let v = fold(&[
            started(0, 0),
            finished(failed.clone()),
            finished(ok.clone()),
        ]);
        assert_eq!(v.records["a"].status, Status::Ok);
        assert_eq!(v.alert(), None);
        // Replayed out of order (resume re-reading events): still the retry.
        let v = fold(&[finished(ok.clone()), started(0, 0), finished(failed)]);
        assert_eq!(v.records["a"].status, Status::Ok);
        assert_eq!(v.records.len(), 1);
    }

    #[test]
    fn the_running_cell_ignores_stale_starts() {
        // A start older than the cell's record (replayed after resume) is not running.
        let v = fold(&[
            finished(rec("a", "c1", Status::Ok, 10)),
            cell_started(9, "a", "c1"),
        ]);
        assert!(v.running.is_empty());
        // A retry of a recorded cell is running again.
        let v = fold(&[
            finished(rec("a", "c1", Status::Failed, 10)),
            cell_started(20, "a", "c1"),
        ]);
        assert_eq!(v.running.first().map(|r| r.cell.as_str()), Some("a"));
        // An older start does not replace a newer one.
        let v = fold(&[cell_started(20, "b", "c1"), cell_started(10, "a", "c1")]);
        assert_eq!(v.running.first().map(|r| r.cell.as_str()), Some("b"));
    }

    #[test]
    fn resuming_after_an_interrupt_starts_afresh_and_old_events_do_not_undo_it() {
        let first_run = [
            started(0, 0),
            finished(rec("a", "c1", Status::Ok, 10)),
            Event::Paused { at: at(11) },
            cell_started(12, "b", "c1"),
            Event::Action {
                at: at(13),
                action: "quit".into(),
                target: None,
                source: "key".into(),
            },
            Event::SweepInterrupted {
                at: at(14),
                reason: "quit".into(),
            },
        ];
        let resumed = [started(100, 1), cell_started(101, "b", "c1")];
        let mut in_order: Vec<Event> = first_run.to_vec();
        in_order.extend(resumed.iter().cloned());
        let v = fold(&in_order);
        assert_eq!(v.shown(), Shown::Running);
        assert_eq!(v.running.first().map(|r| r.since), Some(at(101)));
        // The old run's events arriving after the new ones change nothing.
        let mut shuffled: Vec<Event> = resumed.to_vec();
        shuffled.extend(first_run.iter().cloned());
        let w = fold(&shuffled);
        assert_eq!(w.shown(), Shown::Running);
        assert_eq!(w.running, v.running);
        assert_eq!(w.records, v.records);
        assert_eq!(w.started, Some(at(100)));
        assert_eq!(w.finished_since_start, 0);
    }

    #[test]
    fn actions_mark_excluded_configs_and_queued_retries() {
        let v = fold(&[
            started(0, 0),
            Event::Action {
                at: at(1),
                action: "exclude".into(),
                target: Some("c2".into()),
                source: "key".into(),
            },
            Event::Action {
                at: at(2),
                action: "retry".into(),
                target: Some("a".into()),
                source: "key".into(),
            },
        ]);
        assert!(v.excluded.contains("c2"));
        assert!(v.retry_queued.contains("a"));
        let mut v = v;
        v.apply(&cell_started(3, "a", "c1"));
        assert!(!v.retry_queued.contains("a"));
    }

    #[test]
    fn gpu_history_is_kept_in_order_and_bounded() {
        use crate::model::GpuSample;
        let snap = |t: u64, util: Option<u32>| Event::Gpu {
            snapshot: GpuSnapshot {
                at_ms: t,
                status: GpuStatus::Simulated,
                gpus: vec![GpuSample {
                    util_pct: util,
                    ..GpuSample::unknown(0)
                }],
            },
        };
        let mut v = ViewState::new(None);
        for t in 0..(GPU_HISTORY as u64 + 10) {
            v.apply(&snap(t, Some((t % 100) as u32)));
        }
        v.apply(&snap(3, None)); // late sample: dropped
        let h = &v.gpu.util[&0];
        assert_eq!(h.len(), GPU_HISTORY);
        assert_eq!(
            h.back(),
            Some(&Some(((GPU_HISTORY as u64 + 9) % 100) as u8))
        );
        assert_eq!(
            v.gpu.latest.as_ref().map(|s| s.at_ms),
            Some(GPU_HISTORY as u64 + 9)
        );
    }

    #[test]
    fn log_lines_keep_their_marks_and_the_tail_is_bounded() {
        let mut v = ViewState::new(None);
        for i in 0..(LOG_LINES + 5) {
            v.apply(&Event::Log {
                config: "c1".into(),
                line: format!("line {i}"),
                mark: if i.is_multiple_of(2) {
                    LogMark::Plain
                } else {
                    LogMark::Failure
                },
            });
        }
        assert_eq!(v.log.lines.len(), LOG_LINES);
        assert_eq!(v.log.pushed, (LOG_LINES + 5) as u64);
        let last = v.log.lines.back().unwrap();
        assert_eq!(last.text, format!("line {}", LOG_LINES + 4));
        let marked = v
            .log
            .lines
            .iter()
            .filter(|l| l.kind == LineKind::Failure)
            .count();
        assert_eq!(marked, LOG_LINES / 2);
    }

    /// Server text reaches every view through this model: whatever a log
    /// line, a failure or a notice carried, what is kept to be shown has no
    /// control, escape or direction character.
    #[test]
    fn untrusted_text_is_kept_as_it_may_be_shown() {
        let dangerous = |s: &str| {
            s.chars()
                .any(|c| c.is_control() || ('\u{202A}'..='\u{202E}').contains(&c))
        };
        let mut v = ViewState::default();
        for (i, hostile) in crate::model::text::HOSTILE.iter().enumerate() {
            v.apply(&Event::Log {
                config: "a".into(),
                line: hostile.to_string(),
                mark: LogMark::Failure,
            });
            v.apply(&Event::Notice {
                at: at(i as u32),
                level: Level::Warn,
                message: hostile.to_string(),
            });
            let mut r = rec(&format!("a/c{i}"), "a", Status::Failed, i as u32);
            r.failure = Some(
                crate::model::Failure::new(
                    crate::model::FailureKind::CudaIllegalInstruction,
                    crate::model::FailureSource::ServerLog,
                    *hostile,
                )
                .with_evidence(vec![hostile.to_string()]),
            );
            v.apply(&Event::CellFinished {
                at: at(i as u32),
                record: Box::new(r),
            });
            let f = v.records[&format!("a/c{i}")].failure.clone().unwrap();
            assert!(
                !dangerous(&f.message) && !dangerous(&f.evidence[0]),
                "{hostile:?} → {f:?}"
            );
            assert!(
                !dangerous(&v.last_notice.as_ref().unwrap().1),
                "{hostile:?}"
            );
        }
        for line in &v.log.lines {
            assert!(!dangerous(&line.text), "{:?}", line.text);
        }
        assert!(v
            .log
            .lines
            .iter()
            .any(|l| l.text.contains("real cause fake: all fine")));
    }
}
