//! Process groups and ports: the OS-level half of the server lifecycle.

use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// Send a signal to a whole process group (`None`: only ask whether it
/// exists). Returns false when the group is gone.
pub fn signal_group(pgid: u32, sig: Option<Signal>) -> bool {
    match i32::try_from(pgid) {
        // 0 and 1 would mean our own group and every process: never.
        Ok(g) if g > 1 => killpg(Pid::from_raw(g), sig).is_ok(),
        _ => false,
    }
}

/// Whether any process of the group is still alive (zombies included).
pub fn group_alive(pgid: u32) -> bool {
    signal_group(pgid, None)
}

/// The start time of a process (clock ticks since boot, from
/// `/proc/PID/stat`), used to tell a recorded pid from a reused one.
pub fn start_time(pid: u32) -> Option<u64> {
    let pid = i32::try_from(pid).ok()?;
    Some(
        procfs::process::Process::new(pid)
            .ok()?
            .stat()
            .ok()?
            .starttime,
    )
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
    Some(stop_group(pgid).await)
}

/// The environment variable every server of a run carries (its whole
/// process tree inherits it), valued with the run directory's full path.
pub const RUN_TAG: &str = "SWEEPTOP_RUN";

/// The process groups of live processes that carry `tag` as [`RUN_TAG`]:
/// servers of this run that a killed sweep left, whether or not it had time
/// to record them. Our own group is never among them.
pub fn tagged_groups(tag: &str) -> Vec<u32> {
    let own = nix::unistd::getpgrp().as_raw();
    let mut groups = Vec::new();
    let Ok(all) = procfs::process::all_processes() else {
        return groups;
    };
    for p in all.flatten() {
        let Ok(env) = p.environ() else { continue };
        if env
            .get(std::ffi::OsStr::new(RUN_TAG))
            .and_then(|v| v.to_str())
            != Some(tag)
        {
            continue;
        }
        let Ok(stat) = p.stat() else { continue };
        let alive = stat.state != 'Z';
        if alive && stat.pgrp > 1 && stat.pgrp != own {
            if let Ok(g) = u32::try_from(stat.pgrp) {
                if !groups.contains(&g) {
                    groups.push(g);
                }
            }
        }
    }
    groups
}

/// Stop a process group: SIGTERM, then SIGKILL. Returns the signal that
/// ended it.
pub async fn stop_group(pgid: u32) -> String {
    for (sig, wait) in [
        (Signal::SIGTERM, Duration::from_secs(10)),
        (Signal::SIGKILL, Duration::from_secs(5)),
    ] {
        signal_group(pgid, Some(sig));
        if wait_group_gone(pgid, wait).await {
            return sig.as_str().to_string();
        }
    }
    "SIGKILL (still present)".into()
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
