//! The log lines the engine writes as it serves: a request's prefill and
//! the periodic decode statistics, in the flavor's words.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Counters, IntervalCounters, Pacing, Phase, Shared};
use crate::script::Line;
use crate::texts::texts;

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
