//! One cell's requests: the warm-up (closed loop, not measured), then the
//! measured requests by their arrival process, each record folded into the
//! cell's statistics and handed on as it finishes; the server's `/metrics`
//! read around them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::{client, prom, Arrival, CellLoad, CellRun, CellStats, Pool, Target};
use crate::model::RequestRecord;

/// Run a cell: warm-up requests (closed loop, not measured), then the measured
/// requests, each handed to `sink` as it finishes and folded into the cell's
/// statistics. With `side` (the client for the server's other endpoints), the
/// server's own counters are read around the measured requests. Dropping the
/// future cancels every request.
pub async fn run_cell(
    pool: &Arc<Pool>,
    target: &Target,
    load: &CellLoad,
    seq: &AtomicU64,
    sink: &mut (dyn FnMut(&RequestRecord) + Send),
    side: Option<&reqwest::Client>,
) -> CellRun {
    // Bounded: a host that drops SYNs must not hold the cell here (the
    // requests then meet the problem and report it).
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        pool.prewarm(load.concurrency as usize),
    )
    .await;
    if load.warmup > 0 {
        let warm = CellLoad {
            arrival: Arrival::Closed,
            concurrency: load.concurrency.min(load.warmup),
            requests: load.warmup,
            duration: None,
            ..load.clone()
        };
        let run = drive(pool, target, &warm, seq, &mut |_| {}).await;
        if run.stalled_for.is_some() {
            return run;
        }
    }
    let before = match side {
        Some(c) => prom::scrape(c, &target.base).await,
        None => None,
    };
    let mut run = drive(pool, target, load, seq, sink).await;
    if let (Some(c), Some(before)) = (side, before) {
        run.server = prom::read_after(c, &target.base, before, run.stats.ok()).await;
    }
    run
}

/// The shortest wait between two stall checks: a stall timeout below it is
/// checked this often.
const STALL_CHECK_MIN: Duration = Duration::from_millis(50);

/// Issue requests per the arrival process and fold their records.
async fn drive(
    pool: &Arc<Pool>,
    target: &Target,
    load: &CellLoad,
    seq: &AtomicU64,
    sink: &mut (dyn FnMut(&RequestRecord) + Send),
) -> CellRun {
    let progress = Arc::new(client::Progress::new());
    let first_seq = seq.fetch_add(load.requests as u64, Ordering::Relaxed);
    let start = tokio::time::Instant::now();
    let started_ms = u64::try_from(crate::model::Timestamp::now().unix_ms()).unwrap_or(0);
    let end = load.duration.map(|d| start + d);
    let mut rng = first_seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next_arrival = start;
    let mut set = tokio::task::JoinSet::new();
    let mut issued: u32 = 0;
    let mut stats = CellStats::new();
    // The last request's end (its `[DONE]`, on the wire clock where there
    // is one): where the cell's clock stops.
    let mut last_end = 0u64;
    // When a stall could first be true: the last activity plus the stall
    // timeout. Checked then (and again from the newer activity if some came
    // meanwhile), not on a fixed tick: a cell of a streaming server wakes
    // for its chunks, not also four times a second for a clock.
    let mut check_at = tokio::time::Instant::now() + load.stall_timeout.max(STALL_CHECK_MIN);
    let slots = load.concurrency.max(1) as usize;
    loop {
        let now = tokio::time::Instant::now();
        let more = issued < load.requests && end.is_none_or(|e| now < e);
        let room = match load.arrival {
            Arrival::Closed | Arrival::Poisson { capped: true, .. } => set.len() < slots,
            Arrival::Poisson { capped: false, .. } => true,
        };
        let due = match load.arrival {
            Arrival::Closed => true,
            Arrival::Poisson { .. } => now >= next_arrival,
        };
        if more && room && due {
            let i = issued as u64;
            issued += 1;
            if let Arrival::Poisson { rate, .. } = load.arrival {
                next_arrival += exponential(&mut rng, rate);
            }
            let (pool, target, progress, prompts, tags) = (
                pool.clone(),
                target.clone(),
                progress.clone(),
                load.prompts.clone(),
                load.tags.clone(),
            );
            let (max_tokens, timeout) = (load.max_tokens, load.request_timeout);
            set.spawn(async move {
                let body = &prompts[(i as usize) % prompts.len().max(1)];
                let [before, after] = tags.around_json(first_seq + i);
                let prompt = [&before, body, &after];
                client::send(&pool, &target, &prompt, max_tokens, timeout, &progress).await
            });
            continue;
        }
        if !more && set.is_empty() {
            break;
        }
        let wake = if more && room {
            next_arrival
        } else {
            now + Duration::from_secs(3600)
        };
        tokio::select! {
            joined = set.join_next(), if !set.is_empty() => {
                if let Some(Ok(rec)) = joined {
                    last_end = last_end.max(rec.end_ns);
                    stats.add(&rec);
                    sink(&rec);
                }
            }
            _ = tokio::time::sleep_until(wake), if more && room => {}
            _ = tokio::time::sleep_until(end.unwrap_or(wake)), if more && end.is_some() => {}
            _ = tokio::time::sleep_until(check_at) => {
                let now = progress.now_ns();
                let in_flight = progress.in_flight.load(Ordering::Relaxed);
                // Nothing in flight: a request that starts touches the
                // clock, so a stall is a whole timeout away in any case.
                let idle = if in_flight > 0 {
                    now.saturating_sub(progress.last_ns.load(Ordering::Relaxed))
                } else {
                    0
                };
                if in_flight > 0 && idle >= load.stall_timeout.as_nanos() as u64 {
                    set.abort_all();
                    return CellRun { stats, wall_ns: now, started_ms, stalled_for: Some(Duration::from_nanos(idle)), in_flight, server: None };
                }
                let left = load.stall_timeout.saturating_sub(Duration::from_nanos(idle));
                check_at = tokio::time::Instant::now() + left.max(STALL_CHECK_MIN);
            }
        }
    }
    CellRun {
        wall_ns: if last_end > 0 {
            last_end
        } else {
            progress.now_ns()
        },
        started_ms,
        stats,
        stalled_for: None,
        in_flight: 0,
        server: None,
    }
}

/// An exponential inter-arrival time for a Poisson process of `rate` per second.
fn exponential(state: &mut u64, rate: f64) -> Duration {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    let u = ((*state >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    Duration::from_secs_f64((-u.ln() / rate.max(1e-9)).min(3600.0))
}
