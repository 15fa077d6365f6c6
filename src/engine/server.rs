//! One running server: spawned in its own process group, its stdout and stderr
//! read continuously (never blocking it) into the log file, the classifier and
//! the event stream, its exit watched, stopped with escalation, and its death
//! told from its log and exit.

use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::{broadcast, watch};

use super::log_file::{Cut, LogSink};
use super::process;
use crate::detect::{self, LineClass, LogPatterns, LogWatch};
use crate::model::{describe_exit, Event, Failure, FailureKind, LogMark};

/// Longest line kept as one line; longer output is split (never buffered whole).
const MAX_LINE: usize = 64 << 10;

/// Lines of the server's log kept as a stall's evidence.
const STALL_EVIDENCE_LINES: usize = 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl ExitInfo {
    pub fn describe(&self) -> String {
        describe_exit(self.code, self.signal)
    }
}

/// What the log readers have seen, shared with the engine.
pub struct LogState {
    pub watch: LogWatch,
    pub ready_line_seen: bool,
    /// Speculative-decoding acceptance lengths seen since the last `take_accept`.
    pub accept: Vec<f64>,
}

pub struct Server {
    pub pgid: u32,
    pub started: Instant,
    pub exit: watch::Receiver<Option<ExitInfo>>,
    pub log: Arc<Mutex<LogState>>,
    /// Bumped on every classified fatal line, so waiters wake promptly.
    pub fatal: watch::Receiver<u64>,
    /// Set once `stop` ran: the group is gone (or was given up on).
    pub stopped: bool,
    readers: Vec<tokio::task::JoinHandle<()>>,
    sink: Arc<LogSink>,
}

pub struct Launch<'a> {
    pub argv: &'a [String],
    pub shell: bool,
    pub env: &'a [(String, String)],
    pub log_path: &'a Path,
    /// sweeptop's own first line in the log: which launch this is.
    pub log_note: &'a str,
    /// The log file's cap in bytes (`limits.log_max_mb`; 0: none).
    pub log_max_bytes: u64,
    pub config: &'a str,
    pub patterns: Arc<LogPatterns>,
    pub ready_line: Option<String>,
    pub logs: broadcast::Sender<Event>,
    /// A descriptor the process inherits (a prepare step's target lock,
    /// held while any process of the step lives).
    pub keep_fd: Option<std::os::fd::RawFd>,
}

impl Server {
    pub fn spawn(l: Launch<'_>) -> std::io::Result<Server> {
        let mut cmd = if l.shell {
            let mut c = tokio::process::Command::new("/bin/sh");
            c.arg("-c").arg(l.argv.join(" "));
            c
        } else {
            let mut c = tokio::process::Command::new(&l.argv[0]);
            c.args(&l.argv[1..]);
            c
        };
        cmd.envs(l.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so the whole tree (TP workers, schedulers)
            // is stopped together and a Ctrl-C in our terminal does not reach it.
            .process_group(0)
            .kill_on_drop(false);
        if let Some(fd) = l.keep_fd {
            // SAFETY: between fork and exec only fcntl(2) runs, which is
            // async-signal-safe; it clears close-on-exec on the child's own
            // copy of the descriptor.
            unsafe {
                cmd.pre_exec(move || {
                    if nix::libc::fcntl(fd, nix::libc::F_SETFD, 0) == -1 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let sink = Arc::new(LogSink::start(l.log_path, l.log_max_bytes, l.log_note)?);
        let mut child = cmd.spawn()?;
        let pgid = child.id().unwrap_or(0);
        let log = Arc::new(Mutex::new(LogState {
            watch: LogWatch::new(l.patterns.clone()),
            ready_line_seen: false,
            accept: Vec::new(),
        }));
        let (fatal_tx, fatal_rx) = watch::channel(0u64);
        let fatal_tx = Arc::new(fatal_tx);
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(tokio::spawn(read_lines(
                out,
                reader_ctx(&l, &log, &sink, &fatal_tx),
            )));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(tokio::spawn(read_lines(
                err,
                reader_ctx(&l, &log, &sink, &fatal_tx),
            )));
        }
        let (exit_tx, exit_rx) = watch::channel(None);
        tokio::spawn(async move {
            let info = match child.wait().await {
                Ok(st) => {
                    use std::os::unix::process::ExitStatusExt;
                    ExitInfo {
                        code: st.code(),
                        signal: st.signal(),
                    }
                }
                Err(_) => ExitInfo {
                    code: None,
                    signal: None,
                },
            };
            let _ = exit_tx.send(Some(info));
        });
        Ok(Server {
            pgid,
            started: Instant::now(),
            exit: exit_rx,
            log,
            fatal: fatal_rx,
            stopped: false,
            readers,
            sink,
        })
    }

    pub fn exited(&self) -> Option<ExitInfo> {
        *self.exit.borrow()
    }

    /// Wait (bounded) until both output pipes reached end of file, so every line
    /// the server printed before dying has been classified.
    pub async fn drain_logs(&mut self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        for r in &mut self.readers {
            // A JoinHandle must not be polled again once it has completed.
            if r.is_finished() {
                continue;
            }
            if tokio::time::timeout_at(deadline, &mut *r).await.is_err() {
                break;
            }
        }
    }

    /// Stop the whole group: SIGINT, grace, SIGTERM, SIGKILL. Returns the last
    /// signal needed ("exited" if it was already gone).
    pub async fn stop(&mut self, grace: Duration) -> String {
        self.stopped = true;
        let mut how = "exited".to_string();
        let steps = [
            (Signal::SIGINT, grace),
            (Signal::SIGTERM, (grace / 2).max(Duration::from_secs(2))),
            (Signal::SIGKILL, Duration::from_secs(10)),
        ];
        for (sig, wait) in steps {
            if !process::group_alive(self.pgid) {
                break;
            }
            process::signal_group(self.pgid, Some(sig));
            how = sig.as_str().to_string();
            if process::wait_group_gone(self.pgid, wait).await {
                break;
            }
        }
        self.drain_logs(Duration::from_secs(2)).await;
        self.settle_log().await;
        how
    }

    /// Wait (bounded: the disk may hang) until the log file holds every
    /// line read so far.
    pub async fn settle_log(&self) {
        self.sink.settle(Duration::from_secs(5)).await;
    }

    /// What the log file cut since the last call (its head filled, old
    /// lines dropped), each said once.
    pub fn take_log_cuts(&self) -> Vec<Cut> {
        self.sink.take_cuts()
    }

    /// Problems writing the log file since the last call.
    pub fn take_log_problems(&self) -> Vec<String> {
        self.sink.take_problems()
    }

    pub fn tail(&self, n: usize) -> Vec<String> {
        self.log.lock().map(|l| l.watch.tail(n)).unwrap_or_default()
    }

    /// Why the server is gone or broken, from its log first, else its exit.
    pub fn death(&self) -> Option<Failure> {
        let exit = self.exited();
        let (logged, tail) = self.logged_failure();
        match (logged, exit) {
            (Some(mut f), Some(info)) => {
                f.message = format!("{} ({})", f.message, info.describe());
                Some(f)
            }
            (Some(f), None) => Some(f),
            (None, Some(info)) => Some(detect::exit_failure(
                info.code,
                info.signal,
                "server exited while the cell ran",
                &info.describe(),
                &tail,
            )),
            (None, None) => None,
        }
    }

    /// Why the server exited before it was ready: the cause in its log, else
    /// what its exit status says (a plain exit is `startup_failed`).
    pub fn startup_failure(&self, info: ExitInfo) -> Failure {
        let (logged, tail) = self.logged_failure();
        let how = info.describe();
        match logged {
            Some(mut f) => {
                f.message = format!("server exited during startup ({how}): {}", f.message);
                f
            }
            None => {
                let mut f = detect::exit_failure(
                    info.code,
                    info.signal,
                    "server exited during startup",
                    &how,
                    &tail,
                );
                if f.kind == FailureKind::ServerExited {
                    f.kind = FailureKind::StartupFailed;
                }
                f
            }
        }
    }

    /// The failure its log shows, and the log's last lines.
    fn logged_failure(&self) -> (Option<Failure>, Vec<String>) {
        self.log
            .lock()
            .map(|l| (l.watch.failure(), l.watch.tail(detect::TAIL_KEEP)))
            .unwrap_or((None, Vec::new()))
    }

    /// A stalled cell's evidence: what the server said last (the message
    /// already says how many requests were in flight and for how long).
    pub fn stall_evidence(&self, failure: Failure) -> Failure {
        let mut evidence = vec![format!(
            "last {STALL_EVIDENCE_LINES} lines of the server log before the stall:"
        )];
        let tail = self.tail(STALL_EVIDENCE_LINES);
        if tail.is_empty() {
            evidence.push("(the server printed nothing)".into());
        }
        evidence.extend(tail);
        failure.with_evidence(evidence)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // The log's thread writes what it holds and ends on its own.
        // Normally stopped already; on an error path never leave a server (and its
        // GPU memory) behind.
        if process::group_alive(self.pgid) {
            process::signal_group(self.pgid, Some(Signal::SIGKILL));
        }
    }
}

struct ReaderCtx {
    config: String,
    log: Arc<Mutex<LogState>>,
    sink: Arc<LogSink>,
    fatal: Arc<watch::Sender<u64>>,
    ready_line: Option<String>,
    logs: broadcast::Sender<Event>,
}

fn reader_ctx(
    l: &Launch<'_>,
    log: &Arc<Mutex<LogState>>,
    sink: &Arc<LogSink>,
    fatal: &Arc<watch::Sender<u64>>,
) -> ReaderCtx {
    ReaderCtx {
        config: l.config.to_string(),
        log: log.clone(),
        sink: sink.clone(),
        fatal: fatal.clone(),
        ready_line: l.ready_line.clone(),
        logs: l.logs.clone(),
    }
}

async fn read_lines<R: AsyncRead + Unpin>(pipe: R, ctx: ReaderCtx) {
    let mut reader = BufReader::with_capacity(64 << 10, pipe);
    let mut line: Vec<u8> = Vec::with_capacity(256);
    loop {
        let (done, used) = {
            let buf = match reader.fill_buf().await {
                Ok(b) => b,
                Err(_) => break,
            };
            if buf.is_empty() {
                break;
            }
            // A line longer than MAX_LINE is split into several, never cut.
            let room = MAX_LINE.saturating_sub(line.len());
            match buf.iter().position(|&b| b == b'\n') {
                Some(i) if i <= room => {
                    line.extend_from_slice(&buf[..i]);
                    (true, i + 1)
                }
                _ => {
                    let take = buf.len().min(room);
                    line.extend_from_slice(&buf[..take]);
                    (line.len() >= MAX_LINE, take)
                }
            }
        };
        reader.consume(used);
        if done {
            handle_line(&ctx, &line);
            line.clear();
        }
    }
    if !line.is_empty() {
        handle_line(&ctx, &line);
    }
}

fn handle_line(ctx: &ReaderCtx, raw: &[u8]) {
    ctx.sink.line(raw);
    let text = String::from_utf8_lossy(raw);
    let text = text.trim_end_matches('\r');
    let mark = {
        let Ok(mut st) = ctx.log.lock() else { return };
        let class = st.watch.push(text);
        let ready_line = ctx.ready_line.as_deref().is_some_and(|r| text.contains(r));
        if ready_line {
            st.ready_line_seen = true;
        }
        match class {
            LineClass::Fatal(_) | LineClass::ServerGone => {
                ctx.fatal.send_modify(|n| *n += 1);
                LogMark::Failure
            }
            LineClass::Ready => LogMark::Ready,
            LineClass::SpecStats { accept_len } => {
                if st.accept.len() < 100_000 {
                    st.accept.push(accept_len);
                }
                LogMark::Plain
            }
            // llama.cpp reports an acceptance rate, not a length: not comparable.
            LineClass::Plain | LineClass::DraftAcceptance { .. } if ready_line => LogMark::Ready,
            LineClass::Plain | LineClass::DraftAcceptance { .. } => LogMark::Plain,
        }
    };
    // Views may miss lines under a flood (the log file has them all).
    if ctx.logs.receiver_count() > 0 {
        let _ = ctx.logs.send(Event::Log {
            config: ctx.config.clone(),
            line: text.to_string(),
            mark,
        });
    }
}
