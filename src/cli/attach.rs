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
        None => super::ls::list_runs(Path::new("runs"))
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
