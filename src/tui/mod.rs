//! The live terminal dashboard. Its state is a fold of the engine's events
//! ([`state`]), so a live sweep, a resumed one and `sweeptop open DIR` are the
//! same view; keys are data ([`keymap`]), looks are data ([`theme`]); [`app`]
//! applies actions to the view and to [`ui`] (where the user is looking),
//! [`layout`] places the panes, [`draw`] renders without changing anything,
//! [`disk`] reads and writes the run directory off the dashboard's thread,
//! and [`terminal`] owns the screen and the frame loop.

pub mod app;
pub mod disk;
pub mod draw;
pub mod keymap;
pub mod layout;
pub mod terminal;
pub mod theme;
mod thrifty;
pub mod ui;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, oneshot};

use crate::engine::{Bus, Request};
use crate::model::{Event, Level, LogMark};
use crate::view::state::ViewState;

use app::{App, Mode};
use keymap::Keymap;
use terminal::{Input, LoopEnd};
use theme::Theme;
use ui::Look;

/// A keys or theme file the dashboard cannot use (the message names the file).
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Keys(#[from] keymap::KeymapError),
    #[error(transparent)]
    Theme(#[from] theme::ThemeError),
}

/// The dashboard's settings, read before anything starts so a bad file is a
/// clear error, not a garbled screen.
pub struct Setup {
    pub keymap: Keymap,
    pub theme: Theme,
    pub look: Look,
}

impl Setup {
    /// The user's keys file and the theme (`--theme`: a name or a path, else
    /// the default; `NO_COLOR` means mono), ASCII when asked or when the locale
    /// is not UTF-8. The error names the file and the problem.
    pub fn load(
        theme: Option<&str>,
        ascii: bool,
        mouse: bool,
        show_gpu: bool,
    ) -> Result<Setup, SetupError> {
        let dir = theme::user_config_dir();
        let keys = dir.as_ref().map(|d| d.join("keys.toml"));
        let keymap = Keymap::load(keys.as_deref())?;
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let theme = Theme::resolve(theme, dir.as_deref(), no_color)?;
        Ok(Setup {
            keymap,
            theme,
            look: Look {
                ascii: ascii || !locale_is_utf8(),
                show_gpu,
                mouse,
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

/// The dashboard over a recorded run, read-only, until the user leaves it.
/// `warning` stays on the alert line (a run still going, say). Returns the
/// exit code: 0 when the user left.
pub fn show_recorded(
    view: ViewState,
    run_dir: PathBuf,
    setup: Setup,
    warning: Option<String>,
) -> std::io::Result<(i32, Option<Vec<String>>)> {
    let mouse = setup.look.mouse;
    let mut app = App::new(
        view,
        Mode::ReadOnly,
        run_dir,
        setup.keymap,
        setup.theme,
        setup.look,
    );
    if let Some(w) = warning {
        app.notice(Level::Warn, w);
    }
    let (tx, rx) = sync_channel::<Input>(256);
    // The key reader's sender is the one input: disk work answers on it
    // while it lives.
    let tx = Arc::new(tx);
    let disk = Arc::downgrade(&tx);
    let stop = Arc::new(AtomicBool::new(false));
    let guard = terminal::Guard::enter(mouse)?;
    terminal::spawn_input_reader(tx, stop.clone());
    let end = terminal::frame_loop(&mut app, &rx, disk, false);
    stop.store(true, Ordering::SeqCst);
    drop(guard);
    let code = match end {
        LoopEnd::Exit | LoopEnd::Closed => 0,
        LoopEnd::Detached | LoopEnd::Restored => 1,
    };
    Ok((code, app.then_retry.take()))
}

/// A live dashboard running on its own thread beside the engine.
pub struct Dashboard {
    thread: std::thread::JoinHandle<()>,
    /// Shared with the key reader; disk work answers on it while it lives.
    input: Arc<SyncSender<Input>>,
    done: Option<oneshot::Sender<()>>,
    stop_keys: Arc<AtomicBool>,
    /// Set when the view went away (hangup, panic) and the sweep runs on without it.
    pub detached: Arc<AtomicBool>,
    /// A retry the user asked for after the end (`--retry` targets).
    retry: Arc<std::sync::Mutex<Option<Vec<String>>>>,
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
        let guard = terminal::Guard::enter(setup.look.mouse)?;
        let (tx, rx) = sync_channel::<Input>(INPUT_QUEUE);
        let (done_tx, done_rx) = oneshot::channel();
        tokio::spawn(forward_events(bus.events.subscribe(), tx.clone(), done_rx));
        tokio::spawn(forward_logs(bus.logs.subscribe(), tx.clone()));
        tokio::spawn(watch_hangup(tx.clone()));
        let stop_keys = Arc::new(AtomicBool::new(false));
        let input = Arc::new(tx);
        let disk = Arc::downgrade(&input);
        terminal::spawn_input_reader(input.clone(), stop_keys.clone());
        let detached = Arc::new(AtomicBool::new(false));
        let detached_flag = detached.clone();
        let retry = Arc::new(std::sync::Mutex::new(None));
        let retry_asked = retry.clone();
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
                    terminal::frame_loop(&mut app, &rx, disk, true)
                }));
                drop(guard);
                if let Ok(mut r) = retry_asked.lock() {
                    *r = app.then_retry.take();
                }
                match end {
                    Ok(LoopEnd::Exit) | Ok(LoopEnd::Closed) => {}
                    Ok(LoopEnd::Detached) => {
                        detached_flag.store(true, Ordering::SeqCst);
                        // After the end was shown there is nothing left to follow.
                        if !app.engine_done {
                            terminal::carry_on_headless(&rx, &run_dir);
                        }
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
            input,
            done: Some(done_tx),
            stop_keys,
            detached,
            retry,
        })
    }

    /// The engine has returned: let the view show the end and wait for the user
    /// (after a finished sweep) or close (after a quit).
    pub fn engine_done(&mut self) {
        if let Some(d) = self.done.take() {
            let _ = d.send(());
        }
    }

    /// Wait for the dashboard to close; the terminal is restored when this
    /// returns. A retry the user asked for after the end: its `--retry` targets.
    pub fn join(mut self) -> Option<Vec<String>> {
        self.engine_done();
        let _ = self.thread.join();
        self.stop_keys.store(true, Ordering::SeqCst);
        terminal::restore();
        self.retry.lock().ok().and_then(|mut r| r.take())
    }

    /// A way to close the dashboard from elsewhere (a signal handler).
    pub fn closer(&self) -> Closer {
        Closer(SyncSender::clone(&self.input))
    }

    /// Whether the dashboard thread has ended (the user left it).
    pub fn is_finished(&self) -> bool {
        self.thread.is_finished()
    }
}

/// Closes a dashboard whose sweep has ended (SIGINT, SIGTERM); before the
/// end, once the engine has returned (the sweep's stop, or its end).
#[derive(Clone)]
pub struct Closer(SyncSender<Input>);

impl Closer {
    pub fn close(&self) {
        let _ = self.0.try_send(Input::Close);
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
/// is behind — the log file has them all. They reach the view in batches, a
/// few a second (it shows them at its tick anyway), so a chatty server does
/// not wake the view for each line; a failure or readiness line goes at once.
async fn forward_logs(mut logs: broadcast::Receiver<Event>, tx: SyncSender<Input>) {
    let mut missed = 0u64;
    let mut batch: Vec<Event> = Vec::new();
    let mut due: Option<tokio::time::Instant> = None;
    loop {
        let got = tokio::select! {
            r = logs.recv() => Some(r),
            _ = tokio::time::sleep_until(due.unwrap_or_else(tokio::time::Instant::now)), if due.is_some() => None,
        };
        let send_now = match got {
            Some(Ok(ev)) => {
                let urgent = !matches!(
                    ev,
                    Event::Log {
                        mark: LogMark::Plain,
                        ..
                    }
                );
                batch.push(ev);
                due.get_or_insert_with(|| tokio::time::Instant::now() + LOG_BATCH_WAIT);
                urgent || batch.len() >= LOG_BATCH_MAX
            }
            Some(Err(broadcast::error::RecvError::Lagged(n))) => {
                missed += n;
                false
            }
            Some(Err(broadcast::error::RecvError::Closed)) => {
                if !batch.is_empty() {
                    let _ = tx.try_send(Input::Logs(batch));
                }
                return;
            }
            None => true,
        };
        if !send_now {
            continue;
        }
        due = None;
        if missed > 0 && tx.try_send(Input::LogsMissed(missed)).is_ok() {
            missed = 0;
        }
        let n = batch.len() as u64;
        match tx.try_send(Input::Logs(std::mem::take(&mut batch))) {
            Ok(()) => {}
            Err(std::sync::mpsc::TrySendError::Full(_)) => missed += n,
            Err(std::sync::mpsc::TrySendError::Disconnected(_)) => return,
        }
    }
}

/// How long a plain log line may wait to be handed to the view with others.
const LOG_BATCH_WAIT: Duration = Duration::from_millis(250);
/// The most lines handed over at once.
const LOG_BATCH_MAX: usize = 256;

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
