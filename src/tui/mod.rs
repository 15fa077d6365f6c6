//! The live terminal dashboard. Its state is a fold of the engine's events
//! ([`state`]), so a live sweep, a resumed one and `sweeptop open DIR` are the
//! same view; keys are data ([`keymap`]), looks are data ([`theme`]); [`app`]
//! applies actions, [`draw`] renders without changing anything, and
//! [`terminal`] owns the screen and the frame loop.

pub mod app;
pub mod draw;
pub mod grid;
pub mod keymap;
pub mod state;
pub mod terminal;
pub mod theme;

#[cfg(test)]
mod tests;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;

use tokio::sync::{broadcast, mpsc, oneshot};

use crate::engine::{Bus, Request};
use crate::event::{Event, Level};
use crate::plan::Plan;
use crate::store;

use app::{App, Look, Mode};
use keymap::Keymap;
use state::ViewState;
use terminal::{Input, LoopEnd};
use theme::Theme;

/// How the dashboard looks: `--theme`, `--ascii`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ViewArgs {
    /// Dashboard theme: dark, light, high-contrast, mono, a theme in
    /// ~/.config/sweeptop/themes/, or a path to a theme file.
    #[arg(long, value_name = "NAME|PATH")]
    pub theme: Option<String>,
    /// ASCII characters only (automatic when the locale is not UTF-8).
    #[arg(long)]
    pub ascii: bool,
}

/// The dashboard's settings, read before anything starts so a bad file is a
/// clear error, not a garbled screen.
pub struct Setup {
    pub keymap: Keymap,
    pub theme: Theme,
    pub look: Look,
}

impl ViewArgs {
    pub fn setup(&self, show_gpu: bool) -> Result<Setup, String> {
        let dir = theme::user_config_dir();
        let keys = dir.as_ref().map(|d| d.join("keys.toml"));
        let keymap = Keymap::load(keys.as_deref()).map_err(|e| e.to_string())?;
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let theme = Theme::resolve(self.theme.as_deref(), dir.as_deref(), no_color)
            .map_err(|e| e.to_string())?;
        Ok(Setup {
            keymap,
            theme,
            look: Look {
                ascii: self.ascii || !locale_is_utf8(),
                show_gpu,
            },
        })
    }
}

/// Whether the locale says UTF-8 (`LC_ALL`, else `LC_CTYPE`, else `LANG`).
pub fn locale_is_utf8() -> bool {
    ["LC_ALL", "LC_CTYPE", "LANG"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
        .map(|v| {
            let v = v.to_ascii_lowercase();
            v.contains("utf-8") || v.contains("utf8")
        })
        .unwrap_or(false)
}

/// The view of a run directory: its events folded, then its results (the
/// record of truth), and the GPU samples kept in `gpu.jsonl`.
pub fn load_run(dir: &Path) -> Result<ViewState, String> {
    let has_events = dir.join(store::EVENTS).exists();
    let has_results = dir.join(store::RESULTS).exists();
    if !dir.join(store::PLAN).exists() && !has_events && !has_results {
        return Err(format!("{} is not a run directory", dir.display()));
    }
    let plan = Plan::load(&dir.join(store::PLAN)).ok().map(Arc::new);
    let mut view = ViewState::new(plan);
    view.run_dir = dir.display().to_string();
    for ev in read_lines::<Event>(&dir.join(store::EVENTS)) {
        view.apply(&ev);
    }
    let snaps: Vec<crate::gpu::GpuSnapshot> = read_lines(&dir.join("gpu.jsonl"));
    let skip = snaps.len().saturating_sub(state::GPU_HISTORY);
    for snapshot in snaps.into_iter().skip(skip) {
        view.apply(&Event::Gpu { snapshot });
    }
    let results = store::read_results(dir).map_err(|e| e.to_string())?;
    for r in results.records {
        view.record(r);
    }
    Ok(view)
}

/// Every line of a JSON-lines file that parses (a torn or foreign line is skipped).
fn read_lines<T: serde::de::DeserializeOwned>(path: &Path) -> Vec<T> {
    let Ok(f) = std::fs::File::open(path) else {
        return Vec::new();
    };
    BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| serde_json::from_str(&l).ok())
        .collect()
}

/// `sweeptop open DIR`: the dashboard over a recorded run, read-only.
pub fn open(dir: &Path, args: &ViewArgs) -> Result<i32, String> {
    let view = load_run(dir)?;
    let show_gpu = view
        .gpu
        .status()
        .is_some_and(|s| *s != crate::gpu::GpuStatus::Disabled);
    let setup = args.setup(show_gpu)?;
    let running = store::read_meta(dir)
        .ok()
        .filter(|m| m.state == "running" && crate::engine::process::start_time(m.pid).is_some());
    let mut app = App::new(
        view,
        Mode::ReadOnly,
        dir.to_path_buf(),
        setup.keymap,
        setup.theme,
        setup.look,
    );
    if let Some(m) = running {
        app.notice(
            Level::Warn,
            format!(
                "this run is still going (pid {}): what you see is a snapshot",
                m.pid
            ),
        );
    }
    let (tx, rx) = sync_channel::<Input>(256);
    let stop = Arc::new(AtomicBool::new(false));
    let _guard = terminal::Guard::enter().map_err(|e| format!("cannot use the terminal: {e}"))?;
    terminal::spawn_input_reader(tx, stop.clone());
    let end = terminal::frame_loop(&mut app, &rx, false);
    stop.store(true, Ordering::SeqCst);
    drop(_guard);
    Ok(match end {
        LoopEnd::Exit | LoopEnd::Closed => 0,
        LoopEnd::Detached | LoopEnd::Restored => 1,
    })
}

/// A live dashboard running on its own thread beside the engine.
pub struct Dashboard {
    thread: std::thread::JoinHandle<()>,
    done: Option<oneshot::Sender<()>>,
    stop_keys: Arc<AtomicBool>,
    /// Set when the view went away (hangup, panic) and the sweep runs on without it.
    pub detached: Arc<AtomicBool>,
}

/// Bounded so a stalled terminal cannot make the view hoard memory; log lines
/// beyond it are dropped (and counted), events wait.
const INPUT_QUEUE: usize = 8192;

impl Dashboard {
    /// Start the dashboard: subscribe to the bus (before the engine says anything),
    /// take over the terminal, and draw until told the engine is done. Must be
    /// called inside the runtime the engine runs on.
    pub fn start(
        view: ViewState,
        run_dir: PathBuf,
        bus: &Bus,
        commands: mpsc::Sender<Request>,
        setup: Setup,
        attached: bool,
    ) -> std::io::Result<Dashboard> {
        let guard = terminal::Guard::enter()?;
        let (tx, rx) = sync_channel::<Input>(INPUT_QUEUE);
        let (done_tx, done_rx) = oneshot::channel();
        tokio::spawn(forward_events(bus.events.subscribe(), tx.clone(), done_rx));
        tokio::spawn(forward_logs(bus.logs.subscribe(), tx.clone()));
        tokio::spawn(watch_hangup(tx.clone()));
        let stop_keys = Arc::new(AtomicBool::new(false));
        terminal::spawn_input_reader(tx, stop_keys.clone());
        let detached = Arc::new(AtomicBool::new(false));
        let detached_flag = detached.clone();
        let thread = std::thread::Builder::new()
            .name("sweeptop-tui".into())
            .spawn(move || {
                let mut app = App::new(
                    view,
                    if attached {
                        Mode::Attached { commands }
                    } else {
                        Mode::Live { commands }
                    },
                    run_dir.clone(),
                    setup.keymap,
                    setup.theme,
                    setup.look,
                );
                let end = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    terminal::frame_loop(&mut app, &rx, true)
                }));
                drop(guard);
                match end {
                    Ok(LoopEnd::Exit) | Ok(LoopEnd::Closed) => {}
                    Ok(LoopEnd::Detached) => {
                        detached_flag.store(true, Ordering::SeqCst);
                        terminal::carry_on_headless(&rx, &run_dir);
                    }
                    Ok(LoopEnd::Restored) | Err(_) => {
                        // The panic hook has put the terminal back.
                        detached_flag.store(true, Ordering::SeqCst);
                        terminal::carry_on_printing(&rx);
                    }
                }
            })?;
        Ok(Dashboard {
            thread,
            done: Some(done_tx),
            stop_keys,
            detached,
        })
    }

    /// The engine has returned: let the view show the end and wait for the user
    /// (after a finished sweep) or close (after a quit).
    pub fn engine_done(&mut self) {
        if let Some(d) = self.done.take() {
            let _ = d.send(());
        }
    }

    /// Wait for the dashboard to close; the terminal is restored when this returns.
    pub fn join(mut self) {
        self.engine_done();
        let _ = self.thread.join();
        self.stop_keys.store(true, Ordering::SeqCst);
        terminal::restore();
    }

    /// Whether the dashboard thread has ended (the user left it).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }
}

/// Engine events, in order; when the engine is done, whatever is still queued,
/// then `EngineDone`.
async fn forward_events(
    mut events: broadcast::Receiver<Event>,
    tx: SyncSender<Input>,
    mut done: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            biased;
            r = events.recv() => match r {
                Ok(ev) => {
                    if !terminal::push(&tx, Input::Event(ev)).await {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    if !terminal::push(&tx, Input::EventsMissed).await {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = &mut done => break,
        }
    }
    loop {
        match events.try_recv() {
            Ok(ev) => {
                if !terminal::push(&tx, Input::Event(ev)).await {
                    return;
                }
            }
            Err(broadcast::error::TryRecvError::Lagged(_)) => {
                let _ = terminal::push(&tx, Input::EventsMissed).await;
            }
            Err(_) => break,
        }
    }
    let _ = terminal::push(&tx, Input::EngineDone).await;
}

/// Server log lines: dropped (and counted) rather than waited for when the view
/// is behind — the log file has them all.
async fn forward_logs(mut logs: broadcast::Receiver<Event>, tx: SyncSender<Input>) {
    let mut missed = 0u64;
    loop {
        match logs.recv().await {
            Ok(ev) => {
                if missed > 0 && tx.try_send(Input::LogsMissed(missed)).is_ok() {
                    missed = 0;
                }
                match tx.try_send(Input::Event(ev)) {
                    Ok(()) => {}
                    Err(std::sync::mpsc::TrySendError::Full(_)) => missed += 1,
                    Err(std::sync::mpsc::TrySendError::Disconnected(_)) => return,
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => missed += n,
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// SIGHUP: the SSH link dropped. The view stops; the sweep does not.
async fn watch_hangup(tx: SyncSender<Input>) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    if hup.recv().await.is_some() {
        terminal::note_hangup();
        let _ = tx.try_send(Input::Hangup);
    }
}

/// `sweeptop attach DIR`: the dashboard on a sweep running in another process,
/// fed by its control socket; keys act on that sweep. `d` leaves it running.
pub fn attach(dir: &Path, args: &ViewArgs) -> Result<i32, String> {
    let setup = args.setup(true)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async move {
        let conn = crate::control::Connection::connect(dir)
            .await
            .map_err(|e| format!("no sweep answers in {} ({e}); see `sweeptop ls`", dir.display()))?;
        let (mut messages, mut writer) = conn.split();
        // The view starts from the plan; the sweep replays its history to us.
        let plan = Plan::load(&dir.join(store::PLAN)).ok().map(Arc::new);
        let mut view = ViewState::new(plan);
        view.run_dir = dir.display().to_string();
        let bus = Bus::new();
        let (tx, mut commands) = mpsc::channel::<Request>(64);
        let mut dashboard = Dashboard::start(view, dir.to_path_buf(), &bus, tx, setup, true)
            .map_err(|e| format!("cannot open the dashboard: {e}"))?;
        let mut refused = None;
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
        loop {
            tokio::select! {
                msg = messages.recv() => match msg {
                    Some(crate::control::ServerMsg::Event { event }) => {
                        let channel = if matches!(event, Event::Log { .. }) { &bus.logs } else { &bus.events };
                        let _ = channel.send(event);
                    }
                    Some(crate::control::ServerMsg::Refused { reason }) => {
                        refused = Some(reason);
                        break;
                    }
                    Some(_) => {}
                    // The sweep ended (or died): the view shows how it ended.
                    None => break,
                },
                req = commands.recv() => {
                    if let Some(req) = req {
                        if writer.send(req.command).await.is_err() {
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
            let _ = writer.send(req.command).await;
        }
        dashboard.engine_done();
        tokio::task::spawn_blocking(move || dashboard.join())
            .await
            .map_err(|e| e.to_string())?;
        match refused {
            Some(r) => Err(r),
            None => Ok(0),
        }
    })
}
