//! Load generation: the OpenAI-compatible streaming client, prompts of exact
//! token length, closed-loop cells, and per-cell metrics. Never decides whether
//! a cell failed (that is `detect`).

pub mod about;
pub mod client;
pub mod conn;
mod error;
#[cfg(test)]
mod fuzz;
pub mod metrics;
pub mod prom;
pub mod prompt;
pub mod sse;
pub mod tags;
pub mod tokenizer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::model::RequestRecord;
pub use about::{about, About};
pub use client::{http_client, Target};
pub use conn::Pool;
pub use error::LoadError;
pub use metrics::CellStats;

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Closed loop: `concurrency` requests in flight, a new one as each ends.
    Closed,
    /// Open loop: Poisson arrivals at `rate` requests/s, optionally capped at
    /// `concurrency` in flight (arrivals wait for a free slot).
    Poisson { rate: f64, capped: bool },
}

/// What one cell sends.
#[derive(Debug, Clone)]
pub struct CellLoad {
    pub arrival: Arrival,
    pub concurrency: u32,
    /// Measured requests (with `duration`, whichever ends first).
    pub requests: u32,
    pub duration: Option<Duration>,
    pub warmup: u32,
    pub max_tokens: u32,
    /// The prompt bodies (cycled); each request gets its own tag.
    pub prompts: Arc<Vec<String>>,
    pub tags: tags::Tags,
    pub request_timeout: Duration,
    pub stall_timeout: Duration,
}

/// What one cell measured. The records themselves went to the sink.
#[derive(Debug, Default)]
pub struct CellRun {
    pub stats: CellStats,
    pub wall_ns: u64,
    /// Requests were in flight and no byte arrived for this long.
    pub stalled_for: Option<Duration>,
    /// How many requests were in flight when the cell ended (a stall's
    /// evidence).
    pub in_flight: u64,
    /// The server's `/metrics` page read just before the measured requests
    /// (after the warm-up) and after them; none without the page.
    pub server: Option<prom::Readings>,
}

impl CellRun {
    /// The server's own figures over the measured requests, when it has a
    /// `/metrics` page (`None`), and when they are of these requests alone
    /// (`Err` says why not).
    pub fn server_figures(&self) -> Option<Result<prom::ServerFigures, String>> {
        self.server.as_ref().map(|r| {
            r.figures()
                .of_these_requests(self.stats.ok(), self.stats.requests)
        })
    }
}

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
    let end = load.duration.map(|d| start + d);
    let mut rng = first_seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next_arrival = start;
    let mut set = tokio::task::JoinSet::new();
    let mut issued: u32 = 0;
    let mut stats = CellStats::new();
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
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
                let text = tags.apply(first_seq + i, body);
                client::send(&pool, &target, &text, max_tokens, timeout, &progress).await
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
                    stats.add(&rec);
                    sink(&rec);
                }
            }
            _ = tokio::time::sleep_until(wake), if more && room => {}
            _ = tokio::time::sleep_until(end.unwrap_or(wake)), if more && end.is_some() => {}
            _ = tick.tick() => {
                let now = progress.now_ns();
                let idle = now.saturating_sub(progress.last_ns.load(Ordering::Relaxed));
                let in_flight = progress.in_flight.load(Ordering::Relaxed);
                if in_flight > 0 && idle >= load.stall_timeout.as_nanos() as u64 {
                    set.abort_all();
                    return CellRun { stats, wall_ns: now, stalled_for: Some(Duration::from_nanos(idle)), in_flight, server: None };
                }
            }
        }
    }
    CellRun {
        wall_ns: progress.now_ns(),
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

/// GET `url`: the response, if the server answered 2xx within `timeout`.
async fn get_ok(
    client: &reqwest::Client,
    url: &str,
    timeout: Duration,
) -> Option<reqwest::Response> {
    let resp = client.get(url).timeout(timeout).send().await.ok()?;
    resp.status().is_success().then_some(resp)
}

/// POST `body` as JSON and read a JSON answer; any failure in words.
async fn post_json(
    client: &reqwest::Client,
    url: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> Result<serde_json::Value, String> {
    let resp = client
        .post(url)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).unwrap_or_default())
        .timeout(timeout)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("HTTP {}", resp.status().as_u16()));
    }
    let bytes = resp.bytes().await.map_err(|e| e.to_string())?;
    serde_json::from_slice(&bytes).map_err(|e| e.to_string())
}

/// Measure a text with the server's tokenizer (`POST /tokenize`), if it has one.
pub async fn tokenize(
    client: &reqwest::Client,
    target: &Target,
    text: &str,
) -> Result<u64, LoadError> {
    let fail = |why: String| LoadError::Tokenize(why);
    let body = match target.api {
        crate::plan::Api::Completions => serde_json::json!({"model": target.model, "prompt": text}),
        crate::plan::Api::Chat => {
            serde_json::json!({"model": target.model, "messages": [{"role": "user", "content": text}]})
        }
    };
    // Short: a wedged server must not hold the sweep here (the stall and
    // exit watches only run while requests are in flight).
    let url = format!("{}/tokenize", target.base);
    let v = post_json(client, &url, &body, Duration::from_secs(10))
        .await
        .map_err(fail)?;
    v.get("count")
        .and_then(|c| c.as_u64())
        .or_else(|| {
            v.get("tokens")
                .and_then(|t| t.as_array())
                .map(|a| a.len() as u64)
        })
        .ok_or_else(|| fail("no `count` or `tokens` in the answer".into()))
}

/// The prompt tokens the server itself counts for `text` sent as a request
/// (`usage.prompt_tokens` of a one-token, non-streamed request): the truth
/// `/tokenize` is checked against, special tokens the server adds included.
pub async fn usage_prompt_tokens(
    client: &reqwest::Client,
    target: &Target,
    text: &str,
) -> Result<u64, LoadError> {
    let fail =
        |why: String| LoadError::Tokenize(format!("checking /tokenize against usage: {why}"));
    let mut body = client::request_json(target, text, 1);
    body["stream"] = false.into();
    if let Some(o) = body.as_object_mut() {
        o.remove("stream_options");
    }
    let v = post_json(client, &target.url(), &body, Duration::from_secs(60))
        .await
        .map_err(fail)?;
    v.pointer("/usage/prompt_tokens")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| fail("no usage.prompt_tokens in the answer".into()))
}
