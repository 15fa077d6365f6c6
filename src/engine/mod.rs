//! The sweep: per config, preflight, launch the server, wait until it is ready,
//! run its cells, record each result durably, stop the server. The engine is the
//! only writer of sweep state; everything else learns about it from events.

pub mod process;
mod server;

use std::collections::{HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{broadcast, mpsc};

use crate::detect::{
    self, ContextNumbers, Failure, FailureKind, FailureSource, LogPatterns, ServerHealth,
};
use crate::event::{self, Event, Level};
use crate::load::{self, CellLoad, Target};
use crate::plan::{Cell, Config, ContextLimit, Overflow, Plan, Port};
use crate::store::{self, CellRecord, RunDir, Status};
use server::{ExitInfo, Launch, Server};

/// What a user (key, attach client, signal) can ask of a running sweep.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "command", rename_all = "snake_case")]
pub enum Command {
    Pause,
    Resume,
    TogglePause,
    /// Skip the rest of the running config.
    SkipConfig,
    /// Skip the running cell.
    SkipCell,
    /// Run a cell (or every cell of a config) again at the end of the sweep.
    Retry {
        target: String,
    },
    /// Leave a config out of the rest of the sweep.
    Exclude {
        config: String,
    },
    Quit,
}

impl Command {
    pub fn name(&self) -> &'static str {
        match self {
            Command::Pause => "pause",
            Command::Resume => "resume",
            Command::TogglePause => "toggle_pause",
            Command::SkipConfig => "skip_config",
            Command::SkipCell => "skip_cell",
            Command::Retry { .. } => "retry",
            Command::Exclude { .. } => "exclude",
            Command::Quit => "quit",
        }
    }
    fn target(&self) -> Option<String> {
        match self {
            Command::Retry { target } => Some(target.clone()),
            Command::Exclude { config } => Some(config.clone()),
            _ => None,
        }
    }
}

/// A command and who sent it (`key`, `attach`, `signal`).
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
    #[error("cannot record results, sweep stopped (everything recorded before is intact): {0}")]
    Store(#[from] store::StoreError),
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
}

enum Flow {
    Continue,
    Quit,
}

/// What the user asked for while no cell was running.
enum Between {
    Continue,
    Quit,
    SkipConfig,
    SkipCell,
}

/// How a cell ended, before it is recorded.
enum CellEnd {
    Done(CellRecord),
    /// The server died or broke during the cell: record it failed, then the
    /// config's remaining cells (or a retry).
    ServerDied(CellRecord, Failure),
    /// No token for the stall timeout: record it, kill the server, go on with a
    /// fresh one.
    Stalled(CellRecord),
    Skipped(CellRecord),
    SkipConfig(CellRecord),
    Quit,
}

pub struct Engine {
    plan: Arc<Plan>,
    run: RunDir,
    bus: Bus,
    commands: mpsc::Receiver<Request>,
    opts: Options,
    done: HashSet<String>,
    excluded: HashSet<String>,
    retry_queue: VecDeque<String>,
    paused: bool,
    patterns: Arc<LogPatterns>,
    seq: Arc<AtomicU64>,
    /// The latest status of every recorded cell.
    statuses: std::collections::HashMap<String, Status>,
    gpu: Option<crate::gpu::Telemetry>,
    /// For the server's side endpoints (health, models, tokenize, metrics).
    http: reqwest::Client,
}

/// A cell's prompt bodies and their measured token count.
type Prompts = (Arc<Vec<String>>, u64);

/// What the engine keeps about a live server.
struct Live {
    server: Server,
    target: Target,
    context_limit: Option<u64>,
    prompts: std::collections::HashMap<(String, u64), Prompts>,
    /// How this server's prompts are measured (chosen at its first cell).
    measure: Option<load::tokenizer::Measure>,
}

impl Engine {
    pub fn new(
        plan: Arc<Plan>,
        run: RunDir,
        bus: Bus,
        commands: mpsc::Receiver<Request>,
        opts: Options,
    ) -> Result<Engine, String> {
        let patterns =
            LogPatterns::with_extra(&plan.patterns).map_err(|e| format!("plan pattern: {e}"))?;
        let results = store::read_results(&run.path).map_err(|e| e.to_string())?;
        let done = results.records.iter().map(|r| r.cell.clone()).collect();
        let statuses = results
            .records
            .iter()
            .map(|r| (r.cell.clone(), r.status))
            .collect();
        let mut engine = Engine {
            plan,
            run,
            bus,
            commands,
            opts,
            done,
            excluded: HashSet::new(),
            retry_queue: VecDeque::new(),
            paused: false,
            patterns: Arc::new(patterns),
            seq: Arc::new(AtomicU64::new(0)),
            statuses,
            gpu: None,
            http: load::http_client(),
        };
        for p in results.problems {
            engine.notice(Level::Warn, p);
        }
        Ok(engine)
    }

    pub fn run_dir(&self) -> &Path {
        &self.run.path
    }

    fn emit(&mut self, ev: Event) {
        if ev.persisted() {
            if let Err(e) = self.run.append_event(&ev) {
                // Events are the story, results are the data: keep going, say so.
                let _ = self.bus.events.send(Event::Notice {
                    at: event::now(),
                    level: Level::Error,
                    message: format!("cannot write events.jsonl: {e}"),
                });
            }
        }
        let _ = self.bus.events.send(ev);
    }

    fn notice(&mut self, level: Level, message: String) {
        self.emit(Event::Notice {
            at: event::now(),
            level,
            message,
        });
    }

    fn record(&mut self, record: CellRecord) -> Result<(), EngineError> {
        debug_assert!(
            record.status != Status::Ok
                || record
                    .metrics
                    .as_ref()
                    .is_some_and(|m| m.output_tokens > 0 && m.output_tok_s > 0.0)
        );
        self.run.append_result(&record)?;
        self.done.insert(record.cell.clone());
        self.statuses.insert(record.cell.clone(), record.status);
        self.emit(Event::CellFinished {
            at: event::now(),
            record: Box::new(record),
        });
        Ok(())
    }

    /// Run the sweep to the end (or until asked to quit).
    pub async fn run(mut self) -> Result<Outcome, EngineError> {
        let plan = self.plan.clone();
        self.emit(Event::SweepStarted {
            at: event::now(),
            plan: plan.name.clone(),
            run_dir: self.run.path.display().to_string(),
            configs: plan.configs.len(),
            cells: plan.cells.len(),
            already_done: self
                .done
                .iter()
                .filter(|c| plan.cells.iter().any(|p| &p.id == *c))
                .count(),
        });
        let source = std::mem::replace(&mut self.opts.gpu, crate::gpu::GpuSource::Disabled);
        self.gpu = Some(crate::gpu::Telemetry::start(
            source,
            self.opts.gpu_interval,
            self.bus.events.clone(),
            Some(&self.run.path),
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
        let total = plan.configs.len();
        for (i, config) in plan.configs.iter().enumerate() {
            let pending: Vec<Cell> = plan
                .cells_of(&config.id)
                .filter(|c| !self.done.contains(&c.id))
                .cloned()
                .collect();
            if pending.is_empty() {
                continue;
            }
            let mut pending = pending;
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
            at: event::now(),
            ok,
            failed,
            skipped,
        });
        self.run.set_state("finished")?;
        Ok(Outcome::Finished)
    }

    /// One GPU sample after the last server stopped, so views end on the GPUs'
    /// real state rather than the last busy sample.
    async fn settle_gpu(&self) {
        if let Some(g) = &self.gpu {
            let _ = g.fresh_after(crate::gpu::unix_ms()).await;
        }
    }

    async fn interrupted(mut self, reason: &str) -> Result<Outcome, EngineError> {
        self.settle_gpu().await;
        self.emit(Event::SweepInterrupted {
            at: event::now(),
            reason: reason.to_string(),
        });
        self.run.set_state("interrupted")?;
        Ok(Outcome::Interrupted)
    }

    /// Apply a command. Returns true for quit.
    fn apply(&mut self, req: &Request) -> bool {
        self.emit(Event::Action {
            at: event::now(),
            action: req.command.name().to_string(),
            target: req.command.target(),
            source: req.source.clone(),
        });
        match &req.command {
            Command::Pause => self.set_paused(true),
            Command::Resume => self.set_paused(false),
            Command::TogglePause => self.set_paused(!self.paused),
            Command::Retry { target } => {
                if !self.retry_queue.contains(target) {
                    self.retry_queue.push_back(target.clone());
                }
            }
            Command::Exclude { config } => {
                self.excluded.insert(config.clone());
            }
            Command::Quit => return true,
            Command::SkipConfig | Command::SkipCell => {}
        }
        false
    }

    fn set_paused(&mut self, paused: bool) {
        if self.paused != paused {
            self.paused = paused;
            let at = event::now();
            self.emit(if paused {
                Event::Paused { at }
            } else {
                Event::Resumed { at }
            });
        }
    }

    /// Between cells: apply queued commands, and hold while paused.
    async fn between_steps(&mut self) -> Between {
        let mut skip = None;
        loop {
            while let Ok(req) = self.commands.try_recv() {
                if self.apply(&req) {
                    return Between::Quit;
                }
                skip = skip_of(&req.command).or(skip);
            }
            if let Some(s) = skip {
                return s;
            }
            if !self.paused {
                return Between::Continue;
            }
            match self.commands.recv().await {
                Some(req) => {
                    if self.apply(&req) {
                        return Between::Quit;
                    }
                    skip = skip_of(&req.command);
                }
                None => return Between::Continue,
            }
        }
    }

    /// GPUs a config uses: from its `CUDA_VISIBLE_DEVICES`, else all.
    fn active_gpus(&self, config: &Config) -> Vec<u32> {
        match &config.gpus {
            Some(g) => g.clone(),
            None => {
                let n = self
                    .gpu
                    .as_ref()
                    .and_then(|g| g.latest())
                    .map(|s| s.gpus.len() as u32)
                    .unwrap_or(0);
                (0..n).collect()
            }
        }
    }

    fn base_record(&self, cell: &Cell, started_at: &str) -> CellRecord {
        CellRecord {
            cell: cell.id.clone(),
            config: cell.config.clone(),
            phase: cell.phase.clone(),
            workload: cell.workload.clone(),
            context_tokens: cell.context_tokens,
            concurrency: cell.concurrency,
            status: Status::Skipped,
            failure: None,
            metrics: None,
            started_at: started_at.to_string(),
            finished_at: event::now(),
        }
    }

    fn failed_record(&self, cell: &Cell, failure: Failure) -> CellRecord {
        let now = event::now();
        let mut r = self.base_record(cell, &now);
        r.status = Status::Failed;
        r.failure = Some(failure);
        r
    }

    /// Mark cells that cannot run with the same failure.
    fn fail_all(&mut self, cells: &[Cell], failure: &Failure) -> Result<(), EngineError> {
        for c in cells {
            let r = self.failed_record(c, failure.clone());
            self.record(r)?;
        }
        Ok(())
    }

    fn skip_all(&mut self, cells: &[Cell]) -> Result<(), EngineError> {
        for c in cells {
            let now = event::now();
            let r = self.base_record(c, &now);
            self.record(r)?;
        }
        Ok(())
    }

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
                            let failure = Failure {
                                kind: FailureKind::Stalled,
                                source: FailureSource::Client,
                                message: format!(
                                    "not run: the server of {} stalled too often",
                                    config.id
                                ),
                                evidence: Vec::new(),
                                context: None,
                            };
                            let cells: Vec<Cell> = remaining.drain(..).collect();
                            self.fail_all(&cells, &failure)?;
                            return Ok(Flow::Continue);
                        }
                        restarts_left -= 1;
                        break;
                    }
                    CellEnd::ServerDied(r, failure) => {
                        if attempt >= config.retries {
                            self.record(r.clone())?;
                        }
                        self.stop(config, &mut live.server).await;
                        if attempt < config.retries {
                            // Not recorded: the cell runs again on a fresh server.
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

    async fn stop(&mut self, config: &Config, server: &mut Server) {
        if server.stopped {
            return;
        }
        // Gone before we asked it to stop: say how it ended.
        if let Some(info) = server.exited() {
            self.emit(Event::ServerExited {
                at: event::now(),
                config: config.id.clone(),
                code: info.code,
                signal: info.signal,
            });
        }
        let t = Instant::now();
        let how = server
            .stop(Duration::from_secs_f64(config.stop_grace_s))
            .await;
        self.run.clear_server();
        if let Some(g) = &self.gpu {
            g.set_server(0, &[]);
        }
        self.emit(Event::ServerStopped {
            at: event::now(),
            config: config.id.clone(),
            how,
            after_s: t.elapsed().as_secs_f64(),
        });
    }

    /// Preflight, spawn and wait for readiness. `Ok(None)` means quit.
    async fn launch(
        &mut self,
        config: &Config,
        index: usize,
        total: usize,
        attempt: u32,
    ) -> Result<Option<Live>, Failure> {
        let preflight = |message: String| Failure {
            kind: FailureKind::StartupFailed,
            source: FailureSource::Preflight,
            message,
            evidence: Vec::new(),
            context: None,
        };
        for path in &config.requires {
            if !Path::new(path).exists() {
                let hint = if path.starts_with("/dev/shm") {
                    " (files in /dev/shm vanish on reboot: copy the model back)"
                } else {
                    ""
                };
                return Err(preflight(format!(
                    "required path {path} does not exist{hint}"
                )));
            }
        }
        let fresh = match &self.gpu {
            Some(g) => g.fresh_after(crate::gpu::unix_ms()).await,
            None => None,
        };
        if let Some(snap) = fresh {
            let foreign = crate::gpu::foreign_processes(&snap, config.gpus.as_deref());
            if !foreign.is_empty() {
                let list: Vec<String> = foreign
                    .iter()
                    .map(|(gpu, p)| {
                        format!(
                            "GPU {gpu}: pid {} {} ({} MiB)",
                            p.pid,
                            p.name,
                            p.used_mib
                                .map(|m| m.to_string())
                                .unwrap_or_else(|| "?".into())
                        )
                    })
                    .collect();
                let message = format!(
                    "other processes hold memory on the config's GPUs: {}",
                    list.join("; ")
                );
                match self.plan.limits.foreign_gpu {
                    crate::plan::ForeignGpu::Fail => {
                        return Err(preflight(format!(
                            "{message} (set limits.foreign_gpu = \"warn\" to launch anyway)"
                        )))
                    }
                    crate::plan::ForeignGpu::Warn => {
                        self.notice(Level::Warn, format!("{}: {message}", config.id))
                    }
                }
            }
        }
        let port = match config.port {
            Port::Fixed(p) => {
                if !process::wait_port_free(&config.host, p, Duration::from_secs(30)).await {
                    return Err(preflight(format!(
                        "port {p} on {} is in use by another process",
                        config.host
                    )));
                }
                p
            }
            Port::Auto => process::pick_free_port(&config.host).map_err(|e| {
                preflight(format!("cannot find a free port on {}: {e}", config.host))
            })?,
        };
        let sweeptop = self.opts.sweeptop_exe.display().to_string();
        let run_dir = self.run.path.display().to_string();
        let fill = |s: &str| {
            crate::plan::template::fill(s, &|name| match name {
                "port" => Some(port.to_string()),
                "host" => Some(config.host.clone()),
                "run_dir" => Some(run_dir.clone()),
                "sweeptop" => Some(sweeptop.clone()),
                other => Some(format!("{{{other}}}")),
            })
            .unwrap_or_else(|_| s.to_string())
        };
        let argv: Vec<String> = config.argv.iter().map(|a| fill(a)).collect();
        let env: Vec<(String, String)> = config
            .env
            .iter()
            .map(|(k, v)| (k.clone(), fill(v)))
            .collect();
        self.emit(Event::ConfigStarting {
            at: event::now(),
            config: config.id.clone(),
            phase: config.phase.clone(),
            index: index + 1,
            total,
            command: crate::plan::shell_quote(&argv),
            attempt: attempt + 1,
        });
        let log_path = self.run.log_path(&config.id);
        if let Some(f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .ok()
            .as_mut()
        {
            use std::io::Write;
            let _ = writeln!(
                f,
                "# sweeptop {} launch {} of {}: {}",
                event::now(),
                attempt + 1,
                config.id,
                crate::plan::shell_quote(&argv)
            );
        }
        let mut server = Server::spawn(Launch {
            argv: &argv,
            shell: config.shell,
            env: &env,
            log_path: &log_path,
            config: &config.id,
            patterns: self.patterns.clone(),
            ready_line: config.ready.log_line.clone(),
            logs: self.bus.logs.clone(),
        })
        .map_err(|e| preflight(format!("cannot start `{}`: {e}", argv[0])))?;
        if let Some(g) = &self.gpu {
            g.set_server(server.pgid, &self.active_gpus(config));
        }
        if let Err(e) = self.run.record_server(server.pgid) {
            self.notice(
                Level::Warn,
                format!("cannot record the server's process group: {e}"),
            );
        }
        let base = format!("http://{}:{}", url_host(&config.host), port);
        let client = self.http.clone();
        match self.wait_ready(config, &mut server, &client, &base).await {
            Ok(true) => {}
            Ok(false) => {
                self.stop(config, &mut server).await;
                return Ok(None);
            }
            Err(f) => {
                self.stop(config, &mut server).await;
                return Err(f);
            }
        }
        let (model_listed, server_limit) = load::server_model(&client, &base).await;
        let model = config
            .model
            .clone()
            .or(model_listed)
            .unwrap_or_else(|| "default".into());
        let context_limit = match self.plan.limits.context {
            ContextLimit::Tokens(n) => Some(n),
            ContextLimit::Server => server_limit,
        };
        if context_limit.is_none() {
            self.notice(Level::Warn, format!("{}: the server reports no context limit and the plan sets none; prompts are not clamped", config.id));
        }
        self.emit(Event::ServerReady {
            at: event::now(),
            config: config.id.clone(),
            pid: server.pgid,
            after_s: server.started.elapsed().as_secs_f64(),
            context_limit,
            model: model.clone(),
        });
        Ok(Some(Live {
            server,
            target: Target {
                base,
                api: config.api,
                model,
            },
            context_limit,
            prompts: Default::default(),
            measure: None,
        }))
    }

    /// Ready = the health check passes, the plan's log line (if any) appeared,
    /// and (if asked) one tiny generation succeeded. `Ok(false)` = quit.
    async fn wait_ready(
        &mut self,
        config: &Config,
        server: &mut Server,
        client: &reqwest::Client,
        base: &str,
    ) -> Result<bool, Failure> {
        let deadline = Instant::now() + Duration::from_secs_f64(config.ready.timeout_s);
        let url = format!("{base}{}", config.ready.path);
        let mut exit = server.exit.clone();
        loop {
            if let Some(info) = server.exited() {
                server.drain_logs(Duration::from_secs(2)).await;
                return Err(self.startup_failure(server, info));
            }
            let log_ok = config.ready.log_line.is_none()
                || server
                    .log
                    .lock()
                    .map(|l| l.ready_line_seen)
                    .unwrap_or(false);
            if log_ok {
                let healthy = client
                    .get(&url)
                    .timeout(Duration::from_secs(5))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                if healthy {
                    if !config.ready.generate {
                        return Ok(true);
                    }
                    // The model name the server lists, as the cells will send it.
                    let model = match &config.model {
                        Some(m) => m.clone(),
                        None => load::server_model(client, base)
                            .await
                            .0
                            .unwrap_or_else(|| "default".into()),
                    };
                    let target = Target {
                        base: base.to_string(),
                        api: config.api,
                        model,
                    };
                    let progress = load::client::Progress::new();
                    let Ok(pool) = load::Pool::new(base) else {
                        return Ok(false);
                    };
                    let rec = load::client::send(
                        &pool,
                        &target,
                        "Hello",
                        1,
                        Duration::from_secs(60),
                        &progress,
                    )
                    .await;
                    if rec.ok() {
                        return Ok(true);
                    }
                }
            }
            if Instant::now() >= deadline {
                let tail = server.tail(20);
                return Err(Failure {
                    kind: FailureKind::StartupTimeout,
                    source: FailureSource::ServerLog,
                    message: format!(
                        "not ready after {:.0} s (health {url}{})",
                        config.ready.timeout_s,
                        config
                            .ready
                            .log_line
                            .as_ref()
                            .map(|l| format!(", log line \"{l}\""))
                            .unwrap_or_default()
                    ),
                    evidence: tail,
                    context: None,
                });
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                _ = exit.changed() => {}
                req = self.commands.recv() => {
                    if let Some(req) = req {
                        match req.command {
                            Command::SkipConfig => {
                                self.apply(&req);
                                return Err(Failure { kind: FailureKind::StartupFailed, source: FailureSource::Client, message: "skipped while starting".into(), evidence: Vec::new(), context: None });
                            }
                            _ => if self.apply(&req) { return Ok(false) },
                        }
                    }
                }
            }
        }
    }

    fn startup_failure(&self, server: &Server, info: ExitInfo) -> Failure {
        let (logged, tail) = server
            .log
            .lock()
            .map(|l| (l.watch.failure(), l.watch.tail(20)))
            .unwrap_or((None, Vec::new()));
        match logged {
            Some(mut f) => {
                f.message = format!(
                    "server exited during startup ({}): {}",
                    info.describe(),
                    f.message
                );
                f
            }
            None => {
                let kind = detect::classify_exit(info.code, info.signal, None, &tail);
                Failure {
                    kind: if kind == FailureKind::ServerExited {
                        FailureKind::StartupFailed
                    } else {
                        kind
                    },
                    source: FailureSource::Exit,
                    message: format!("server exited during startup ({})", info.describe()),
                    evidence: tail,
                    context: None,
                }
            }
        }
    }

    /// Why the server is gone or broken, from its log first, else its exit.
    fn death_failure(&self, server: &Server) -> Option<Failure> {
        let exit = server.exited();
        let (logged, tail) = server
            .log
            .lock()
            .map(|l| (l.watch.failure(), l.watch.tail(20)))
            .unwrap_or((None, Vec::new()));
        match (logged, exit) {
            (Some(mut f), Some(info)) => {
                f.message = format!("{} ({})", f.message, info.describe());
                Some(f)
            }
            (Some(f), None) => Some(f),
            (None, Some(info)) => {
                let kind = detect::classify_exit(info.code, info.signal, None, &tail);
                Some(Failure {
                    kind,
                    source: FailureSource::Exit,
                    message: format!("server exited while the cell ran ({})", info.describe()),
                    evidence: tail,
                    context: None,
                })
            }
            (None, None) => None,
        }
    }

    /// The prompts for a cell at its context target, or the failure that stops
    /// it before anything is sent.
    async fn prompts_for(&mut self, cell: &Cell, live: &mut Live) -> Result<Prompts, Failure> {
        let plan = self.plan.clone();
        let w = plan.workload(&cell.workload).ok_or_else(|| Failure {
            kind: FailureKind::StartupFailed,
            source: FailureSource::Preflight,
            message: format!("unknown workload {}", cell.workload),
            evidence: Vec::new(),
            context: None,
        })?;
        let margin = plan.limits.context_margin;
        let mut target = cell.context_tokens;
        if let Some(limit) = live.context_limit {
            let budget = limit.saturating_sub(w.max_tokens as u64 + margin);
            if target > budget {
                match w.overflow {
                    Overflow::Clamp => target = budget,
                    Overflow::Send => {}
                    Overflow::Fail => {
                        let numbers = ContextNumbers {
                            limit: Some(limit),
                            prompt_tokens: Some(cell.context_tokens),
                            output_tokens: Some(w.max_tokens as u64),
                            total_tokens: Some(cell.context_tokens + w.max_tokens as u64),
                        };
                        return Err(Failure {
                            kind: FailureKind::ContextOverflow,
                            source: FailureSource::Preflight,
                            message: format!(
                                "prompt {} + max_tokens {} + margin {margin} exceeds the context limit {limit}; not sent",
                                cell.context_tokens, w.max_tokens
                            ),
                            evidence: Vec::new(),
                            context: Some(numbers),
                        });
                    }
                }
            }
            if target == 0 {
                return Err(Failure {
                    kind: FailureKind::ContextOverflow,
                    source: FailureSource::Preflight,
                    message: format!("max_tokens {} + margin {margin} leave no room for a prompt in {limit} tokens", w.max_tokens),
                    evidence: Vec::new(),
                    context: None,
                });
            }
        }
        let key = (w.id.clone(), target);
        if let Some(p) = live.prompts.get(&key) {
            return Ok(p.clone());
        }
        let sources = load::prompt::load_source(&w.prompt).map_err(|m| Failure {
            kind: FailureKind::StartupFailed,
            source: FailureSource::Preflight,
            message: m,
            evidence: Vec::new(),
            context: None,
        })?;
        if live.measure.is_none() {
            let client = self.http.clone();
            let local = config_tokenizer(&plan, &cell.config);
            let (m, notice) =
                load::tokenizer::Measure::choose(&client, &live.target, local.as_deref()).await;
            if let Some(n) = notice {
                self.notice(Level::Warn, format!("{}: {n}", cell.config));
            }
            live.measure = Some(m);
        }
        let mut bodies = Vec::new();
        let mut measured = 0;
        for src in sources.iter().take(64) {
            let measure = live
                .measure
                .clone()
                .unwrap_or(load::tokenizer::Measure::Estimate);
            let (text, n, error) = measure.fit(src, target).await;
            if let Some(e) = error {
                // Stop asking a tokenizer that failed once.
                self.notice(
                    Level::Warn,
                    format!(
                        "{}: {e}; prompt lengths are estimated from here on",
                        cell.config
                    ),
                );
                live.measure = Some(load::tokenizer::Measure::Estimate);
            }
            measured = measured.max(n);
            bodies.push(text);
        }
        let v = (Arc::new(bodies), measured);
        live.prompts.insert(key, v.clone());
        Ok(v)
    }

    async fn run_cell(&mut self, config: &Config, cell: &Cell, live: &mut Live) -> CellEnd {
        let started_at = event::now();
        self.emit(Event::CellStarted {
            at: started_at.clone(),
            cell: cell.id.clone(),
            config: config.id.clone(),
        });
        let mut base = self.base_record(cell, &started_at);
        // A server that died between cells cannot run this one.
        if live.server.exited().is_some() {
            live.server.drain_logs(Duration::from_secs(2)).await;
        }
        if let Some(f) = self.death_failure(&live.server) {
            base.status = Status::Failed;
            base.failure = Some(f.clone());
            base.finished_at = event::now();
            return CellEnd::ServerDied(base, f);
        }
        let (prompts, _measured) = match self.prompts_for(cell, live).await {
            Ok(p) => p,
            Err(f) => {
                base.status = Status::Failed;
                base.failure = Some(f);
                base.finished_at = event::now();
                return CellEnd::Done(base);
            }
        };
        let Some(w) = self.plan.workload(&cell.workload).cloned() else {
            return CellEnd::Done(base);
        };
        let limits = self.plan.limits.clone();
        let load = CellLoad {
            arrival: match w.rate {
                Some(rate) => load::Arrival::Poisson { rate, capped: true },
                None => load::Arrival::Closed,
            },
            duration: w.duration_s.map(Duration::from_secs_f64),
            concurrency: cell.concurrency,
            requests: w.requests,
            warmup: w.warmup,
            max_tokens: w.max_tokens,
            prompts,
            request_timeout: Duration::from_secs_f64(limits.request_timeout_s),
            stall_timeout: Duration::from_secs_f64(limits.stall_timeout_s),
        };
        if let Ok(mut l) = live.server.log.lock() {
            l.accept.clear();
        }
        let client = self.http.clone();
        let pool = match load::Pool::new(&live.target.base) {
            Ok(p) => Arc::new(p),
            Err(message) => {
                base.status = Status::Failed;
                base.failure = Some(Failure {
                    kind: FailureKind::ConnectionError,
                    source: FailureSource::Client,
                    message,
                    evidence: Vec::new(),
                    context: None,
                });
                base.finished_at = event::now();
                return CellEnd::Done(base);
            }
        };
        let active = self.active_gpus(config);
        if let Some(g) = &self.gpu {
            g.begin_cell(config.gpus.as_deref(), &active);
        }
        let mut exit = live.server.exit.clone();
        let mut fatal = live.server.fatal.clone();
        let cell_deadline = tokio::time::sleep(Duration::from_secs_f64(limits.cell_timeout_s));
        tokio::pin!(cell_deadline);
        let spec_before = load::spec::metrics_text(&client, &live.target.base)
            .await
            .and_then(|t| load::spec::parse(&t));
        let seq = self.seq.clone();
        let mut requests = match self.run.requests_writer(&cell.id) {
            Ok(w) => Some(w),
            Err(e) => {
                self.notice(
                    Level::Warn,
                    format!("{}: raw request records not kept: {e}", cell.id),
                );
                None
            }
        };
        // The running requests borrow the sink: the block ends both before the file is finished.
        let run = {
            let mut sink = |r: &load::RequestRecord| {
                if let Some(w) = requests.as_mut() {
                    w.write(r);
                }
            };
            let run_fut = load::run_cell(&pool, &live.target, &load, &seq, &mut sink);
            tokio::pin!(run_fut);
            loop {
                tokio::select! {
                    run = &mut run_fut => break run,
                    _ = exit.changed() => {
                        live.server.drain_logs(Duration::from_secs(2)).await;
                        let f = self.death_failure(&live.server).unwrap_or_else(unknown_death);
                        base.status = Status::Failed;
                        base.failure = Some(f.clone());
                        base.finished_at = event::now();
                        return CellEnd::ServerDied(base, f);
                    }
                    _ = fatal.changed() => {
                        // A fatal line: give the process a moment to exit so the
                        // failure carries its exit status and all the evidence.
                        let _ = tokio::time::timeout(Duration::from_secs(3), exit.changed()).await;
                        live.server.drain_logs(Duration::from_millis(500)).await;
                        if let Some(f) = self.death_failure(&live.server) {
                            base.status = Status::Failed;
                            base.failure = Some(f.clone());
                            base.finished_at = event::now();
                            return CellEnd::ServerDied(base, f);
                        }
                    }
                    _ = &mut cell_deadline => {
                        base.status = Status::Failed;
                        base.failure = Some(Failure {
                            kind: FailureKind::RequestTimeout,
                            source: FailureSource::Client,
                            message: format!("the cell did not finish within cell_timeout_s = {}", limits.cell_timeout_s),
                            evidence: Vec::new(),
                            context: None,
                        });
                        base.finished_at = event::now();
                        return CellEnd::Stalled(base);
                    }
                    req = self.commands.recv() => {
                        let Some(req) = req else { continue };
                        let quit = self.apply(&req);
                        if quit {
                            return CellEnd::Quit;
                        }
                        match req.command {
                            Command::SkipCell => { base.finished_at = event::now(); return CellEnd::Skipped(base); }
                            Command::SkipConfig => { base.finished_at = event::now(); return CellEnd::SkipConfig(base); }
                            _ => {}
                        }
                    }
                }
            }
        };
        // Requests cut off mid-stream usually mean the server is going down:
        // wait briefly for its exit or its last words before judging.
        if run.stats.errors.iter().any(detect::looks_like_server_gone) {
            let settle = Duration::from_secs(3);
            tokio::select! {
                _ = exit.changed() => {}
                _ = fatal.changed() => {
                    // The cause is logged; give the process a moment to exit too.
                    let _ = tokio::time::timeout(settle, exit.changed()).await;
                }
                _ = tokio::time::sleep(settle) => {}
            }
            if live.server.exited().is_some() {
                live.server.drain_logs(Duration::from_secs(2)).await;
            }
        }
        if let Some(Err(e)) = requests.take().map(|w| w.finish()) {
            self.notice(
                Level::Warn,
                format!("{}: raw request records not kept: {e}", cell.id),
            );
        }
        let mut metrics = run.stats.metrics(run.wall_ns);
        if let Some(g) = &self.gpu {
            (metrics.gpu_mem_peak_mib, metrics.gpu_util_mean) = g.end_cell(&active);
        }
        let accept = live
            .server
            .log
            .lock()
            .map(|mut l| std::mem::take(&mut l.accept))
            .unwrap_or_default();
        if !accept.is_empty() {
            metrics.accept_len = Some(accept.iter().sum::<f64>() / accept.len() as f64);
        }
        // Counters (vLLM) are exact over the cell; prefer them to sampled log lines.
        if let Some(text) = load::spec::metrics_text(&client, &live.target.base).await {
            let counted = spec_before
                .zip(load::spec::parse(&text))
                .and_then(|(before, after)| load::spec::accept_len(before, after));
            if let Some(a) = counted {
                metrics.accept_len = Some(a);
            } else if metrics.accept_len.is_none() {
                metrics.accept_len = load::spec::sglang_gauge(&text);
            }
        }
        let health = ServerHealth {
            died: self.death_failure(&live.server),
        };
        base.finished_at = event::now();
        match detect::validate(
            &run,
            &metrics,
            &health,
            limits.max_error_rate,
            limits.short_requests == crate::plan::ShortRequests::Fail,
        ) {
            Ok(()) => {
                base.status = Status::Ok;
                base.metrics = Some(metrics);
                CellEnd::Done(base)
            }
            Err(f) => {
                base.status = Status::Failed;
                base.failure = Some(f.clone());
                if health.died.is_some() {
                    CellEnd::ServerDied(base, f)
                } else if run.stalled_for.is_some() {
                    CellEnd::Stalled(base)
                } else {
                    CellEnd::Done(base)
                }
            }
        }
    }
}

/// The local tokenizer a config's plan names, if any.
fn config_tokenizer(plan: &Plan, config: &str) -> Option<PathBuf> {
    plan.config(config)
        .and_then(|c| c.tokenizer.as_ref())
        .map(PathBuf::from)
}

fn skip_of(c: &Command) -> Option<Between> {
    match c {
        Command::SkipConfig => Some(Between::SkipConfig),
        Command::SkipCell => Some(Between::SkipCell),
        _ => None,
    }
}

fn unknown_death() -> Failure {
    Failure {
        kind: FailureKind::ServerExited,
        source: FailureSource::Exit,
        message: "server exited".into(),
        evidence: Vec::new(),
        context: None,
    }
}

fn url_host(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else if host == "0.0.0.0" {
        "127.0.0.1".into()
    } else {
        host.to_string()
    }
}
