//! Throughput of log classification on a typical server log.
//!
//! Run: `cargo bench --bench classify` (release profile). Prints
//! `classify: NNN MB/s` for `LogPatterns::classify` and `watch: NNN MB/s`
//! for `LogWatch::push` (classification plus the bounded tail).

use std::sync::Arc;
use std::time::Instant;

use sweeptop::detect::{LineClass, LogPatterns, LogWatch};

/// Lines in the proportions a busy server log has: mostly decode/request
/// chatter, some NCCL and warning lines, a rare fatal line.
const TYPICAL: &[&str] = &[
    "[2025-08-13 15:11:00 TP0] Decode batch. #running-req: 8, #token: 12000, token usage: 0.06, cuda graph: True, gen throughput (token/s): 880.12, #queue-req: 0",
    "[2025-08-13 15:11:00 TP0] Decode batch. #running-req: 1, #token: 2345, token usage: 0.01, accept len: 3.42, cuda graph: True, gen throughput (token/s): 143.20, #queue-req: 0",
    "[2025-08-13 15:11:00 TP0] Prefill batch. #new-seq: 1, #new-token: 8192, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0",
    "[2025-08-13 15:11:00] INFO:     127.0.0.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
    "INFO 08-13 15:11:00 [loggers.py:118] Engine 000: Avg prompt throughput: 3276.8 tokens/s, Avg generation throughput: 95.1 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 2.1%, Prefix cache hit rate: 0.0%",
    "INFO:     127.0.0.1:51234 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
    "\u{1b}[1;36m(APIServer pid=1)\u{1b}[0;0m INFO 08-13 15:11:00 [logger.py:43] Received request chatcmpl-5f2c: prompt: '', params: SamplingParams(n=1, temperature=0.0, max_tokens=256), lora_request: None.",
    "slot update_slots: id  0 | task 12 | n_past = 4096, n_cache_tokens = 4096, prompt processing progress = 0.50",
    "node1:409:409 [0] NCCL INFO Channel 00/24 : 0 1 2 3 4 5 6 7",
    "WARNING 08-13 15:11:30 [scheduler.py:1560] Sequence group 42 is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space.",
];
const FATAL: &[&str] = &[
    "[2025-08-13 15:12:48 DP3 TP3 EP3] RuntimeError: CUDA error: an illegal instruction was encountered",
    "(EngineCore_0 pid=123) torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    "[rank1]:[E813 15:12:48] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE) ran for 600025 milliseconds before timing out.",
];

fn build_log(target_bytes: usize) -> Vec<String> {
    // Weights: decode lines dominate; one fatal line per ~1000.
    let weights = [30usize, 15, 5, 20, 8, 10, 5, 3, 3, 1];
    let mut lines = Vec::new();
    let mut bytes = 0;
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    while bytes < target_bytes {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let line = if state.is_multiple_of(1000) {
            FATAL[(state / 1000 % FATAL.len() as u64) as usize]
        } else {
            let total: usize = weights.iter().sum();
            let mut pick = (state % total as u64) as usize;
            let mut idx = 0;
            for (i, w) in weights.iter().enumerate() {
                if pick < *w {
                    idx = i;
                    break;
                }
                pick -= w;
            }
            TYPICAL[idx]
        };
        bytes += line.len() + 1;
        lines.push(line.to_string());
    }
    lines
}

fn main() {
    let lines = build_log(50 << 20);
    let total: usize = lines.iter().map(|l| l.len() + 1).sum();
    let mb = total as f64 / (1 << 20) as f64;

    let patterns = LogPatterns::builtin();
    // Warm up (builds the automaton and regexes once).
    let _ = patterns.classify(&lines[0]);

    let mut best = f64::MAX;
    let mut fatal = 0usize;
    for _ in 0..3 {
        fatal = 0;
        let start = Instant::now();
        for line in &lines {
            if let LineClass::Fatal(_) = patterns.classify(line) {
                fatal += 1;
            }
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let classify = mb / best;
    println!(
        "classify: {classify:.0} MB/s ({mb:.1} MB, {} lines, {fatal} fatal, best of 3)",
        lines.len()
    );

    let mut best = f64::MAX;
    for _ in 0..3 {
        let mut watch = LogWatch::new(Arc::new(patterns.clone()));
        let start = Instant::now();
        for line in &lines {
            watch.push(line);
        }
        best = best.min(start.elapsed().as_secs_f64());
        assert!(watch.first_fatal().is_some());
    }
    println!("watch: {:.0} MB/s (LogWatch::push, best of 3)", mb / best);
    let ok = |b: bool| if b { "met" } else { "NOT met" };
    println!("\n| figure | target | measured | |");
    println!("|---|---|---:|---|");
    println!(
        "| classify, one core | ≥ 500 MB/s | {classify:.0} MB/s | {} |",
        ok(classify >= 500.0)
    );
    println!(
        "| LogWatch::push, one core | ≥ 500 MB/s | {:.0} MB/s | {} |",
        mb / best,
        ok(mb / best >= 500.0)
    );
}
