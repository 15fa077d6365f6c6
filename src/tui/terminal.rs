//! The terminal side: raw mode and the alternate screen (always restored: on exit,
//! on panic, on SIGTERM), input threads, and the frame loop that keeps an SSH link
//! quiet — it drains everything pending in one batch, draws only when something
//! changed, at most ~10 frames a second (data-only changes wait for a slower
//! beat), and sends each frame as one synchronized update in one write.

use std::cell::RefCell;
use std::io::{self, Write};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Once, Weak};
use std::time::{Duration, Instant};

use crossterm::event::{KeyEvent, KeyEventKind, MouseEvent};
use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use crossterm::{cursor, event, execute, queue, terminal};
use ratatui::Terminal;

use super::app::{Action, App, Redraw};
use super::disk::{Done, Worker};
use super::draw;
use super::thrifty::{tidy_frame, FrameBuffer, Thrifty};
use crate::model::{Event, Timestamp};

/// The shortest time between two frames (user actions, new results).
pub const FRAME_MIN: Duration = Duration::from_millis(100);
/// How long data-only changes (log lines, GPU samples, the clock) may wait.
pub const FRAME_DATA: Duration = Duration::from_millis(1000);
/// The clock's beat.
const TICK: Duration = Duration::from_secs(1);
/// How long a closing view waits for disk work still under way (an export
/// being written) before it goes anyway.
const DISK_WAIT: Duration = Duration::from_secs(5);

/// What reaches the dashboard thread.
#[derive(Debug)]
pub enum Input {
    Event(Event),
    /// Server log lines, in order.
    Logs(Vec<Event>),
    EventsMissed,
    LogsMissed(u64),
    Key(KeyEvent),
    /// Only with `--mouse`.
    Mouse(MouseEvent),
    Resize(u16, u16),
    /// The terminal went away (SIGHUP, or reading it failed).
    Hangup,
    EngineDone,
    /// SIGINT or SIGTERM: once the sweep has ended there is nothing to wait for.
    Close,
    /// Disk work the view asked for has been done.
    Disk(Done),
}

/// Whether the terminal is in raw mode on the alternate screen (so a panic
/// anywhere knows to restore it).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Set once the terminal is gone: nothing more is written to it.
static HUNG_UP: AtomicBool = AtomicBool::new(false);

/// Whether the terminal is still ours (a panic elsewhere may have restored it).
pub fn active() -> bool {
    ACTIVE.load(Ordering::SeqCst)
}

pub fn hung_up() -> bool {
    HUNG_UP.load(Ordering::SeqCst)
}

pub fn note_hangup() {
    HUNG_UP.store(true, Ordering::SeqCst);
}

/// Mouse reporting was turned on (`--mouse`) and must be turned off.
static MOUSE: AtomicBool = AtomicBool::new(false);

/// Leave raw mode and the alternate screen. Safe to call any number of times,
/// from any thread; errors are ignored (the terminal may be gone).
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = terminal::disable_raw_mode();
        if !hung_up() {
            let mut out = io::stdout();
            if MOUSE.swap(false, Ordering::SeqCst) {
                let _ = execute!(out, event::DisableMouseCapture);
            }
            let _ = execute!(
                out,
                EndSynchronizedUpdate,
                terminal::LeaveAlternateScreen,
                cursor::Show
            );
        }
    }
}

/// Restore the terminal before any panic message is printed.
pub fn install_panic_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// Raw mode and the alternate screen for as long as it lives.
pub struct Guard(());

impl Guard {
    /// `mouse`: report clicks and the wheel (off by default, so the
    /// terminal's own text selection keeps working).
    pub fn enter(mouse: bool) -> io::Result<Guard> {
        install_panic_hook();
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let mut out = io::stdout();
        if let Err(e) = execute!(out, terminal::EnterAlternateScreen, cursor::Hide) {
            restore();
            return Err(e);
        }
        if mouse {
            MOUSE.store(true, Ordering::SeqCst);
            if let Err(e) = execute!(out, event::EnableMouseCapture) {
                restore();
                return Err(e);
            }
        }
        Ok(Guard(()))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        restore();
    }
}

/// The drawing surface: ratatui over a frame buffer, written to stdout.
pub struct Screen {
    terminal: Terminal<Thrifty<FrameBuffer>>,
    bytes: Rc<RefCell<Vec<u8>>>,
}

impl Screen {
    pub fn new() -> io::Result<Screen> {
        let bytes = Rc::new(RefCell::new(Vec::with_capacity(64 * 1024)));
        let terminal = Terminal::new(Thrifty::new(FrameBuffer(bytes.clone())))?;
        Ok(Screen { terminal, bytes })
    }

    /// Draw one frame as a synchronized update, sent in one write.
    pub fn frame(&mut self, app: &App) -> io::Result<()> {
        if hung_up() {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "terminal gone"));
        }
        queue!(self.terminal.backend_mut(), BeginSynchronizedUpdate)?;
        self.terminal.draw(|f| draw::draw(f, app))?;
        queue!(self.terminal.backend_mut(), EndSynchronizedUpdate)?;
        // Written from the shared buffer, then cleared: its capacity is kept
        // for the next frame. A frame that changed nothing is not sent.
        let mut bytes = self.bytes.borrow_mut();
        let written = if tidy_frame(&mut bytes) {
            let mut out = io::stdout().lock();
            out.write_all(&bytes).and_then(|()| out.flush())
        } else {
            Ok(())
        };
        bytes.clear();
        written
    }
}

/// Reads keys and resizes until `stop` is set or the terminal goes away.
///
/// The waiting is ours, not crossterm's: on a terminal whose far end closed
/// (an SSH link that dropped) the tty reads as ever-ready end-of-file, and
/// crossterm's reader would spin on it for the rest of the sweep. So the
/// terminal is polled here first, a hang-up ends the reader, and crossterm is
/// only asked for what is already there (keys, or a resize it has queued).
pub fn spawn_input_reader(tx: Arc<SyncSender<Input>>, stop: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new()
        .name("sweeptop-tui-keys".into())
        .spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                if wait_for_input(Duration::from_millis(200)) == Tty::Gone {
                    let _ = tx.try_send(Input::Hangup);
                    return;
                }
                loop {
                    match event::poll(Duration::ZERO) {
                        Ok(false) => break,
                        Ok(true) => {}
                        Err(_) => {
                            let _ = tx.try_send(Input::Hangup);
                            return;
                        }
                    }
                    let input = match event::read() {
                        Ok(event::Event::Key(k)) if k.kind != KeyEventKind::Release => {
                            Input::Key(k)
                        }
                        Ok(event::Event::Resize(w, h)) => Input::Resize(w, h),
                        Ok(event::Event::Mouse(m)) => Input::Mouse(m),
                        Ok(_) => continue,
                        Err(_) => Input::Hangup,
                    };
                    let hangup = matches!(input, Input::Hangup);
                    if tx.send(input).is_err() || hangup {
                        return;
                    }
                }
            }
        });
}

#[derive(Debug, PartialEq, Eq)]
enum Tty {
    /// Bytes to read, or nothing yet.
    Open,
    /// Its far end was closed.
    Gone,
}

/// Wait up to `limit` for the terminal to have input, or to be hung up.
fn wait_for_input(limit: Duration) -> Tty {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::io::IsTerminal;
    use std::os::fd::AsFd;
    let (stdin, stdout) = (io::stdin(), io::stdout());
    let fd = if stdin.is_terminal() {
        stdin.as_fd()
    } else {
        stdout.as_fd()
    };
    let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
    let ms = u16::try_from(limit.as_millis()).unwrap_or(u16::MAX);
    let gone = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
    match poll(&mut fds, PollTimeout::from(ms)) {
        Ok(_) if fds[0].revents().is_some_and(|r| r.intersects(gone)) => Tty::Gone,
        Ok(_) => Tty::Open,
        // Interrupted by a signal (a resize): look again next time round.
        Err(_) => Tty::Open,
    }
}

/// How the frame loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopEnd {
    /// The user left (or the sweep ended after a quit).
    Exit,
    /// The terminal went away; the sweep goes on without a view.
    Detached,
    /// Every sender is gone.
    Closed,
    /// A panic on another thread gave the terminal back.
    Restored,
}

/// Turn one input into an update.
fn handle(app: &mut App, input: Input) -> Result<Redraw, LoopEnd> {
    Ok(match input {
        Input::Event(ev) => app.update(Action::Event(ev)),
        Input::Logs(lines) => lines
            .into_iter()
            .fold(Redraw::No, |r, ev| r.max(app.update(Action::Event(ev)))),
        Input::EventsMissed => app.update(Action::EventsMissed),
        Input::LogsMissed(n) => app.update(Action::LogsMissed(n)),
        Input::Key(k) => match app.on_key(&k) {
            Some(a) => app.update(a),
            None => Redraw::No,
        },
        Input::Resize(w, h) => app.update(Action::Resize(w, h)),
        Input::Mouse(m) => match app.on_mouse(&m) {
            Some(a) => app.update(a),
            None => Redraw::No,
        },
        Input::Hangup => return Err(LoopEnd::Detached),
        // Before the end the signal stops the sweep, and the view closes
        // when it has shown how it ended.
        Input::Close => app.update(Action::Close),
        Input::EngineDone => app.update(Action::EngineDone),
        Input::Disk(done) => app.update(Action::Disk(done)),
    })
}

/// Draw and react until the app exits, the terminal goes, or the inputs close.
/// `live_clock`: tick with the wall clock (a recorded run keeps its own time).
///
/// Disk work the app asks for is done on a thread of its own, and what it
/// finds comes back through `disk` as input. That is a weak hold on the
/// channel, kept alive by the inputs' own senders: the loop still sees when
/// every one of them is gone.
pub fn frame_loop(
    app: &mut App,
    rx: &Receiver<Input>,
    disk: Weak<SyncSender<Input>>,
    live_clock: bool,
) -> LoopEnd {
    let worker = Worker::start(move |done| {
        disk.upgrade()
            .is_some_and(|tx| tx.send(Input::Disk(done)).is_ok())
    });
    let end = frames(app, rx, &worker, live_clock);
    worker.finish(DISK_WAIT);
    end
}

fn frames(app: &mut App, rx: &Receiver<Input>, worker: &Worker, live_clock: bool) -> LoopEnd {
    let mut screen = match Screen::new() {
        Ok(s) => s,
        Err(_) => return LoopEnd::Detached,
    };
    if let Ok((w, h)) = terminal::size() {
        app.update(Action::Resize(w, h));
    }
    if live_clock {
        app.update(Action::Tick(Timestamp::now()));
    }
    let mut pending = Redraw::Now;
    let mut last_frame: Option<Instant> = None;
    let mut next_tick = Instant::now() + TICK;
    loop {
        for job in app.take_jobs() {
            if let Some(done) = worker.ask(job) {
                pending = pending.max(app.update(Action::Disk(done)));
            }
        }
        if app.exit {
            return LoopEnd::Exit;
        }
        if hung_up() {
            return LoopEnd::Detached;
        }
        if !active() {
            return LoopEnd::Restored;
        }
        let now = Instant::now();
        let frame_at = match pending {
            Redraw::No => None,
            Redraw::Now => Some(last_frame.map_or(now, |t| t + FRAME_MIN)),
            Redraw::Soon => Some(last_frame.map_or(now, |t| t + FRAME_DATA)),
        };
        if frame_at.is_some_and(|at| at <= now) {
            if screen.frame(app).is_err() {
                note_hangup();
                return LoopEnd::Detached;
            }
            last_frame = Some(now);
            pending = Redraw::No;
            continue;
        }
        let wake = frame_at.map_or(next_tick, |f| f.min(next_tick));
        match rx.recv_timeout(wake.saturating_duration_since(now)) {
            Ok(input) => {
                match handle(app, input) {
                    Ok(r) => pending = pending.max(r),
                    Err(end) => return end,
                }
                // Everything else that is waiting goes into the same frame.
                while let Ok(input) = rx.try_recv() {
                    match handle(app, input) {
                        Ok(r) => pending = pending.max(r),
                        Err(end) => return end,
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return LoopEnd::Closed,
        }
        if Instant::now() >= next_tick {
            next_tick = Instant::now() + TICK;
            let now = if live_clock {
                Timestamp::now()
            } else {
                app.now
            };
            pending = pending.max(app.update(Action::Tick(now)));
        }
    }
}

/// After the terminal is gone: keep consuming events so nothing blocks, and
/// write the line progress into the run directory instead.
pub fn carry_on_headless(rx: &Receiver<Input>, run_dir: &Path) {
    let path = run_dir.join(PROGRESS_LOG);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .ok();
    if let Some(f) = file.as_mut() {
        let _ = writeln!(
            f,
            "{} terminal gone; the sweep goes on without a view",
            Timestamp::now()
        );
    }
    while let Ok(input) = rx.recv() {
        match input {
            Input::Event(ev) => {
                if let (Some(f), Some(line)) = (file.as_mut(), crate::view::text::line(&ev)) {
                    let _ = writeln!(f, "{line}");
                }
            }
            Input::EngineDone => return,
            _ => {}
        }
    }
}

/// After a panic in the view (the hook restored the terminal): line progress on stdout.
pub fn carry_on_printing(rx: &Receiver<Input>) {
    while let Ok(input) = rx.recv() {
        match input {
            Input::Event(ev) => {
                if let Some(line) = crate::view::text::line(&ev) {
                    let mut out = io::stdout().lock();
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                }
            }
            Input::EngineDone => return,
            _ => {}
        }
    }
}

/// Where line progress goes once the terminal is gone.
pub const PROGRESS_LOG: &str = "progress.log";

/// Send without blocking the async runtime: back off while the view catches up.
pub async fn push(tx: &SyncSender<Input>, mut input: Input) -> bool {
    loop {
        match tx.try_send(input) {
            Ok(()) => return true,
            Err(TrySendError::Full(i)) => {
                input = i;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(TrySendError::Disconnected(_)) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_anywhere_restores_the_terminal() {
        install_panic_hook();
        // As if the terminal were gone, so the test writes nothing to the real one.
        note_hangup();
        ACTIVE.store(true, Ordering::SeqCst);
        let _ = std::thread::spawn(|| panic!("a bug in the view")).join();
        assert!(!ACTIVE.load(Ordering::SeqCst));
        HUNG_UP.store(false, Ordering::SeqCst);
    }
}
