//! Where the crash-consistency test kills the process
//! (`SWEEPTOP_CRASH_AT=POINT[:N]`, the N-th time the point is reached, 1 by
//! default): SIGKILL, as `kill -9` would, at the worst moments of writing the
//! run directory; and where it stalls a write (`SWEEPTOP_STALL_AT`). Without
//! the variables a point is one load of a cached `None`.

use std::io::Write;

/// Die here when the test asked for this point.
pub fn crash_point(point: &str) {
    if crash_due(point) {
        die();
    }
}

/// [`crash_point`] in the middle of a write: half of `bytes` reaches the
/// file, then the process dies.
pub(super) fn crash_torn(point: &str, w: &mut impl Write, bytes: &[u8]) {
    if crash_due(point) {
        let _ = w.write_all(&bytes[..bytes.len() / 2]);
        let _ = w.flush();
        die();
    }
}

/// Stall here when the test asked for this point
/// (`SWEEPTOP_STALL_AT=POINT:N:MS`: the N-th time it is reached, for MS
/// milliseconds), as a write on a hung mount would.
pub(super) fn stall_point(point: &str) {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static AT: OnceLock<Option<(String, u64, u64)>> = OnceLock::new();
    static HITS: AtomicU64 = AtomicU64::new(0);
    let at = AT.get_or_init(|| {
        let v = std::env::var("SWEEPTOP_STALL_AT").ok()?;
        let mut it = v.split(':');
        let name = it.next()?.to_string();
        let n = it.next()?.parse().ok()?;
        let ms = it.next()?.parse().ok()?;
        Some((name, n, ms))
    });
    if let Some((name, n, ms)) = at {
        if name == point && HITS.fetch_add(1, Ordering::SeqCst) + 1 == *n {
            std::thread::sleep(std::time::Duration::from_millis(*ms));
        }
    }
}

fn crash_due(point: &str) -> bool {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static AT: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static HITS: AtomicU64 = AtomicU64::new(0);
    let at = AT.get_or_init(|| {
        let v = std::env::var("SWEEPTOP_CRASH_AT").ok()?;
        let (name, n) = v.split_once(':').unwrap_or((&v, "1"));
        Some((name.to_string(), n.parse().unwrap_or(1)))
    });
    at.as_ref()
        .is_some_and(|(name, n)| name == point && HITS.fetch_add(1, Ordering::SeqCst) + 1 == *n)
}

fn die() {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::SIGKILL);
    // SIGKILL cannot be caught; this is never reached.
    std::process::abort();
}
