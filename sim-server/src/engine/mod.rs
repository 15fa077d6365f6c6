//! The simulated engine: pacing of each request's tokens, the server-wide counters
//! behind `/metrics` and the decode log lines, and the token-count faults.
//!
//! Here: the shared state (phase, counters, KV budget) and its guards; the
//! pacing model in `pacing.rs`, one request's generation in `generate.rs`,
//! the log lines in `lines.rs`.
//!
//! Every request is scheduled against absolute deadlines from its own start, so
//! pacing never drifts however late a wake-up was.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::watch;

use crate::args::{SimArgs, TokenFault};
use crate::style::Style;

mod generate;
pub mod lines;
mod pacing;
#[cfg(test)]
mod tests;

pub use generate::{generate, Endpoint, Event, Generation, Outcome, Sink};
pub use lines::stats_loop;
pub use pacing::Pacing;

/// Longest speculative verify step counted per position in the acceptance stats.
const MAX_POSITIONS: usize = 32;

/// What the engine is doing, as every stream sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Phase {
    Running,
    /// Tokens stopped (a hang fault); connections stay open.
    Hung,
    /// A crash is being reported; streams end with this in-stream error, if any,
    /// or stay silent until the process is gone.
    Dying {
        stream_error: Option<String>,
    },
}

/// Cumulative and per-log-interval counters.
/// A Prometheus histogram's sum and count (its buckets are not simulated
/// beyond `+Inf`).
#[derive(Debug, Default, Clone, Copy)]
pub struct HistSum {
    pub sum: f64,
    pub count: u64,
}

impl HistSum {
    pub fn observe(&mut self, seconds: f64) {
        self.sum += seconds;
        self.count += 1;
    }
}

/// The latency histograms, by the server's own clock: from the moment the
/// engine sees a request.
#[derive(Debug, Default, Clone)]
pub struct Latencies {
    pub ttft: HistSum,
    pub itl: HistSum,
    pub e2e: HistSum,
    pub queue: HistSum,
}

#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub latency: Latencies,
    /// Prompt tokens looked up in the prefix cache, and those found.
    pub cache_queries: u64,
    pub cache_hits: u64,
    pub output_tokens: u64,
    pub prompt_tokens: u64,
    pub requests_finished: u64,
    pub active: u64,
    /// KV-cache tokens held by the active requests (prompt + generated).
    pub active_kv_tokens: u64,
    /// Generation throughput of the last stats interval (tokens/s).
    pub last_gen_throughput: f64,
    pub spec: SpecCounters,
    pub interval: IntervalCounters,
    fault_fired: bool,
}

#[derive(Debug, Default, Clone)]
pub struct SpecCounters {
    /// Verify steps (vLLM's "drafts").
    pub steps: u64,
    pub draft_tokens: u64,
    /// Draft tokens accepted: tokens delivered by verify steps minus one per step.
    pub accepted: u64,
    pub accepted_per_position: [u64; MAX_POSITIONS],
}

impl SpecCounters {
    /// Mean tokens delivered per verify step (SGLang's accept len, vLLM's mean
    /// acceptance length = 1 + accepted / drafts).
    pub fn accept_len(&self) -> Option<f64> {
        (self.steps > 0).then(|| 1.0 + self.accepted as f64 / self.steps as f64)
    }
}

#[derive(Debug, Default, Clone)]
pub struct IntervalCounters {
    pub output_tokens: u64,
    pub prompt_tokens: u64,
    pub spec: SpecCounters,
}

/// Everything the server's tasks share.
pub struct Shared {
    pub args: SimArgs,
    pub style: Style,
    pub ready: AtomicBool,
    counters: Mutex<Counters>,
    pub prefix_cache: Mutex<crate::cache::PrefixCache>,
    phase_tx: watch::Sender<Phase>,
    request_seq: AtomicU64,
    token_fault: Option<(u64, TokenFault)>,
    /// `--send-log`: where each streamed request's chunk times go.
    pub send_log: std::sync::OnceLock<std::sync::mpsc::Sender<String>>,
}

#[cfg(test)]
impl Shared {
    /// A server's shared state from these flags (`SimArgs::for_tests`).
    pub fn for_tests(flags: &[&str]) -> Arc<Shared> {
        Shared::new(SimArgs::for_tests(flags))
    }
}

impl Shared {
    pub fn new(args: SimArgs) -> Arc<Shared> {
        let style = Style {
            flavor: args.flavor,
            pid: std::process::id(),
        };
        let token_fault = args.token_fault();
        Arc::new(Shared {
            args,
            style,
            ready: AtomicBool::new(false),
            counters: Mutex::new(Counters::default()),
            prefix_cache: Mutex::new(crate::cache::PrefixCache::default()),
            phase_tx: watch::channel(Phase::Running).0,
            request_seq: AtomicU64::new(0),
            token_fault,
            send_log: std::sync::OnceLock::new(),
        })
    }

    pub fn counters(&self) -> MutexGuard<'_, Counters> {
        // A poisoned lock only means another task panicked mid-update; the counts
        // are still the best we have.
        self.counters.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Look a prompt up in the prefix cache and count it.
    pub fn cache_lookup(&self, ids: &[u32]) {
        let hits = self
            .prefix_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .lookup(ids);
        let mut c = self.counters();
        c.cache_queries += ids.len() as u64;
        c.cache_hits += hits;
    }

    pub fn flush_cache(&self) {
        self.prefix_cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub fn phase(&self) -> Phase {
        self.phase_tx.borrow().clone()
    }

    pub fn set_phase(&self, phase: Phase) {
        self.phase_tx.send_replace(phase);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    pub fn next_request_seq(&self) -> u64 {
        self.request_seq.fetch_add(1, Ordering::Relaxed)
    }

    /// KV-cache capacity in tokens, as reported at startup.
    pub fn kv_capacity(&self) -> u64 {
        self.args.max_model_len.saturating_mul(20).max(1)
    }

    /// Takes up to `want` output tokens from the budget left before a token fault;
    /// returns how many were granted and the fault to fire now, if any.
    fn reserve(&self, want: u64, spec_step: Option<u64>) -> (u64, Option<TokenFault>) {
        let mut guard = self.counters();
        let c = &mut *guard;
        if c.fault_fired {
            return (0, None);
        }
        let granted = match self.token_fault {
            Some((limit, _)) => want.min(limit.saturating_sub(c.output_tokens)),
            None => want,
        };
        c.output_tokens += granted;
        c.interval.output_tokens += granted;
        c.active_kv_tokens += granted;
        if let (Some(draft_len), true) = (spec_step, granted > 0) {
            for spec in [&mut c.spec, &mut c.interval.spec] {
                spec.steps += 1;
                spec.draft_tokens += draft_len;
                spec.accepted += granted - 1;
                for pos in 0..(granted - 1).min(MAX_POSITIONS as u64) as usize {
                    spec.accepted_per_position[pos] += 1;
                }
            }
        }
        let fired = match self.token_fault {
            Some((limit, fault)) if c.output_tokens >= limit => {
                c.fault_fired = true;
                Some(fault)
            }
            _ => None,
        };
        (granted, fired)
    }
}

/// Counts a request as active (for the slowdown and the stats) while alive.
struct ActiveGuard {
    shared: Arc<Shared>,
    kv_tokens: u64,
}

impl ActiveGuard {
    fn new(shared: Arc<Shared>, prompt_tokens: u64) -> ActiveGuard {
        {
            let mut c = shared.counters();
            c.active += 1;
            c.active_kv_tokens += prompt_tokens;
            c.prompt_tokens += prompt_tokens;
            c.interval.prompt_tokens += prompt_tokens;
        }
        ActiveGuard {
            shared,
            kv_tokens: prompt_tokens,
        }
    }
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        let mut c = self.shared.counters();
        c.active = c.active.saturating_sub(1);
        c.active_kv_tokens = c.active_kv_tokens.saturating_sub(self.kv_tokens);
    }
}

/// Deterministic pseudo-random numbers (splitmix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
