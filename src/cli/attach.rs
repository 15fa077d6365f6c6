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
use crate::control::shards::{self, SendError};
use crate::control::{Connection, ServerMsg};
use crate::engine::{Bus, Request};
use crate::model::{Command, Event};
use crate::plan::Plan;
use crate::store::shared::{FileWork, FILE_DEADLINE};
use crate::store::tail::TAIL_POLL;
use crate::store::{self, sweep::SweepMeta};
use crate::view::feed::{FeedError, SweepFeed};
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
    let sent = match shards::send_to_sweep(dir, cmd, &file_sender()) {
        Ok(sent) => sent,
        Err(SendError::Store(e)) => return Err(super::store_error(e)),
        Err(SendError::Plan(e)) => return Err(user(e.to_string())),
        Err(SendError::Write { shard, source }) => {
            return Err(source)
                .context(|| format!("cannot write to {}", shard.join(COMMANDS).display()))
        }
    };
    if sent.is_empty() {
        return Err(user(format!(
            "no shard of {} that this command is for has started (see `sweeptop ls {}`)",
            dir.display(),
            dir.display()
        )));
    }
    let sent: Vec<String> = sent.iter().map(u32::to_string).collect();
    super::print(&format!(
        "sent to shard(s) {} of {}\n",
        sent.join(", "),
        dir.display()
    ))?;
    Ok(0)
}

async fn connect(dir: &Path) -> Result<Connection> {
    let e = match Connection::connect(dir).await {
        Ok(c) => return Ok(c),
        Err(e) => e,
    };
    // A run that ended is for `open`, not `attach`: its state read off the
    // runtime, waited for only until the deadline (a hung mount is "no
    // sweep answers").
    let state = FileWork::new("attach-state")
        .run(FILE_DEADLINE, {
            let dir = dir.to_path_buf();
            move || store::read_meta(&dir).map(|m| m.state).ok()
        })
        .await
        .ok()
        .flatten();
    Err({
        let d = dir.display();
        match state {
            Some(crate::model::RunState::Finished) => user(format!(
                "the sweep in {d} has finished (nothing runs to attach to): look at it with `sweeptop open {d}`"
            )),
            Some(crate::model::RunState::Interrupted) => user(format!(
                "the sweep in {d} was interrupted (nothing runs to attach to): continue it with `sweeptop run --resume {d}`, or look at it with `sweeptop open {d}`"
            )),
            _ => user(format!("no sweep answers in {d} ({e}); see `sweeptop ls`")),
        }
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
                    Some(ServerMsg::Event { event }) => publish(&bus, event),
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
        let retry = tokio::task::spawn_blocking(move || dashboard.join())
            .await
            .ok()
            .flatten();
        if let Some(r) = refused {
            return Err(user(r));
        }
        // A retry asked for after the sweep ended runs here, in this terminal.
        if let Some(targets) = retry.filter(|_| !crate::control::is_live(dir)) {
            return super::run::retry_here(dir, &targets);
        }
        // Left with `d` (or the window closed) while the sweep goes on: say
        // so, and how to come back.
        if crate::control::is_live(dir) {
            super::print(&detached_message(dir))?;
        }
        Ok(0)
    })
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
        let feed = SweepFeed::open(dir, &meta, &plan)
            .await
            .map_err(|e| user(e.to_string()))?;
        match setup {
            None => sweep_lines(dir, feed).await,
            Some(setup) => sweep_dashboard(dir, &meta, Arc::new(plan), feed, setup).await,
        }
    })
}

/// Line progress of a sweep directory until the sweep ends.
async fn sweep_lines(dir: &Path, mut feed: SweepFeed) -> Result<u8> {
    loop {
        let (events, end) = feed.poll(dir).await;
        for ev in events {
            if let Some(l) = crate::view::text::line(&ev) {
                super::print(&format!("{l}\n"))?;
            }
        }
        if let Some(end) = end {
            if let Some(l) = crate::view::text::line(&end) {
                super::print(&format!("{l}\n"))?;
            }
            return Ok(0);
        }
        tokio::time::sleep(TAIL_POLL).await;
    }
}

/// The dashboard over a sweep directory: the view so far (the sweep's
/// start, then every shard's events and results, merged), then what the
/// shards write; keys go to the shards they are for.
async fn sweep_dashboard(
    dir: &Path,
    meta: &SweepMeta,
    plan: Arc<Plan>,
    mut feed: SweepFeed,
    setup: crate::tui::Setup,
) -> Result<u8> {
    let view = match feed.first_view(dir, meta, plan.clone()).await {
        Ok(view) => view,
        Err(FeedError::Store(e)) => return Err(super::store_error(e)),
        Err(e @ FeedError::Stuck { .. }) => return Err(user(e.to_string())),
    };
    let bus = Bus::new();
    let (tx, mut commands) = mpsc::channel::<Request>(64);
    let mut dashboard =
        crate::tui::Dashboard::start(view, dir.to_path_buf(), &bus, tx, setup, true)
            .context(|| "cannot open the dashboard".into())?;
    let host = store::sweep::host_name();
    let mut tick = tokio::time::interval(TAIL_POLL);
    // Keys are written to the shards' commands files on a thread of their
    // own, waited for only until a deadline: a hung mount holds that thread,
    // never the view's keys or its exit.
    let mut sender = FileWork::<()>::new("attach-keys");
    loop {
        tokio::select! {
            req = commands.recv() => match req {
                Some(req) => send_keys(&mut sender, &feed, req, &host, &bus).await,
                None => break,
            },
            _ = tick.tick() => {
                if dashboard.is_finished() {
                    break;
                }
                let (events, end) = feed.poll(dir).await;
                for ev in events {
                    publish(&bus, ev);
                }
                if let Some(end) = end {
                    let _ = bus.events.send(end);
                    break;
                }
            }
        }
    }
    while let Ok(req) = commands.try_recv() {
        send_keys(&mut sender, &feed, req, &host, &bus).await;
    }
    dashboard.engine_done();
    let retry = tokio::task::spawn_blocking(move || dashboard.join())
        .await
        .ok()
        .flatten();
    if let Some(targets) = retry {
        return super::run::retry_here(dir, &targets);
    }
    Ok(0)
}

/// A key's command to the shards it is for, written off the runtime; a
/// write that does not answer within the deadline is said on the dashboard
/// (it goes on alone, and the next key waits for it instead).
async fn send_keys(
    sender: &mut FileWork<()>,
    feed: &SweepFeed,
    req: Request,
    host: &str,
    bus: &Bus,
) {
    let (router, host) = (feed.router.clone(), host.to_string());
    let what = req.command.name();
    if let Err(stuck) = sender
        .run(FILE_DEADLINE, move || router.send(&req, &host))
        .await
    {
        publish(
            bus,
            Event::Notice {
                at: crate::model::Timestamp::now(),
                level: crate::model::Level::Warn,
                message: format!("{what}: the shards' commands files did not answer: {stuck}"),
            },
        );
    }
}

/// An event to the dashboard: log lines on their own channel.
fn publish(bus: &Bus, ev: Event) {
    let channel = if matches!(ev, Event::Log { .. }) {
        &bus.logs
    } else {
        &bus.events
    };
    let _ = channel.send(ev);
}
