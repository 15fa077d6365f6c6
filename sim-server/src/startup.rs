//! The startup sequence: the flavor's `startup` lines (scripts/*.txt) spread over
//! `--startup-ms`, then its `ready` lines; or a startup crash or hang.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::Shared;
use crate::faults;
use crate::script::{Line, Vars};
use crate::texts::texts;

/// Point of the startup at which a startup crash strikes (after weight loading).
const CRASH_AT: f64 = 0.55;
/// Point after which a hung startup prints nothing more.
const HANG_AT: f64 = 0.6;

/// The values the startup sections fill in (listed in the scripts).
fn vars(shared: &Shared, port: u16) -> Vars<'_> {
    let a = &shared.args;
    let tp = f64::from(a.tp.max(1));
    let kv = shared.kv_capacity();
    let ranks: Vec<String> = (0..a.tp).map(|r| r.to_string()).collect();
    let mut v = shared.style.vars();
    v.set("model", a.model.as_str())
        .set("host", a.host.as_str())
        .set("port", port)
        .set("tp", a.tp)
        .set("max_model_len", a.max_model_len)
        .set("seed", a.seed)
        .set("budget", a.budget)
        .set("method", a.method.name())
        .set("kv_tokens", kv)
        .set("weights_gb", 61.0 / tp)
        .set("avail_after_weights_gb", 138.92 - 61.0 / tp)
        .set("weights_gib", 61.03 / tp)
        .set("max_concurrency", kv as f64 / a.max_model_len.max(1) as f64)
        .set("gpu_blocks", kv / 16)
        .set("ranks", ranks.join(" "));
    v
}

/// The lines of the flavor's `section` (startup, ready, startup-hang, shutdown).
pub fn lines(shared: &Shared, port: u16, section: &str) -> Vec<Line<'static>> {
    texts().render(shared.args.flavor, section, &vars(shared, port))
}

/// The startup lines, each with the point of the startup at which it appears.
pub fn steps(shared: &Shared, port: u16) -> Vec<Line<'static>> {
    lines(shared, port, "startup")
}

/// Runs the startup: prints its lines on schedule, then marks the server ready and
/// prints the ready line. A startup crash never returns; a startup hang pends.
pub async fn run(shared: Arc<Shared>, port: u16) {
    let total = Duration::from_millis(shared.args.startup_ms);
    let steps = steps(&shared, port);
    let crash = shared.args.startup_crash();
    let hang = shared.args.startup_hang();
    let stop_at = if crash.is_some() {
        Some(CRASH_AT)
    } else if hang {
        Some(HANG_AT)
    } else {
        None
    };
    let start = tokio::time::Instant::now();
    // A line without a time follows the one before it.
    let mut at = 0.0;
    for step in &steps {
        at = step.at.unwrap_or(at);
        if stop_at.is_some_and(|s| at >= s) {
            break;
        }
        tokio::time::sleep_until(start + total.mul_f64(at)).await;
        shared.style.print(std::slice::from_ref(step));
    }
    if let Some(kind) = crash {
        tokio::time::sleep_until(start + total.mul_f64(CRASH_AT)).await;
        let style = shared.style.clone();
        let tp = shared.args.tp;
        // Printing and dying block; keep them off the async workers.
        let _ = tokio::task::spawn_blocking(move || faults::startup_crash(&style, tp, kind)).await;
        std::future::pending::<()>().await;
    }
    if hang {
        hang_forever(&shared, port).await;
    }
    tokio::time::sleep_until(start + total).await;
    shared.ready.store(true, Ordering::Release);
    shared.style.print(&lines(&shared, port, "ready"));
}

/// A hung startup: every 10 s the flavor's `startup-hang` lines (vLLM's
/// shared-memory broadcast complains; SGLang is silent).
async fn hang_forever(shared: &Shared, port: u16) -> ! {
    let complaint = lines(shared, port, "startup-hang");
    loop {
        tokio::time::sleep(Duration::from_secs(10)).await;
        shared.style.print(&complaint);
    }
}
