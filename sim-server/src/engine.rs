//! The simulated engine: pacing of each request's tokens, the server-wide counters
//! behind `/metrics` and the decode log lines, and the token-count faults.
//!
//! Every request is scheduled against absolute deadlines from its own start, so
//! pacing never drifts however late a wake-up was.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use crate::args::{Method, SimArgs, TokenFault};
use crate::logs::Style;
use crate::script::Line;
use crate::texts::texts;
use crate::wire::{self, Delta, DeltaChoice, Envelope, TextChoice, Usage};
use crate::{faults, timer, tokenizer};

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

/// The pacing model derived from the flags.
#[derive(Debug, Clone)]
pub struct Pacing {
    fixed_ttft: Option<Duration>,
    fixed_itl: Option<Duration>,
    max_speed: bool,
    tp: u32,
    method: Method,
    budget: u32,
}

const BASE_TTFT_MS: f64 = 15.0;
const PREFILL_MS_PER_TOKEN: f64 = 0.004;
const BASE_ITL_MS: f64 = 8.0;
const SLOWDOWN_PER_EXTRA_REQUEST: f64 = 0.08;

/// Milliseconds to a duration, clamped to [0, 1 day] (NaN counts as 0).
fn ms(x: f64) -> Duration {
    let secs = x / 1000.0;
    if secs.is_nan() || secs <= 0.0 {
        Duration::ZERO
    } else {
        Duration::from_secs_f64(secs.min(86_400.0))
    }
}

/// `t + d`, saturating at a year from `t` instead of overflowing.
fn after(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .unwrap_or_else(|| t + Duration::from_secs(365 * 86_400))
}

impl Pacing {
    pub fn new(args: &SimArgs) -> Pacing {
        let fixed = |v: Option<f64>| v.filter(|x| x.is_finite()).map(ms);
        Pacing {
            fixed_ttft: fixed(args.ttft_ms),
            fixed_itl: fixed(args.itl_ms),
            max_speed: args.max_speed,
            tp: args.tp.max(1),
            method: args.method,
            budget: args.budget.max(1),
        }
    }

    fn tp_speedup(&self) -> f64 {
        match self.tp {
            1 => 1.0,
            2 => 0.65,
            4 => 0.45,
            8 => 0.3,
            n => 1.0 / f64::from(n).powf(0.58),
        }
    }

    fn slowdown(active: u64) -> f64 {
        1.0 + SLOWDOWN_PER_EXTRA_REQUEST * active.saturating_sub(1) as f64
    }

    pub fn ttft(&self, prompt_tokens: u64, active: u64) -> Duration {
        self.fixed_ttft.unwrap_or_else(|| {
            let prefill = PREFILL_MS_PER_TOKEN * prompt_tokens as f64 / f64::from(self.tp);
            ms((BASE_TTFT_MS + prefill) * Self::slowdown(active))
        })
    }

    pub fn speculative(&self) -> bool {
        self.method != Method::None
    }

    /// Draft tokens proposed per verify step.
    pub fn draft_len(&self) -> u64 {
        match self.method {
            Method::None => 0,
            Method::Dflash => 15,
            Method::Ddtree => u64::from(self.budget),
        }
    }

    /// Most tokens one verify step can deliver (all drafts plus the bonus token).
    fn max_accept(&self) -> u64 {
        self.draft_len().min(MAX_POSITIONS as u64 - 1) + 1
    }

    /// Mean tokens delivered per verify step.
    pub fn mean_accept(&self) -> f64 {
        let mean = match self.method {
            Method::None => 1.0,
            Method::Dflash => 3.1,
            Method::Ddtree => 3.4 + 0.05 * f64::from(self.budget),
        };
        mean.min(0.8 * self.max_accept() as f64).max(1.0)
    }

    /// Tokens delivered by one verify step: spread around the mean, with a mean
    /// that is exactly `mean_accept` (stochastic rounding, symmetric noise).
    pub fn draw_accept(&self, rng: &mut Rng) -> u64 {
        let mean = self.mean_accept();
        let max = self.max_accept() as f64;
        let spread = 2.0f64.min(mean - 1.0).min(max - mean).max(0.0);
        let x = mean + spread * (rng.unit() + rng.unit() - 1.0);
        let k = x.floor() + f64::from(u8::from(rng.unit() < x.fract()));
        (k.clamp(1.0, max)) as u64
    }

    /// Duration of one decode step (a verify step with a speculative method).
    pub fn step(&self, active: u64) -> Duration {
        let plain = BASE_ITL_MS * self.tp_speedup();
        let cost = match self.method {
            Method::None => 1.0,
            Method::Dflash => 1.15,
            Method::Ddtree => 1.2 + 0.004 * f64::from(self.budget),
        };
        ms(plain * cost * Self::slowdown(active))
    }
}

/// Which OpenAI endpoint a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Completions,
    Chat,
}

/// A validated generation request.
#[derive(Debug, Clone)]
pub struct Generation {
    pub endpoint: Endpoint,
    pub id: String,
    pub created: u64,
    pub model: String,
    pub prompt_tokens: u64,
    pub max_tokens: u64,
    pub include_usage: bool,
    /// Arrival number: seeds the request's accept-length spread and output words.
    pub seq: u64,
    /// When the request arrived: every deadline counts from here.
    pub start: Instant,
}

/// Where generated chunks go.
pub enum Sink {
    /// SSE events to the response body.
    Stream(mpsc::Sender<Bytes>),
    /// The whole text, for a non-streaming response.
    Collect(String),
}

/// How a generation ended.
pub enum Outcome {
    /// All tokens delivered; for `Sink::Collect`, the text.
    Done(String),
    /// The client went away, or the stream was ended by the engine.
    Ended,
    /// The engine died with this error (non-streaming answer: HTTP 500).
    Failed(String),
}

impl Sink {
    async fn send(&mut self, event: String) -> bool {
        match self {
            Sink::Stream(tx) => tx.send(Bytes::from(event)).await.is_ok(),
            Sink::Collect(_) => true,
        }
    }

    /// Waits until the client goes away (a hung stream never ends on its own).
    async fn closed(&self) {
        match self {
            Sink::Stream(tx) => tx.closed().await,
            Sink::Collect(_) => std::future::pending().await,
        }
    }
}

fn sse(json: &str) -> String {
    format!("data: {json}\n\n")
}

impl Generation {
    fn object(&self) -> &'static str {
        match self.endpoint {
            Endpoint::Completions => "text_completion",
            Endpoint::Chat => "chat.completion.chunk",
        }
    }

    fn envelope<C: serde::Serialize>(&self, choices: Vec<C>, usage: Option<Usage>) -> String {
        Envelope {
            id: &self.id,
            object: self.object(),
            created: self.created,
            model: &self.model,
            choices,
            usage,
        }
        .to_json()
    }

    fn content_chunk(&self, text: &str, finish: Option<&str>) -> String {
        match self.endpoint {
            Endpoint::Completions => self.envelope(
                vec![TextChoice {
                    index: 0,
                    text,
                    logprobs: None,
                    finish_reason: finish,
                    stop_reason: None,
                }],
                None,
            ),
            Endpoint::Chat => self.envelope(
                vec![DeltaChoice {
                    index: 0,
                    delta: Delta {
                        role: None,
                        content: text,
                    },
                    logprobs: None,
                    finish_reason: finish,
                }],
                None,
            ),
        }
    }

    /// The first chat chunk: the role, no content.
    fn role_chunk(&self) -> String {
        self.envelope(
            vec![DeltaChoice {
                index: 0,
                delta: Delta {
                    role: Some("assistant"),
                    content: "",
                },
                logprobs: None,
                finish_reason: None,
            }],
            None,
        )
    }

    fn usage_chunk(&self, completion_tokens: u64) -> String {
        self.envelope::<TextChoice>(
            Vec::new(),
            Some(Usage::new(self.prompt_tokens, completion_tokens)),
        )
    }
}

/// Waits for the phase to change; pends forever if it never can.
async fn phase_changed(rx: &mut watch::Receiver<Phase>) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Sleeps until `deadline` unless the engine stops running first; returns the
/// phase that stopped it.
async fn wait_until(deadline: Instant, rx: &mut watch::Receiver<Phase>) -> Option<Phase> {
    loop {
        let phase = rx.borrow_and_update().clone();
        if phase != Phase::Running {
            return Some(phase);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::select! {
            biased;
            _ = phase_changed(rx) => {}
            _ = timer::sleep_until(deadline) => {}
        }
    }
}

/// Produces the request's tokens into `sink`, paced by the model, honouring faults.
pub async fn generate(shared: Arc<Shared>, gen: Generation, mut sink: Sink) -> Outcome {
    let pacing = Pacing::new(&shared.args);
    let seq = gen.seq;
    let mut rng = Rng::new(shared.args.seed ^ seq.wrapping_mul(0xA076_1D64_78BD_642F));
    let word_offset = seq.wrapping_mul(7);
    let mut active_guard = ActiveGuard::new(shared.clone(), gen.prompt_tokens);
    let mut phase_rx = shared.phase_tx.subscribe();
    shared
        .style
        .print(&prefill_lines(&shared, gen.prompt_tokens));

    if gen.endpoint == Endpoint::Chat && !sink.send(sse(&gen.role_chunk())).await {
        return Outcome::Ended;
    }

    let active = shared.counters().active;
    let first_token_at = after(gen.start, pacing.ttft(gen.prompt_tokens, active));
    let mut deadline = first_token_at;
    let mut emitted = 0u64;
    // No queue here: every request is scheduled as it arrives.
    shared.counters().latency.queue.observe(0.0);
    let mut last_sent = gen.start;
    while emitted < gen.max_tokens {
        let spec_step = emitted > 0 && pacing.speculative();
        let want = if spec_step {
            pacing.draw_accept(&mut rng)
        } else {
            1
        }
        .min(gen.max_tokens - emitted);
        if emitted > 0 {
            deadline = match pacing.fixed_itl {
                // The chunk goes out when its last token is due.
                Some(itl) => {
                    let n = u32::try_from(emitted + want - 1).unwrap_or(u32::MAX);
                    after(first_token_at, itl.saturating_mul(n))
                }
                None => after(deadline, pacing.step(shared.counters().active)),
            };
        }
        let stopped = if pacing.max_speed {
            if emitted % 256 == 255 {
                tokio::task::yield_now().await;
            }
            Some(shared.phase()).filter(|p| *p != Phase::Running)
        } else {
            wait_until(deadline, &mut phase_rx).await
        };
        if let Some(phase) = stopped {
            return stop(&mut sink, phase).await;
        }
        let (granted, fault) = shared.reserve(want, spec_step.then(|| pacing.draft_len()));
        match fault {
            Some(TokenFault::Hang) => shared.set_phase(Phase::Hung),
            Some(TokenFault::Crash(kind)) => faults::start_crash(shared.clone(), kind),
            None => {}
        }
        active_guard.kv_tokens += granted;
        if granted == 0 {
            // Another stream used up the budget before a fault: the phase follows.
            let phase = wait_until(
                after(Instant::now(), Duration::from_secs(3600)),
                &mut phase_rx,
            )
            .await
            .unwrap_or(Phase::Hung);
            return stop(&mut sink, phase).await;
        }
        let mut piece = String::new();
        for i in emitted..emitted + granted {
            piece.push(' ');
            piece.push_str(tokenizer::output_token(word_offset, i));
        }
        emitted += granted;
        let finish = (emitted == gen.max_tokens).then_some("length");
        match &mut sink {
            Sink::Collect(all) => all.push_str(&piece),
            Sink::Stream(_) => {
                if !sink.send(sse(&gen.content_chunk(&piece, finish))).await {
                    return Outcome::Ended;
                }
            }
        }
        let now = Instant::now();
        let latency = &mut shared.counters().latency;
        if emitted == granted {
            latency.ttft.observe((now - gen.start).as_secs_f64());
        } else {
            latency.itl.observe((now - last_sent).as_secs_f64());
        }
        last_sent = now;
    }
    {
        let mut c = shared.counters();
        c.requests_finished += 1;
        c.latency.e2e.observe(gen.start.elapsed().as_secs_f64());
    }
    match sink {
        Sink::Collect(all) => Outcome::Done(all),
        Sink::Stream(_) => {
            if gen.include_usage {
                let _ = sink.send(sse(&gen.usage_chunk(emitted))).await;
            }
            let _ = sink.send("data: [DONE]\n\n".to_string()).await;
            Outcome::Done(String::new())
        }
    }
}

/// Ends a generation the engine stopped: a hang keeps the connection open until the
/// client leaves; a dying vLLM sends its in-stream error.
async fn stop(sink: &mut Sink, phase: Phase) -> Outcome {
    match (phase, &sink) {
        (
            Phase::Dying {
                stream_error: Some(err),
            },
            Sink::Stream(_),
        ) => {
            let _ = sink.send(sse(&wire::stream_error(&err))).await;
            let _ = sink.send("data: [DONE]\n\n".to_string()).await;
            Outcome::Ended
        }
        (
            Phase::Dying {
                stream_error: Some(err),
            },
            Sink::Collect(_),
        ) => Outcome::Failed(err),
        _ => {
            sink.closed().await;
            Outcome::Ended
        }
    }
}

/// The flavor's `prefill` lines for a request that just arrived (SGLang logs
/// one, vLLM none).
pub fn prefill_lines(shared: &Shared, prompt_tokens: u64) -> Vec<Line<'static>> {
    let (active, kv_tokens) = {
        let c = shared.counters();
        (c.active, c.active_kv_tokens)
    };
    let mut vars = shared.style.vars();
    vars.set("new_tokens", prompt_tokens)
        .set(
            "token_usage",
            kv_tokens as f64 / shared.kv_capacity() as f64,
        )
        .set("running", active.saturating_sub(1));
    texts().render(shared.args.flavor, "prefill", &vars)
}

/// About once a second while requests are active, the flavor's decode stats line.
pub async fn stats_loop(shared: Arc<Shared>) {
    let mut last = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let now = Instant::now();
        let elapsed = now.duration_since(last).as_secs_f64().max(1e-3);
        last = now;
        let (c, interval) = {
            let mut c = shared.counters();
            let interval = std::mem::take(&mut c.interval);
            c.last_gen_throughput = interval.output_tokens as f64 / elapsed;
            (c.clone(), interval)
        };
        match shared.phase() {
            Phase::Running => {}
            // A hung engine is stuck in a collective: it logs nothing.
            Phase::Hung => continue,
            Phase::Dying { .. } => return,
        }
        if c.active == 0 {
            continue;
        }
        shared
            .style
            .print(&decode_stats_lines(&shared, &c, &interval, elapsed));
    }
}

/// The flavor's `decode-stats` lines for one interval.
pub fn decode_stats_lines(
    shared: &Shared,
    c: &Counters,
    interval: &IntervalCounters,
    elapsed_s: f64,
) -> Vec<Line<'static>> {
    let s = &interval.spec;
    let usage = c.active_kv_tokens as f64 / shared.kv_capacity() as f64;
    let positions = (Pacing::new(&shared.args).draft_len() as usize).min(8);
    let per_position: Vec<String> = s.accepted_per_position[..positions]
        .iter()
        .map(|&n| format!("{:.3}", n as f64 / s.steps.max(1) as f64))
        .collect();
    let mut vars = shared.style.vars();
    vars.set("method", shared.args.method.name())
        .set("running", c.active)
        .set("tokens", c.active_kv_tokens)
        .set("token_usage", usage)
        .set("kv_usage_pct", usage * 100.0)
        .set("cuda_graph", if c.active <= 256 { "True" } else { "False" })
        .set("gen_throughput", interval.output_tokens as f64 / elapsed_s)
        .set(
            "prompt_throughput",
            interval.prompt_tokens as f64 / elapsed_s,
        )
        .set("accept_len", s.accept_len().unwrap_or(1.0))
        .set("accepted_throughput", s.accepted as f64 / elapsed_s)
        .set("drafted_throughput", s.draft_tokens as f64 / elapsed_s)
        .set("accepted", s.accepted)
        .set("drafted", s.draft_tokens)
        .set("per_position", per_position.join(", "))
        .set(
            "draft_acceptance_pct",
            100.0 * s.accepted as f64 / s.draft_tokens.max(1) as f64,
        );
    texts().render(shared.args.flavor, "decode-stats", &vars)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: SimArgs,
    }

    fn args(extra: &[&str]) -> SimArgs {
        let mut argv = vec!["sim", "--port", "1"];
        argv.extend_from_slice(extra);
        Cli::parse_from(argv).args
    }

    #[test]
    fn accept_draws_have_the_configured_mean() {
        for (flags, mean) in [
            (vec!["--method", "dflash"], 3.1),
            (vec!["--method", "ddtree", "--budget", "16"], 4.2),
        ] {
            let pacing = Pacing::new(&args(&flags));
            let mut rng = Rng::new(42);
            let n = 200_000;
            let total: u64 = (0..n).map(|_| pacing.draw_accept(&mut rng)).sum();
            let got = total as f64 / n as f64;
            assert!((got - mean).abs() < 0.02, "{flags:?}: {got} vs {mean}");
        }
    }

    #[test]
    fn pacing_model_scales() {
        let p = Pacing::new(&args(&[]));
        assert_eq!(p.ttft(0, 1), Duration::from_millis(15));
        assert!(p.ttft(10_000, 1) > p.ttft(0, 1));
        assert!(p.step(8) > p.step(1));
        let tp8 = Pacing::new(&args(&["--tp", "8"]));
        assert!(tp8.step(1) < p.step(1));
        let fixed = Pacing::new(&args(&["--ttft-ms", "200", "--itl-ms", "10"]));
        assert_eq!(fixed.ttft(30_000, 64), Duration::from_millis(200));
        assert_eq!(fixed.fixed_itl, Some(Duration::from_millis(10)));
    }

    #[test]
    fn decode_stats_lines_in_each_flavor() {
        let shared = Shared::new(args(&["--method", "dflash"]));
        let mut c = Counters {
            active: 2,
            active_kv_tokens: 1234,
            ..Counters::default()
        };
        c.interval.output_tokens = 300;
        c.interval.spec.steps = 10;
        c.interval.spec.accepted = 25;
        c.interval.spec.draft_tokens = 150;
        let lines = decode_stats_lines(&shared, &c, &c.interval, 2.0);
        assert_eq!(
            lines[0].text,
            "Decode batch. #running-req: 2, #token: 1234, token usage: 0.00, accept len: 3.50, \
             cuda graph: True, gen throughput (token/s): 150.00, #queue-req: 0"
        );
        let shared = Shared::new(args(&["--method", "dflash", "--flavor", "vllm"]));
        let lines = decode_stats_lines(&shared, &c, &c.interval, 2.0);
        assert!(lines[0].text.starts_with(
            "Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 150.0 tokens/s, \
             Running: 2 reqs"
        ));
        assert_eq!(lines[0].source, "metrics.py:455");
        assert!(lines[1].text.starts_with(
            "SpecDecoding metrics: Mean acceptance length: 3.50, Accepted throughput: 12.50 \
             tokens/s, Drafted throughput: 75.00 tokens/s, Accepted: 25 tokens, Drafted: 150 tokens"
        ), "{}", lines[1].text);
        let plain = Shared::new(args(&[]));
        let lines = decode_stats_lines(&plain, &c, &c.interval, 2.0);
        assert!(!lines[0].text.contains("accept len"));
    }

    #[test]
    fn reserve_stops_at_the_fault_threshold() {
        let shared = Shared::new(args(&["--fault", "hang@10"]));
        assert_eq!(shared.reserve(4, None), (4, None));
        assert_eq!(shared.reserve(4, Some(15)), (4, None));
        assert_eq!(shared.reserve(4, Some(15)), (2, Some(TokenFault::Hang)));
        assert_eq!(shared.reserve(4, None), (0, None));
        let c = shared.counters();
        assert_eq!(c.output_tokens, 10);
        assert_eq!(c.spec.steps, 2);
        assert_eq!(c.spec.accepted, 3 + 1);
        assert_eq!(c.spec.draft_tokens, 30);
    }
}
