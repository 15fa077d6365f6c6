use super::*;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use tokio::io::AsyncReadExt;

fn notice(i: usize) -> Event {
    Event::Notice {
        at: crate::model::Timestamp::default(),
        level: crate::model::Level::Info,
        message: format!("event {i} {}", "x".repeat(200)),
    }
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("sweeptop-control-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn next(conn: &mut Connection) -> ServerMsg {
    tokio::time::timeout(Duration::from_secs(10), conn.messages.recv())
        .await
        .expect("a message in time")
        .expect("connection open")
}

#[tokio::test]
async fn socket_is_private_and_replays_history_then_live_events() {
    let dir = tmpdir("replay");
    let bus = Bus::new();
    let (tx, mut rx) = mpsc::channel(8);
    // A directory the user made keeps its permissions.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let listener = bind(&dir).await.unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.join(SOCKET)), 0o600);
    assert_eq!(mode(&dir), 0o755);
    let server = serve(listener, &dir, "demo", &bus, tx, vec![notice(0)]);
    bus.events.send(notice(1)).unwrap();
    // Let the hub take event 1 into its history before we join.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut conn = Connection::connect(&dir).await.unwrap();
    assert!(matches!(
        next(&mut conn).await,
        ServerMsg::Hello { version: 1, .. }
    ));
    assert_eq!(next(&mut conn).await, ServerMsg::Event { event: notice(0) });
    assert_eq!(next(&mut conn).await, ServerMsg::Event { event: notice(1) });
    assert_eq!(next(&mut conn).await, ServerMsg::Live);
    // The viewer count, told to everyone when a viewer comes or goes.
    assert_eq!(
        next(&mut conn).await,
        ServerMsg::Event {
            event: Event::Viewers { count: 1 }
        }
    );
    bus.events.send(notice(2)).unwrap();
    assert_eq!(next(&mut conn).await, ServerMsg::Event { event: notice(2) });
    // Commands reach the engine's channel, marked as coming from a viewer.
    conn.send(Command::Pause, None).await.unwrap();
    let req = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(req.command, Command::Pause);
    assert_eq!(req.source, "attach");
    // A client may say who it is; anything odd is recorded as `attach`.
    for (from, source) in [
        (Some("viewer 42"), "viewer 42"),
        (Some("script"), "script"),
        (Some("bad\nname"), "attach"),
    ] {
        conn.send(Command::Resume, from).await.unwrap();
        let req = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(req.source, source);
    }
    // A second viewer: both hear there are two.
    let mut other = Connection::connect(&dir).await.unwrap();
    loop {
        if let ServerMsg::Event {
            event: Event::Viewers { count },
        } = next(&mut conn).await
        {
            assert_eq!(count, 2);
            break;
        }
    }
    drop(other.messages.recv().await);
    // A second sweep may not take over a live socket; a stale one is replaced.
    assert!(bind(&dir).await.is_err());
    drop(server);
    assert!(!dir.join(SOCKET).exists());
    let stale = std::os::unix::net::UnixListener::bind(dir.join(SOCKET)).unwrap();
    drop(stale);
    assert!(!is_live(&dir));
    assert!(bind(&dir).await.is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn only_the_owner_may_attach() {
    assert!(peer_allowed(1000, 1000));
    assert!(!peer_allowed(1001, 1000));
    assert!(!peer_allowed(0, 1000));
    assert!(
        !peer_allowed(1000, 0),
        "root's sweep refuses other users too"
    );
}

/// The engine is done (its log stream ended) while the hub serves on: it
/// waits for what comes next, it does not spin on the ended stream. Time is
/// paused, so an hour passes at once when every task waits, and never while
/// one spins; the thread is watched so a spinning hub fails the test.
#[test]
fn the_hub_waits_once_the_log_stream_has_ended() {
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            let dir = tmpdir("logs-ended");
            let bus = Bus::new();
            let (tx, _rx) = mpsc::channel(8);
            let listener = bind(&dir).await.unwrap();
            let _server = serve(listener, &dir, "demo", &bus, tx, Vec::new());
            let Bus { events, logs } = bus;
            drop(logs);
            tokio::time::sleep(Duration::from_secs(3600)).await;
            // Still serving: an event sent now is taken.
            events.send(notice(1)).unwrap();
            tokio::time::sleep(Duration::from_secs(1)).await;
        });
        let _ = done_tx.send(());
    });
    assert!(
        done_rx.recv_timeout(Duration::from_secs(120)).is_ok(),
        "the hub spins on the ended log stream"
    );
}

#[tokio::test]
async fn a_viewer_that_stops_reading_never_blocks_and_is_resynchronised() {
    let dir = tmpdir("slow");
    let bus = Bus::new();
    let (tx, _rx) = mpsc::channel(8);
    let listener = bind(&dir).await.unwrap();
    let _server = serve(listener, &dir, "demo", &bus, tx, Vec::new());
    // A raw client that does not read at all.
    let mut stream = UnixStream::connect(dir.join(SOCKET)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    // Far more than the socket buffer and the client queue: sending never waits.
    let n = CLIENT_QUEUE * 4;
    let t = std::time::Instant::now();
    for i in 0..n {
        bus.events.send(notice(i)).unwrap();
        if i % 256 == 0 {
            tokio::task::yield_now().await;
        }
    }
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "publishing waited on a slow viewer"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Now read everything: somewhere a resync arrives, followed by a snapshot that
    // ends with the latest event, then the live marker.
    let mut buf = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = String::from_utf8_lossy(&buf);
        if let Some(i) = text.find("{\"type\":\"resync\"}") {
            let after = &text[i..];
            if after.contains(&format!("event {} ", n - 1)) && after.contains("{\"type\":\"live\"}")
            {
                break;
            }
        }
        assert!(std::time::Instant::now() < deadline, "no resync seen");
        let got = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut chunk))
            .await
            .unwrap()
            .unwrap();
        assert!(got > 0, "connection closed");
        buf.extend_from_slice(&chunk[..got]);
    }
    // Every line is valid protocol.
    let text = String::from_utf8_lossy(&buf);
    for l in text.lines() {
        serde_json::from_str::<ServerMsg>(l).unwrap_or_else(|e| panic!("bad line {l}: {e}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A sweep killed while a child of it still held its listener (forked, not
/// yet exec'd) is not running: the socket answers, but the process that
/// listens is gone.
#[test]
fn a_socket_held_only_by_a_dead_sweeps_child_is_not_live() {
    let dir = std::env::temp_dir().join(format!("sweeptop-orphan-sock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(SOCKET);
    // Everything the forked processes need is built before fork: after it
    // they make system calls only.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_encoded_bytes();
    assert!(bytes.len() < addr.sun_path.len());
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [from_child, to_parent] = fds;
    // The holder lives until this end closes: when the test ends, however.
    let mut release = [0; 2];
    assert_eq!(unsafe { libc::pipe(release.as_mut_ptr()) }, 0);
    let [wait_for_release, released] = release;
    // SAFETY: the children call only async-signal-safe functions.
    let listener = unsafe { libc::fork() };
    assert!(listener >= 0);
    if listener == 0 {
        unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if fd < 0
                || libc::bind(fd, std::ptr::addr_of!(addr).cast(), len) != 0
                || libc::listen(fd, 8) != 0
            {
                libc::_exit(1);
            }
            // The holder keeps the listener; the one that listened dies.
            let holder = libc::fork();
            if holder == 0 {
                libc::close(released);
                let me = libc::getpid();
                libc::write(to_parent, std::ptr::addr_of!(me).cast(), 4);
                let mut byte = 0u8;
                libc::read(wait_for_release, std::ptr::addr_of_mut!(byte).cast(), 1);
                libc::_exit(0);
            }
            libc::_exit(if holder > 0 { 0 } else { 1 });
        }
    }
    let mut status = 0;
    unsafe { libc::waitpid(listener, &mut status, 0) };
    let mut holder: libc::pid_t = 0;
    assert_eq!(
        unsafe { libc::read(from_child, std::ptr::addr_of_mut!(holder).cast(), 4) },
        4
    );
    unsafe {
        libc::close(to_parent);
        libc::close(from_child);
        libc::close(wait_for_release);
    }
    // The socket answers…
    assert!(std::os::unix::net::UnixStream::connect(&path).is_ok());
    // …but no sweep is running there, and a new one may take the directory.
    assert!(!is_live(&dir));
    // A listener this process holds is live.
    std::fs::remove_file(&path).unwrap();
    let own = std::os::unix::net::UnixListener::bind(&path).unwrap();
    assert!(is_live(&dir));
    drop(own);
    // The holder ends when it reads this end closed.
    assert!(holder > 0);
    unsafe { libc::close(released) };
    let _ = std::fs::remove_dir_all(&dir);
}
