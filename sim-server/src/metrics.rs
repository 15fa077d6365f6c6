//! `/metrics`: the engine's counters in Prometheus text, with the flavor's
//! metric names, labels and help texts (vLLM's `vllm:*`, SGLang's
//! `sglang:*`), and the latency histograms by the engine's own clock.

use std::fmt::Write as _;

use crate::args::{Flavor, Method};
use crate::engine::{Counters, HistSum, Shared};

const GAUGE: &str = "gauge";
const COUNTER: &str = "counter";

/// One sample: its name, type, help text, labels and value.
type Row = (&'static str, &'static str, &'static str, String, f64);

/// The exposition of the server's counters now.
pub fn exposition(shared: &Shared) -> String {
    let c = shared.counters().clone();
    let model = &shared.args.model;
    let spec = shared.args.method != Method::None;
    let (rows, prefix, queue, labels) = match shared.args.flavor {
        Flavor::Vllm => {
            let labels = format!("engine=\"0\",model_name=\"{model}\"");
            (
                vllm(&c, spec, model, &labels),
                "vllm",
                "request_queue_time_seconds",
                labels,
            )
        }
        Flavor::Sglang => {
            let labels = format!("model_name=\"{model}\"");
            (
                sglang(&c, spec, &labels),
                "sglang",
                "queue_time_seconds",
                labels,
            )
        }
    };
    let mut out = String::new();
    for (name, kind, help, labels, value) in rows {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        let _ = writeln!(out, "{name}{{{labels}}} {value:?}");
    }
    let lat = &c.latency;
    for (name, help, h) in [
        (
            "time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            lat.ttft,
        ),
        (
            "inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            lat.itl,
        ),
        (
            "e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            lat.e2e,
        ),
        (
            queue,
            "Histogram of time spent in the waiting queue in seconds.",
            lat.queue,
        ),
    ] {
        histogram(&mut out, &format!("{prefix}:{name}"), help, &labels, h);
    }
    out
}

/// A histogram with only its `+Inf` bucket, its count and its sum.
fn histogram(out: &mut String, name: &str, help: &str, l: &str, h: HistSum) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} histogram");
    let _ = writeln!(out, "{name}_bucket{{{l},le=\"+Inf\"}} {:?}", h.count as f64);
    let _ = writeln!(out, "{name}_count{{{l}}} {:?}", h.count as f64);
    let _ = writeln!(out, "{name}_sum{{{l}}} {:?}", h.sum);
}

#[rustfmt::skip]
fn vllm(c: &Counters, spec: bool, model: &str, l: &str) -> Vec<Row> {
    let l = || l.to_string();
    let mut rows: Vec<Row> = vec![
        ("vllm:num_requests_running", GAUGE, "Number of requests in model execution batches.", l(), c.active as f64),
        ("vllm:num_requests_waiting", GAUGE, "Number of requests waiting to be processed.", l(), 0.0),
        ("vllm:prompt_tokens_total", COUNTER, "Number of prefill tokens processed.", l(), c.prompt_tokens as f64),
        ("vllm:generation_tokens_total", COUNTER, "Number of generation tokens processed.", l(), c.output_tokens as f64),
        ("vllm:prefix_cache_queries_total", COUNTER, "Prefix cache queries, in terms of number of queried tokens.", l(), c.cache_queries as f64),
        ("vllm:prefix_cache_hits_total", COUNTER, "Prefix cache hits, in terms of number of cached tokens.", l(), c.cache_hits as f64),
        (
            "vllm:request_success_total", COUNTER, "Count of successfully processed requests.",
            format!("engine=\"0\",finished_reason=\"length\",model_name=\"{model}\""),
            c.requests_finished as f64,
        ),
    ];
    if spec {
        rows.extend([
            ("vllm:spec_decode_num_drafts_total", COUNTER, "Number of spec decoding drafts.", l(), c.spec.steps as f64),
            ("vllm:spec_decode_num_draft_tokens_total", COUNTER, "Number of draft tokens.", l(), c.spec.draft_tokens as f64),
            ("vllm:spec_decode_num_accepted_tokens_total", COUNTER, "Number of accepted tokens.", l(), c.spec.accepted as f64),
        ]);
    }
    rows
}

#[rustfmt::skip]
fn sglang(c: &Counters, spec: bool, l: &str) -> Vec<Row> {
    let hit_rate = if c.cache_queries > 0 {
        c.cache_hits as f64 / c.cache_queries as f64
    } else {
        0.0
    };
    let device = format!("{l},cache_source=\"device\"");
    let l = || l.to_string();
    let mut rows: Vec<Row> = vec![
        ("sglang:num_running_reqs", GAUGE, "The number of running requests.", l(), c.active as f64),
        ("sglang:num_queue_reqs", GAUGE, "The number of requests in the waiting queue.", l(), 0.0),
        ("sglang:gen_throughput", GAUGE, "The generation throughput (token/s).", l(), c.last_gen_throughput),
        ("sglang:prompt_tokens_total", COUNTER, "Number of prefill tokens processed.", l(), c.prompt_tokens as f64),
        ("sglang:cached_tokens_total", COUNTER, "Number of cached prompt tokens.", device, c.cache_hits as f64),
        ("sglang:cache_hit_rate", GAUGE, "The prefix cache hit rate.", l(), hit_rate),
        ("sglang:generation_tokens_total", COUNTER, "Number of generation tokens processed.", l(), c.output_tokens as f64),
    ];
    if spec {
        rows.push((
            "sglang:spec_accept_length", GAUGE, "The average acceptance length of speculative decoding.",
            l(), c.spec.accept_len().unwrap_or(0.0),
        ));
    }
    rows
}
