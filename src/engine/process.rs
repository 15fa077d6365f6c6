//! Process groups and ports: the OS-level half of the server lifecycle.

use std::time::Duration;

/// Send a signal to a whole process group. Returns false when the group is gone.
pub fn signal_group(pgid: u32, sig: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: killpg has no memory-safety preconditions.
    unsafe { libc::killpg(pgid as libc::pid_t, sig) == 0 }
}

/// Whether any process of the group is still alive (zombies included).
pub fn group_alive(pgid: u32) -> bool {
    signal_group(pgid, 0)
}

/// The start time of a process (clock ticks since boot, field 22 of
/// `/proc/PID/stat`), used to tell a recorded pid from a reused one.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: skip past the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Stop a server group that an earlier, killed sweep left running. Only when
/// its leader is the same process that was recorded (not a reused pid).
pub async fn stop_leftover(pgid: u32, recorded_start: u64) -> Option<String> {
    if !group_alive(pgid) {
        return None;
    }
    match start_time(pgid) {
        Some(t) if recorded_start != 0 && t != recorded_start => return None,
        // Leader gone but members left in its group: still ours.
        _ => {}
    }
    for (sig, name, wait) in [
        (libc::SIGTERM, "SIGTERM", Duration::from_secs(10)),
        (libc::SIGKILL, "SIGKILL", Duration::from_secs(5)),
    ] {
        signal_group(pgid, sig);
        if wait_group_gone(pgid, wait).await {
            return Some(name.to_string());
        }
    }
    Some("SIGKILL (still present)".into())
}

/// Wait until no process of the group is left, up to `limit`.
pub async fn wait_group_gone(pgid: u32, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if !group_alive(pgid) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether a TCP port can be bound on `host` right now.
pub fn port_free(host: &str, port: u16) -> bool {
    std::net::TcpListener::bind((host, port)).is_ok()
}

/// Wait for a port to become free, up to `limit`.
pub async fn wait_port_free(host: &str, port: u16, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if port_free(host, port) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A port the OS considers free now.
pub fn pick_free_port(host: &str) -> std::io::Result<u16> {
    let l = std::net::TcpListener::bind((host, 0))?;
    Ok(l.local_addr()?.port())
}

/// How a process ended, in words: "killed by SIGKILL", "exit code 1".
pub fn describe_exit(code: Option<i32>, signal: Option<i32>) -> String {
    match (code, signal) {
        (_, Some(s)) => format!("killed by {}", signal_name(s)),
        (Some(c), None) => format!("exit code {c}"),
        (None, None) => "exited".into(),
    }
}

pub fn signal_name(sig: i32) -> String {
    match sig {
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGQUIT => "SIGQUIT".into(),
        libc::SIGILL => "SIGILL".into(),
        libc::SIGABRT => "SIGABRT".into(),
        libc::SIGBUS => "SIGBUS".into(),
        libc::SIGFPE => "SIGFPE".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGPIPE => "SIGPIPE".into(),
        libc::SIGTERM => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_start_time() {
        let me = std::process::id();
        let a = start_time(me).unwrap();
        assert_eq!(start_time(me), Some(a));
        assert_eq!(start_time(u32::MAX - 1), None);
    }

    #[test]
    fn port_checks() {
        let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let port = l.local_addr().unwrap().port();
        assert!(!port_free("127.0.0.1", port));
        drop(l);
        assert!(port_free("127.0.0.1", port));
    }
}
