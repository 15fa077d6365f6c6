//! The attach protocol: a Unix socket in the run directory through which other
//! terminals watch and steer a running sweep.
//!
//! Protocol version 1, newline-delimited JSON. On connect the sweep sends
//! `{"type":"hello","version":1,"run_dir":…,"plan":…}`, then every recorded event
//! so far (`{"type":"event","event":{…}}`), then `{"type":"live"}`, then live events
//! as they happen. A client sends commands, the same ones the keys produce:
//! `{"type":"command","command":{"command":"pause"}}` (`resume`, `toggle_pause`,
//! `skip_config`, `skip_cell`, `retry` + `target`, `exclude` + `config`, `quit`),
//! optionally with `"from"`: who sent it (`viewer PID` for an attached
//! dashboard, `script` for `attach --send`), recorded as the command's source.
//! Whenever the number of attached clients changes, every viewer gets a
//! `viewers` event with the count.
//! A client that falls behind is never waited for: its queue is bounded, and when it
//! overflows the client gets `{"type":"resync"}` followed by a fresh snapshot once it
//! reads again. Only the owner of the sweep may connect (peer uid checked).

use std::collections::VecDeque;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, mpsc, oneshot};

use crate::engine::{Bus, Request};
use crate::model::{text, Command, Event};

pub const VERSION: u32 = 1;
pub const SOCKET: &str = "control.sock";
/// Lines a client may have queued before it is resynchronised instead.
const CLIENT_QUEUE: usize = 2048;
/// Log lines kept for a newly attached viewer.
const LOG_HISTORY: usize = 200;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMsg {
    Hello {
        version: u32,
        run_dir: String,
        plan: String,
    },
    Event {
        event: Event,
    },
    /// The snapshot is complete; live events follow.
    Live,
    /// The client fell behind: a fresh snapshot follows.
    Resync,
    Refused {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMsg {
    Command {
        command: Command,
        /// Who sent it, recorded as the source (default `attach`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<String>,
    },
}

/// The source recorded for a client's command: its `from` when it is a
/// short printable name, else `attach`.
fn source_of(from: Option<String>) -> String {
    match from {
        Some(f)
            if !f.is_empty()
                && f.len() <= 64
                && f.chars().all(|c| c.is_ascii_graphic() || c == ' ') =>
        {
            f
        }
        _ => "attach".into(),
    }
}

/// Whether a connecting peer may steer the sweep: only its owner.
pub fn peer_allowed(peer_uid: u32, own_uid: u32) -> bool {
    peer_uid == own_uid
}

fn own_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// What a new viewer needs: recorded events, the latest GPU sample, recent log lines.
struct History {
    events: Vec<Arc<str>>,
    gpu: Option<Arc<str>>,
    logs: VecDeque<Arc<str>>,
}

impl History {
    fn snapshot(&self) -> Vec<Arc<str>> {
        let mut v = self.events.clone();
        v.extend(self.gpu.iter().cloned());
        v.extend(self.logs.iter().cloned());
        v
    }
}

struct Client {
    tx: mpsc::Sender<Arc<str>>,
    /// Set by the hub when the client's queue overflowed; cleared by a resync.
    behind: Arc<AtomicBool>,
}

enum HubMsg {
    Join(Client, oneshot::Sender<Vec<Arc<str>>>),
    /// A client that fell behind asks for a fresh snapshot (identified by its flag).
    Resync(Arc<AtomicBool>, oneshot::Sender<Vec<Arc<str>>>),
}

/// A running control socket; dropping it removes the socket file.
pub struct ControlServer {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

fn line(msg: &ServerMsg) -> Arc<str> {
    let mut s = text::to_json_string(msg).unwrap_or_default();
    s.push('\n');
    s.into()
}

/// Bind `RUN_DIR/control.sock`. A socket left by a dead run (nothing listening) is
/// replaced; one that answers means another sweep is running in this directory.
pub async fn bind(run_dir: &Path) -> io::Result<UnixListener> {
    // The socket is the owner's alone (and peers are checked); the run
    // directory's permissions are the store's business, not changed here.
    let path = run_dir.join(SOCKET);
    if path.exists() {
        if is_live(run_dir) {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "another sweep is running in {} (its control socket answers)",
                    run_dir.display()
                ),
            ));
        }
        std::fs::remove_file(&path)?;
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

/// Serve the socket: replay history to each viewer, then live events; forward
/// their commands to the engine. `recorded` are events from `events.jsonl` written
/// before this process started (a resumed sweep).
pub fn serve(
    listener: UnixListener,
    run_dir: &Path,
    plan: &str,
    bus: &Bus,
    commands: mpsc::Sender<Request>,
    recorded: Vec<Event>,
) -> ControlServer {
    let path = run_dir.join(SOCKET);
    let hello = line(&ServerMsg::Hello {
        version: VERSION,
        run_dir: run_dir.display().to_string(),
        plan: plan.to_string(),
    });
    let dir = run_dir.to_path_buf();
    let mut events_rx = bus.events.subscribe();
    let events_tx = bus.events.clone();
    let mut logs_rx = bus.logs.subscribe();
    let (hub_tx, mut hub_rx) = mpsc::channel::<HubMsg>(64);
    let task = tokio::spawn(async move {
        let mut history = History {
            events: recorded
                .into_iter()
                .map(|event| line(&ServerMsg::Event { event }))
                .collect(),
            gpu: None,
            logs: VecDeque::new(),
        };
        let mut clients: Vec<Client> = Vec::new();
        let mut told: usize = 0;
        let mut logs_open = true;
        let acceptor = tokio::spawn(accept_loop(listener, hello, hub_tx, commands));
        loop {
            tokio::select! {
                ev = events_rx.recv() => match ev {
                    Ok(ev) => {
                        let l = line(&ServerMsg::Event { event: ev.clone() });
                        match &ev {
                            Event::Gpu { .. } => history.gpu = Some(l.clone()),
                            e if e.persisted() => history.events.push(l.clone()),
                            _ => {}
                        }
                        send_all(&clients, &l);
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        // The hub itself fell behind: rebuild the history from the
                        // recorded events (the engine writes them before it
                        // publishes), and every viewer resyncs from it.
                        history.events = crate::store::read_events(&dir)
                            .into_iter()
                            .map(|event| line(&ServerMsg::Event { event }))
                            .collect();
                        for c in &clients {
                            c.behind.store(true, Ordering::Relaxed);
                            // Wake a viewer idle on an empty queue.
                            let _ = c.tx.try_send(Arc::from(""));
                        }
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                log = logs_rx.recv(), if logs_open => match log {
                    Ok(ev) => {
                        let l = line(&ServerMsg::Event { event: ev });
                        if history.logs.len() >= LOG_HISTORY {
                            history.logs.pop_front();
                        }
                        history.logs.push_back(l.clone());
                        send_all(&clients, &l);
                    }
                    // Lines missed: the log file has them.
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    // The engine is done and its log stream with it; the
                    // events (the end, viewers coming and going) go on. A
                    // closed stream answers at once: asked again, it would
                    // spin a core until the process ends.
                    Err(broadcast::error::RecvError::Closed) => logs_open = false,
                },
                msg = hub_rx.recv() => match msg {
                    Some(HubMsg::Join(client, reply)) => {
                        let _ = reply.send(history.snapshot());
                        clients.push(client);
                    }
                    Some(HubMsg::Resync(flag, reply)) => {
                        // Snapshot and flag change happen together here, so the
                        // client's queue holds exactly what follows the snapshot.
                        let _ = reply.send(history.snapshot());
                        flag.store(false, Ordering::Relaxed);
                    }
                    None => break,
                },
            }
            clients.retain(|c| !c.tx.is_closed());
            // Everyone (the sweep's own dashboard too) hears the new count;
            // it comes back through `events_rx` to the clients.
            if clients.len() != told {
                told = clients.len();
                let _ = events_tx.send(Event::Viewers {
                    count: u32::try_from(told).unwrap_or(u32::MAX),
                });
            }
        }
        acceptor.abort();
    });
    ControlServer { path, task }
}

fn send_all(clients: &[Client], l: &Arc<str>) {
    for c in clients {
        if c.behind.load(Ordering::Relaxed) {
            continue;
        }
        if let Err(mpsc::error::TrySendError::Full(_)) = c.tx.try_send(l.clone()) {
            // Never wait for a slow viewer: stop queueing, resync it when it reads.
            c.behind.store(true, Ordering::Relaxed);
        }
    }
}

async fn accept_loop(
    listener: UnixListener,
    hello: Arc<str>,
    hub: mpsc::Sender<HubMsg>,
    commands: mpsc::Sender<Request>,
) {
    let me = own_uid();
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of descriptors or similar: never spin on it.
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let uid = stream.peer_cred().map(|c| c.uid()).unwrap_or(u32::MAX);
        if !peer_allowed(uid, me) {
            let refusal = line(&ServerMsg::Refused {
                reason: format!("uid {uid} may not attach to a sweep owned by uid {me}"),
            });
            let (_, mut w) = stream.into_split();
            let _ = w.write_all(refusal.as_bytes()).await;
            continue;
        }
        tokio::spawn(session(
            stream,
            hello.clone(),
            hub.clone(),
            commands.clone(),
        ));
    }
}

async fn session(
    stream: UnixStream,
    hello: Arc<str>,
    hub: mpsc::Sender<HubMsg>,
    commands: mpsc::Sender<Request>,
) {
    let (read, mut write) = stream.into_split();
    let (tx, mut rx) = mpsc::channel::<Arc<str>>(CLIENT_QUEUE);
    let behind = Arc::new(AtomicBool::new(false));
    let (reply_tx, reply_rx) = oneshot::channel();
    let client = Client {
        tx,
        behind: behind.clone(),
    };
    if hub.send(HubMsg::Join(client, reply_tx)).await.is_err() {
        return;
    }
    let Ok(snapshot) = reply_rx.await else {
        return;
    };
    // The reader lives until the client closes its end, even if writing to it
    // fails first: a one-shot `--send` client may close before reading anything.
    tokio::spawn(read_commands(read, commands));
    let live = line(&ServerMsg::Live);
    let resync = line(&ServerMsg::Resync);
    let result: io::Result<()> = async {
        write.write_all(hello.as_bytes()).await?;
        write_all(&mut write, &snapshot).await?;
        write.write_all(live.as_bytes()).await?;
        loop {
            if behind.load(Ordering::Relaxed) {
                // The backlog is stale: drop it and start over from a snapshot.
                while rx.try_recv().is_ok() {}
                let (reply_tx, reply_rx) = oneshot::channel();
                if hub
                    .send(HubMsg::Resync(behind.clone(), reply_tx))
                    .await
                    .is_err()
                {
                    break;
                }
                let Ok(snapshot) = reply_rx.await else { break };
                write.write_all(resync.as_bytes()).await?;
                write_all(&mut write, &snapshot).await?;
                write.write_all(live.as_bytes()).await?;
                continue;
            }
            match rx.recv().await {
                // An empty line only wakes us to look at `behind`.
                Some(l) if l.is_empty() => {}
                Some(l) => write.write_all(l.as_bytes()).await?,
                None => break,
            }
        }
        Ok(())
    }
    .await;
    let _ = result;
}

async fn write_all(w: &mut tokio::net::unix::OwnedWriteHalf, lines: &[Arc<str>]) -> io::Result<()> {
    // One buffer per batch: a snapshot can be thousands of lines.
    let mut buf = Vec::with_capacity(lines.iter().map(|l| l.len()).sum());
    for l in lines {
        buf.extend_from_slice(l.as_bytes());
    }
    w.write_all(&buf).await
}

/// Longest command line a client may send; more ends its connection.
const MAX_COMMAND: u64 = 64 << 10;

async fn read_commands(read: tokio::net::unix::OwnedReadHalf, commands: mpsc::Sender<Request>) {
    use tokio::io::AsyncReadExt;
    let mut reader = BufReader::new(read);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match (&mut reader)
            .take(MAX_COMMAND)
            .read_until(b'\n', &mut buf)
            .await
        {
            Ok(0) | Err(_) => break,
            Ok(_) if buf.last() != Some(&b'\n') && buf.len() as u64 >= MAX_COMMAND => break,
            Ok(_) => {}
        }
        if let Ok(ClientMsg::Command { command, from }) = serde_json::from_slice::<ClientMsg>(&buf)
        {
            let req = Request {
                command,
                source: source_of(from),
            };
            if commands.send(req).await.is_err() {
                break;
            }
        }
    }
}

/// A connection to a running sweep, for `attach` and `ls`.
pub struct Connection {
    pub messages: mpsc::Receiver<ServerMsg>,
    commands: tokio::net::unix::OwnedWriteHalf,
}

impl Connection {
    pub async fn connect(run_dir: &Path) -> io::Result<Connection> {
        let stream = UnixStream::connect(run_dir.join(SOCKET)).await?;
        let (read, write) = stream.into_split();
        let (tx, rx) = mpsc::channel(4096);
        tokio::spawn(async move {
            let mut lines = BufReader::new(read).lines();
            while let Ok(Some(l)) = lines.next_line().await {
                match serde_json::from_str::<ServerMsg>(&l) {
                    Ok(m) => {
                        if tx.send(m).await.is_err() {
                            break;
                        }
                    }
                    // A newer sweep may send kinds of events this viewer does not know.
                    Err(_) => continue,
                }
            }
        });
        Ok(Connection {
            messages: rx,
            commands: write,
        })
    }

    /// The two halves, to read and send from different places.
    pub fn split(self) -> (mpsc::Receiver<ServerMsg>, CommandWriter) {
        (self.messages, CommandWriter(self.commands))
    }

    /// Send a command, saying who sends it (`None`: recorded as `attach`).
    pub async fn send(&mut self, command: Command, from: Option<&str>) -> io::Result<()> {
        send_command(&mut self.commands, command, from).await
    }
}

/// The sending half of a [`Connection`].
pub struct CommandWriter(tokio::net::unix::OwnedWriteHalf);

impl CommandWriter {
    pub async fn send(&mut self, command: Command, from: Option<&str>) -> io::Result<()> {
        send_command(&mut self.0, command, from).await
    }
}

async fn send_command(
    w: &mut tokio::net::unix::OwnedWriteHalf,
    command: Command,
    from: Option<&str>,
) -> io::Result<()> {
    let msg = ClientMsg::Command {
        command,
        from: from.map(str::to_string),
    };
    let mut s = serde_json::to_string(&msg).map_err(io::Error::other)?;
    s.push('\n');
    w.write_all(s.as_bytes()).await
}

/// Whether a sweep answers on this run directory's socket. A socket answers
/// while any process holds the listener open, so the one that listens must be
/// alive too: a sweep killed with SIGKILL while a child of it had not yet
/// exec'd (and closed its inherited descriptors) is not running.
pub fn is_live(run_dir: &Path) -> bool {
    let Ok(stream) = std::os::unix::net::UnixStream::connect(run_dir.join(SOCKET)) else {
        return false;
    };
    listener_pid(&stream).is_none_or(process_running)
}

/// The process that listens on the other end (`SO_PEERCRED`).
fn listener_pid(stream: &std::os::unix::net::UnixStream) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the size given, and
    // the descriptor is an open socket for the call's whole duration.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::addr_of_mut!(cred).cast(),
            &mut len,
        )
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid)
}

/// Alive and not a zombie.
fn process_running(pid: i32) -> bool {
    procfs::process::Process::new(pid)
        .and_then(|p| p.stat())
        .is_ok_and(|s| s.state != 'Z')
}

pub mod file;
#[cfg(test)]
mod fuzz;
pub mod shards;
#[cfg(test)]
mod tests;
