//! `sweeptop attach [DIR]`: the dashboard on a sweep running in another process
//! (default: the newest running one under ./runs), fed by its control socket;
//! keys act on that sweep and `d` leaves it running. With `--headless` (or no
//! terminal) line progress instead; with `--send CMD` one command, then exit.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{user, Context, Result, ViewArgs};
use crate::control::file::COMMANDS;
use crate::control::{Connection, ServerMsg};
use crate::engine::{Bus, Request};
use crate::model::{Command, Event};
use crate::plan::Plan;
use crate::store;
use crate::view::state::ViewState;

#[derive(clap::Args, Debug)]
pub struct AttachArgs {
    /// The run directory (default: the newest running sweep under ./runs).
    dir: Option<PathBuf>,
    /// Print line progress instead of the dashboard.
    #[arg(long)]
    headless: bool,
    #[arg(long, value_name = "COMMAND", help = SEND_HELP.as_str())]
    send: Option<String>,
    #[command(flatten)]
    view: ViewArgs,
}

/// `--send`'s help, from the one list of command forms (the parser's error
/// message and the README say the same).
static SEND_HELP: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!("Send one command and exit: {}", crate::model::COMMAND_FORMS)
});

pub fn attach(args: AttachArgs) -> Result<u8> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => store::runs::list_runs(Path::new("runs"), crate::control::is_live)
            .into_iter()
            .find(|r| r.live)
            .map(|r| r.dir)
            .ok_or_else(|| user("no running sweep under ./runs (see `sweeptop ls`)"))?,
    };
    let send = args
        .send
        .as_deref()
        .map(str::parse::<Command>)
        .transpose()
        .map_err(user)?;
    if let Some(cmd) = &send {
        // A target is checked against the run's plan before anything is sent.
        if let Ok(plan) = crate::view::replay::plan_of_run(&dir) {
            if let Some(problem) = crate::engine::target_problem(&plan, cmd) {
                return Err(user(problem));
            }
        }
        if store::sweep::is_sweep_dir(&dir) {
            return send_to_sweep(&dir, cmd);
        }
        // A sweep on another machine (no socket reaches it) that is alive
        // by its files is steered through its commands file.
        if !crate::control::is_live(&dir) && store::sweep::shard_alive(&dir) {
            return send_by_file(&dir, cmd);
        }
    }
    if store::sweep::is_sweep_dir(&dir) {
        let headless = args.headless || !std::io::stdout().is_terminal();
        return sweep_view(&dir, &args.view, headless);
    }
    if send.is_some() || args.headless || !std::io::stdout().is_terminal() {
        lines(&dir, send)
    } else {
        dashboard(&dir, &args.view)
    }
}

/// Who a command written to a commands file is from: `script@HOST`.
fn file_sender() -> String {
    format!("script@{}", store::sweep::host_name())
}

/// `--send` through a run's `commands.jsonl`.
fn send_by_file(dir: &Path, cmd: &Command) -> Result<u8> {
    crate::control::file::append_command(dir, cmd, &file_sender())
        .context(|| format!("cannot write to {}", dir.join(COMMANDS).display()))?;
    let host = store::sweep::read_heartbeat(dir).map_or_else(|| "?".into(), |b| b.host);
    super::print(&format!(
        "sent through {} (the sweep runs on {host}; it reads the file every {} ms)\n",
        dir.join(COMMANDS).display(),
        crate::control::file::POLL.as_millis()
    ))?;
    Ok(0)
}

/// `--send` to a sweep directory: a command about a config (or a cell) goes
/// to the shard that runs it, any other to every running shard.
fn send_to_sweep(dir: &Path, cmd: &Command) -> Result<u8> {
    let meta = store::sweep::read_sweep(dir).map_err(super::store_error)?;
    let plan = Plan::load(&dir.join(store::PLAN)).map_err(|e| user(e.to_string()))?;
    let owners = plan.shard_of_configs(meta.shards);
    let owner = |config: &str| {
        plan.configs
            .iter()
            .position(|c| c.id == config)
            .map(|i| owners[i])
    };
    let targets: Vec<u32> = match cmd.target() {
        Some(t) => {
            let config = plan
                .cells
                .iter()
                .find(|c| c.id == t)
                .map_or(t.as_str(), |c| c.config.as_str());
            owner(config).into_iter().collect()
        }
        None => store::sweep::shard_dirs(dir)
            .into_iter()
            .filter(|(_, d)| store::sweep::shard_state(d).is_running())
            .map(|(i, _)| i)
            .collect(),
    };
    let mut sent = Vec::new();
    for i in targets {
        let shard = store::sweep::shard_dir(dir, i);
        if !shard.join(store::PLAN).exists() {
            continue;
        }
        crate::control::file::append_command(&shard, cmd, &file_sender())
            .context(|| format!("cannot write to {}", shard.join(COMMANDS).display()))?;
        sent.push(i.to_string());
    }
    if sent.is_empty() {
        return Err(user(format!(
            "no shard of {} that this command is for has started (see `sweeptop ls {}`)",
            dir.display(),
            dir.display()
        )));
    }
    super::print(&format!(
        "sent to shard(s) {} of {}\n",
        sent.join(", "),
        dir.display()
    ))?;
    Ok(0)
}

async fn connect(dir: &Path) -> Result<Connection> {
    Connection::connect(dir).await.map_err(|e| {
        user(format!(
            "no sweep answers in {} ({e}); see `sweeptop ls`",
            dir.display()
        ))
    })
}

/// What a viewer that leaves a running sweep is told.
pub fn detached_message(dir: &Path) -> String {
    format!(
        "detached: the sweep is still running; reattach with `sweeptop attach {}`\n",
        dir.display()
    )
}

/// `--send` / `--headless`: steer or follow a running sweep without the dashboard.
fn lines(dir: &Path, send: Option<Command>) -> Result<u8> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context(|| "cannot start the async runtime".into())?;
    rt.block_on(async move {
        let mut conn = connect(dir).await?;
        if let Some(cmd) = send {
            // Only a sweep that said hello gets the command; anything else
            // (a refusal, a socket that hangs up) is said, never a silent 0.
            let first = tokio::time::timeout(Duration::from_secs(10), conn.messages.recv()).await;
            match first {
                Ok(Some(ServerMsg::Hello { .. })) => {}
                Ok(Some(ServerMsg::Refused { reason })) => return Err(user(reason)),
                _ => {
                    return Err(user(format!(
                        "no sweep answers in {} (the socket did not say hello); see `sweeptop ls`",
                        dir.display()
                    )))
                }
            }
            conn.send(cmd, Some("script"))
                .await
                .context(|| format!("cannot send the command to {}", dir.display()))?;
            return Ok(0);
        }
        let mut live = false;
        while let Some(msg) = conn.messages.recv().await {
            match msg {
                ServerMsg::Live => live = true,
                ServerMsg::Resync => live = false,
                ServerMsg::Refused { reason } => return Err(user(reason)),
                ServerMsg::Event { event } if live => {
                    if let Some(l) = crate::view::text::line(&event) {
                        super::print(&format!("{l}\n"))?;
                    }
                    if matches!(
                        event,
                        Event::SweepFinished { .. } | Event::SweepInterrupted { .. }
                    ) {
                        break;
                    }
                }
                _ => {}
            }
        }
        Ok(0)
    })
}

/// The dashboard, fed by the socket: the sweep replays its history, then live
/// events; the keys' commands go back over the socket.
fn dashboard(dir: &Path, view_args: &ViewArgs) -> Result<u8> {
    let setup = view_args.setup(true)?;
    let rt = super::runtime(1)?;
    rt.block_on(async move {
        let conn = connect(dir).await?;
        let (mut messages, mut writer) = conn.split();
        // The view starts from the plan; the sweep replays its history to us.
        let plan = Plan::load(&dir.join(store::PLAN)).ok().map(Arc::new);
        let mut view = ViewState::new(plan);
        view.run_dir = dir.display().to_string();
        let bus = Bus::new();
        let (tx, mut commands) = mpsc::channel::<Request>(64);
        let mut dashboard =
            crate::tui::Dashboard::start(view, dir.to_path_buf(), &bus, tx, setup, true)
                .context(|| "cannot open the dashboard".into())?;
        let mut refused = None;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                msg = messages.recv() => match msg {
                    Some(ServerMsg::Event { event }) => {
                        let channel = if matches!(event, Event::Log { .. }) { &bus.logs } else { &bus.events };
                        let _ = channel.send(event);
                    }
                    Some(ServerMsg::Refused { reason }) => {
                        refused = Some(reason);
                        break;
                    }
                    Some(_) => {}
                    // The sweep ended (or died): the view shows how it ended.
                    None => break,
                },
                req = commands.recv() => {
                    if let Some(req) = req {
                        if writer.send(req.command, Some(&req.source)).await.is_err() {
                            break;
                        }
                    }
                }
                _ = tick.tick() => {
                    if dashboard.is_finished() {
                        break;
                    }
                }
            }
        }
        // Commands typed just before leaving (a quit) still go out.
        while let Ok(req) = commands.try_recv() {
            let _ = writer.send(req.command, Some(&req.source)).await;
        }
        dashboard.engine_done();
        let _ = tokio::task::spawn_blocking(move || dashboard.join()).await;
        if let Some(r) = refused {
            return Err(user(r));
        }
        // Left with `d` (or the window closed) while the sweep goes on: say
        // so, and how to come back.
        if crate::control::is_live(dir) {
            super::print(&detached_message(dir))?;
        }
        Ok(0)
    })
}

/// A sweep directory's shards, followed through their files (there is no
/// socket between machines): new lines of each shard's `events.jsonl` and
/// server logs, read every [`TAIL_POLL`].
struct SweepTail {
    dir: PathBuf,
    /// Per file: how far it has been read.
    offsets: std::collections::HashMap<PathBuf, u64>,
    /// The config a shard started last, per shard.
    running: std::collections::HashMap<u32, String>,
    /// The shard whose config started last (what a skip is for).
    latest: Option<u32>,
    /// The latest GPU sample of each host that runs a shard (from its
    /// `gpu.jsonl`), shown as one panel grouped by host.
    gpus: std::collections::BTreeMap<String, crate::model::GpuSnapshot>,
    /// The shard of each config (how the plan was split).
    shard_of: std::collections::HashMap<String, u32>,
}

/// How far back in a shard's `gpu.jsonl` a new viewer starts (its last samples).
const GPU_TAIL: u64 = 64 << 10;

const TAIL_POLL: Duration = Duration::from_millis(500);
/// Most bytes read from one file per poll (a burst of log lines is cut).
const TAIL_CHUNK: u64 = 1 << 20;

impl SweepTail {
    /// Following from the files' current ends.
    fn new(dir: &Path) -> SweepTail {
        let mut t = SweepTail {
            dir: dir.to_path_buf(),
            offsets: Default::default(),
            running: Default::default(),
            latest: None,
            gpus: Default::default(),
            shard_of: Default::default(),
        };
        if let (Ok(meta), Ok(plan)) = (
            store::sweep::read_sweep(dir),
            Plan::load(&dir.join(store::PLAN)),
        ) {
            let owners = plan.shard_of_configs(meta.shards);
            t.shard_of = plan
                .configs
                .iter()
                .map(|c| c.id.clone())
                .zip(owners)
                .collect();
        }
        for (i, d) in store::sweep::shard_dirs(dir) {
            for ev in store::read_events(&d) {
                t.note(i, &ev);
            }
            for f in t.files(&d) {
                let len = std::fs::metadata(&f).map_or(0, |m| m.len());
                t.offsets.insert(f, len);
            }
            let gpu = d.join(store::GPU);
            let len = std::fs::metadata(&gpu).map_or(0, |m| m.len());
            t.offsets.insert(gpu, len.saturating_sub(GPU_TAIL));
        }
        t.poll_gpus();
        t
    }

    fn note(&mut self, shard: u32, ev: &Event) {
        if let Event::ConfigStarting { config, .. } | Event::CellStarted { config, .. } = ev {
            self.running.insert(shard, config.clone());
            self.latest = Some(shard);
        }
    }

    fn files(&self, shard_dir: &Path) -> Vec<PathBuf> {
        let mut v = vec![shard_dir.join(store::EVENTS)];
        if let Ok(entries) = std::fs::read_dir(shard_dir.join(store::LOGS)) {
            v.extend(entries.flatten().map(|e| e.path()));
        }
        v
    }

    /// Complete new lines of `path` since the last read.
    fn new_lines(&mut self, path: &Path) -> Vec<String> {
        use std::io::{Read, Seek, SeekFrom};
        let at = self.offsets.get(path).copied().unwrap_or(0);
        let Ok(mut f) = std::fs::File::open(path) else {
            return Vec::new();
        };
        let len = f.metadata().map_or(0, |m| m.len());
        let at = if len < at { 0 } else { at };
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(at)).is_err() || f.take(TAIL_CHUNK).read_to_end(&mut buf).is_err()
        {
            return Vec::new();
        }
        let end = match buf.iter().rposition(|&b| b == b'\n') {
            Some(i) => i + 1,
            // One line longer than a chunk: skip it.
            None if buf.len() as u64 >= TAIL_CHUNK => buf.len(),
            None => 0,
        };
        self.offsets.insert(path.to_path_buf(), at + end as u64);
        String::from_utf8_lossy(&buf[..end])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// What the shards wrote since the last poll, as events (log lines too).
    fn poll(&mut self) -> Vec<Event> {
        // GPUs first: a config starting is numbered on the panel of its host.
        let mut out: Vec<Event> = self.poll_gpus().into_iter().collect();
        for (i, d) in store::sweep::shard_dirs(&self.dir) {
            for line in self.new_lines(&d.join(store::EVENTS)) {
                let Ok(ev) = serde_json::from_str::<Event>(&line) else {
                    continue;
                };
                // A shard's own start and end are not the sweep's.
                if matches!(
                    ev,
                    Event::SweepStarted { .. }
                        | Event::SweepFinished { .. }
                        | Event::SweepInterrupted { .. }
                ) {
                    continue;
                }
                self.note(i, &ev);
                out.push(self.on_merged_gpus(ev));
            }
            for f in self.files(&d).into_iter().skip(1) {
                let Some(config) = f
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .filter(|_| f.extension().is_some_and(|e| e == "log"))
                    .map(str::to_string)
                else {
                    continue;
                };
                for line in self.new_lines(&f) {
                    out.push(Event::Log {
                        config: config.clone(),
                        line,
                        mark: crate::model::LogMark::Plain,
                    });
                }
            }
        }
        out
    }

    /// Each shard's newest GPU sample (a partial first line after a jump to
    /// the file's tail does not read, and is skipped); the hosts' GPUs as one
    /// sample when any changed.
    fn poll_gpus(&mut self) -> Option<Event> {
        let mut changed = false;
        for (i, d) in store::sweep::shard_dirs(&self.dir) {
            let newest = self
                .new_lines(&d.join(store::GPU))
                .iter()
                .rev()
                .find_map(|l| serde_json::from_str::<crate::model::GpuSnapshot>(l).ok());
            if let Some(snap) = newest {
                let host = Self::host_of(i, &d);
                if self.gpus.get(&host).is_none_or(|s| s.at_ms <= snap.at_ms) {
                    self.gpus.insert(host, snap);
                    changed = true;
                }
            }
        }
        changed
            .then(|| self.merged_gpus().map(|snapshot| Event::Gpu { snapshot }))
            .flatten()
    }

    fn host_of(shard: u32, dir: &Path) -> String {
        store::sweep::read_heartbeat(dir).map_or_else(|| format!("shard {shard}"), |b| b.host)
    }

    /// Every host's GPUs as one sample, grouped by host (in host order), each
    /// GPU numbered in that order and named with its host.
    fn merged_gpus(&self) -> Option<crate::model::GpuSnapshot> {
        let mut gpus = Vec::new();
        for (host, snap) in &self.gpus {
            for g in &snap.gpus {
                let mut g = g.clone();
                g.index = gpus.len() as u32;
                g.name = format!("{host} {}", g.name);
                gpus.push(g);
            }
        }
        let first = self.gpus.values().next()?;
        Some(crate::model::GpuSnapshot {
            at_ms: self.gpus.values().map(|s| s.at_ms).max().unwrap_or(0),
            status: first.status.clone(),
            gpus,
        })
    }

    /// A config starting: its GPUs renumbered as the merged panel numbers
    /// those of the host its shard runs on.
    fn on_merged_gpus(&self, mut ev: Event) -> Event {
        if let Event::ConfigStarting { config, gpus, .. } = &mut ev {
            let host = self.shard_of.get(config.as_str()).and_then(|&i| {
                store::sweep::read_heartbeat(&store::sweep::shard_dir(&self.dir, i)).map(|b| b.host)
            });
            let offset: Option<u32> = host
                .filter(|h| self.gpus.contains_key(h))
                .map(|h| self.gpus.range(..h).map(|(_, s)| s.gpus.len() as u32).sum());
            if let Some(o) = offset {
                gpus.iter_mut().for_each(|g| *g += o);
            }
        }
        ev
    }

    /// How the sweep ended, once no shard runs or waits to: finished when
    /// every shard has, else interrupted.
    fn ended(&self) -> Option<Event> {
        let meta = store::sweep::read_sweep(&self.dir).ok()?;
        let states: Vec<_> = (1..=meta.shards)
            .map(|i| store::sweep::shard_state(&store::sweep::shard_dir(&self.dir, i)))
            .collect();
        if states
            .iter()
            .any(|s| s.is_running() || *s == store::sweep::ShardState::Pending)
        {
            return None;
        }
        let at = crate::model::Timestamp::now();
        if states
            .iter()
            .all(|s| *s == store::sweep::ShardState::Finished)
        {
            let results = store::read_results(&self.dir).unwrap_or_default();
            let count = |st: crate::model::Status| {
                results.records.iter().filter(|r| r.status == st).count()
            };
            return Some(Event::SweepFinished {
                at,
                ok: count(crate::model::Status::Ok),
                failed: count(crate::model::Status::Failed),
                skipped: count(crate::model::Status::Skipped),
            });
        }
        Some(Event::SweepInterrupted {
            at,
            reason: format!(
                "no shard is running; continue with `sweeptop slurm --resume {}`",
                self.dir.display()
            ),
        })
    }

    /// A key's command to the shards it is for: one that names a config or a
    /// cell (retry, exclude, include) to the shard of that config, a skip of
    /// no config in particular to the shard whose config started last, a
    /// pause, resume or quit to every running shard (a toggle becomes a
    /// pause while any of them runs unpaused).
    fn route(&self, cmd: &Command) -> Vec<(u32, Command)> {
        let running: Vec<u32> = store::sweep::shard_dirs(&self.dir)
            .into_iter()
            .filter(|(_, d)| store::sweep::shard_state(d).is_running())
            .map(|(i, _)| i)
            .collect();
        // By name and target, not by variant: a command that names a config
        // or a cell goes to its shard whatever its kind.
        match (cmd.name(), cmd.target()) {
            ("pause" | "resume" | "quit", _) => running.iter().map(|&i| (i, cmd.clone())).collect(),
            ("toggle_pause", _) => {
                let paused = |i: u32| {
                    store::read_events(&store::sweep::shard_dir(&self.dir, i))
                        .iter()
                        .rev()
                        .find_map(|e| match e {
                            Event::Paused { .. } => Some(true),
                            Event::Resumed { .. } | Event::SweepStarted { .. } => Some(false),
                            _ => None,
                        })
                        .unwrap_or(false)
                };
                let all_paused = running.iter().all(|&i| paused(i));
                let cmd = if all_paused {
                    Command::Resume
                } else {
                    Command::Pause
                };
                running.iter().map(|&i| (i, cmd.clone())).collect()
            }
            (_, Some(target)) => {
                // A cell id is `<config>/…`.
                let config = target.split('/').next().unwrap_or(&target);
                self.shard_of
                    .get(config)
                    .map(|&i| vec![(i, cmd.clone())])
                    .unwrap_or_default()
            }
            // A skip of no config in particular: the shard whose config
            // started last.
            (_, None) => self
                .latest
                .filter(|i| running.contains(i))
                .map(|i| vec![(i, cmd.clone())])
                .unwrap_or_default(),
        }
    }
}

/// `attach SWEEP_DIR`: every shard as one dashboard (or line progress),
/// followed through the shards' files; keys steer through their commands
/// files.
fn sweep_view(dir: &Path, view_args: &ViewArgs, headless: bool) -> Result<u8> {
    let meta = store::sweep::read_sweep(dir).map_err(super::store_error)?;
    let plan = Plan::load(&dir.join(store::PLAN)).map_err(|e| user(e.to_string()))?;
    let setup = if headless {
        None
    } else {
        Some(view_args.setup(true)?)
    };
    let rt = super::runtime(1)?;
    rt.block_on(async move {
        let plan = Arc::new(plan);
        let mut tail = SweepTail::new(dir);
        let Some(setup) = setup else {
            // Line progress until the sweep ends.
            loop {
                for ev in tail.poll() {
                    if let Some(l) = crate::view::text::line(&ev) {
                        super::print(&format!("{l}\n"))?;
                    }
                }
                if let Some(end) = tail.ended() {
                    if let Some(l) = crate::view::text::line(&end) {
                        super::print(&format!("{l}\n"))?;
                    }
                    return Ok(0);
                }
                tokio::time::sleep(TAIL_POLL).await;
            }
        };
        // The view so far: the sweep's start, then every shard's events and
        // results, merged.
        let mut view = ViewState::new(Some(plan.clone()));
        view.apply(&Event::SweepStarted {
            at: meta.created_at,
            plan: plan.name.clone(),
            run_dir: dir.display().to_string(),
            configs: plan.configs.len(),
            cells: plan.cells.len(),
            already_done: 0,
        });
        for ev in store::read_events(dir) {
            view.apply(&tail.on_merged_gpus(ev));
        }
        if let Some(snapshot) = tail.merged_gpus() {
            view.apply(&Event::Gpu { snapshot });
        }
        let mut results = store::read_results(dir).map_err(super::store_error)?;
        results.only_cells(plan.cells.iter().map(|c| c.id.as_str()));
        for r in results.records {
            view.record(r);
        }
        let bus = Bus::new();
        let (tx, mut commands) = mpsc::channel::<Request>(64);
        let mut dashboard =
            crate::tui::Dashboard::start(view, dir.to_path_buf(), &bus, tx, setup, true)
                .context(|| "cannot open the dashboard".into())?;
        let host = store::sweep::host_name();
        let mut tick = tokio::time::interval(TAIL_POLL);
        let send = |tail: &SweepTail, req: Request| {
            for (i, cmd) in tail.route(&req.command) {
                let from = format!("{}@{host}", req.source);
                let _ = crate::control::file::append_command(
                    &store::sweep::shard_dir(dir, i),
                    &cmd,
                    &from,
                );
            }
        };
        loop {
            tokio::select! {
                req = commands.recv() => match req {
                    Some(req) => send(&tail, req),
                    None => break,
                },
                _ = tick.tick() => {
                    if dashboard.is_finished() {
                        break;
                    }
                    for ev in tail.poll() {
                        let channel = if matches!(ev, Event::Log { .. }) { &bus.logs } else { &bus.events };
                        let _ = channel.send(ev);
                    }
                    if let Some(end) = tail.ended() {
                        let _ = bus.events.send(end);
                        break;
                    }
                }
            }
        }
        while let Ok(req) = commands.try_recv() {
            send(&tail, req);
        }
        dashboard.engine_done();
        let _ = tokio::task::spawn_blocking(move || dashboard.join()).await;
        Ok(0)
    })
}
