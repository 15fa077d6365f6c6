//! The startup sequence: realistic log lines spread over `--startup-ms`, then the
//! flavor's ready line; or a startup crash or hang.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::args::{Flavor, Method};
use crate::engine::Shared;
use crate::faults;
use crate::logs::{self, Stream, Who};

/// One startup line: when it appears (fraction of the startup time) and what it is.
struct Step {
    at: f64,
    line: Line,
}

enum Line {
    /// The flavor's logger, from `who`, with vLLM's source tag.
    App(Who, &'static str, String),
    /// Written as is (uvicorn, NCCL).
    Raw(Stream, String),
}

fn app(at: f64, who: Who, src: &'static str, msg: impl Into<String>) -> Step {
    Step {
        at,
        line: Line::App(who, src, msg.into()),
    }
}

fn raw(at: f64, stream: Stream, text: impl Into<String>) -> Step {
    Step {
        at,
        line: Line::Raw(stream, text.into()),
    }
}

/// Point of the startup at which a startup crash strikes (after weight loading).
const CRASH_AT: f64 = 0.55;
/// Point after which a hung startup prints nothing more.
const HANG_AT: f64 = 0.6;

fn nccl_lines(shared: &Shared, at: f64) -> Vec<Step> {
    let pid = shared.style.pid;
    let tp = shared.args.tp;
    let mut v = Vec::new();
    for rank in 0..tp.min(8) {
        let tid = pid + 60 + rank;
        let host = format!("sim-node:{tid}:{tid}");
        if rank == 0 {
            v.push(raw(
                at,
                Stream::Stdout,
                format!("{host} [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>"),
            ));
            v.push(raw(
                at,
                Stream::Stdout,
                format!("{host} [0] NCCL INFO NCCL version 2.26.2+cuda12.8"),
            ));
        }
        v.push(raw(
            at,
            Stream::Stdout,
            format!(
                "{host} [{rank}] NCCL INFO Channel 00/24 : {}",
                (0..tp).map(|r| r.to_string()).collect::<Vec<_>>().join(" ")
            ),
        ));
        v.push(raw(
            at + 0.01,
            Stream::Stdout,
            format!(
                "{host} [{rank}] NCCL INFO ncclCommInitRank comm 0x55d0c3a{rank}e40 rank {rank} nranks {tp} cudaDev {rank} nvmlDev {rank} busId {}000 commId 0x5a1f0c2e9b7d4f11 - Init COMPLETE",
                18 + rank * 16
            ),
        ));
    }
    v
}

fn sglang_steps(shared: &Shared, port: u16) -> Vec<Step> {
    let a = &shared.args;
    let host = &a.host;
    let spec = match a.method {
        Method::None => "speculative_algorithm=None".to_string(),
        Method::Dflash => {
            "speculative_algorithm='DFLASH', speculative_num_draft_tokens=16".to_string()
        }
        Method::Ddtree => format!(
            "speculative_algorithm='DDTREE', speculative_num_draft_tokens={}",
            a.budget
        ),
    };
    let mut v = vec![
        app(0.0, Who::Main, "", format!(
            "server_args=ServerArgs(model_path='{m}', tokenizer_path='{m}', tokenizer_mode='auto', \
             context_length={ctx}, host='{host}', port={port}, mem_fraction_static=0.85, tp_size={tp}, \
             {spec}, random_seed={seed}, enable_metrics=True, log_level='info')",
            m = a.model, ctx = a.max_model_len, tp = a.tp, seed = a.seed,
        )),
        app(0.05, Who::Main, "", "Using default HuggingFace chat template with detected content format: string"),
    ];
    for rank in 0..a.tp.min(8) {
        v.push(app(
            0.1,
            Who::Rank(rank),
            "",
            "Attention backend not explicitly specified. Use flashinfer backend by default.",
        ));
        v.push(app(
            0.1,
            Who::Rank(rank),
            "",
            "Init torch distributed begin.",
        ));
    }
    if a.tp > 1 {
        v.push(app(0.12, Who::Rank(0), "", "sglang is using nccl==2.26.2"));
        v.extend(nccl_lines(shared, 0.13));
    }
    for rank in 0..a.tp.min(8) {
        v.push(app(
            0.15,
            Who::Rank(rank),
            "",
            "Init torch distributed ends. mem usage=0.41 GB",
        ));
        v.push(app(
            0.2,
            Who::Rank(rank),
            "",
            "Load weight begin. avail mem=138.92 GB",
        ));
    }
    v.push(raw(
        0.3,
        Stream::Stderr,
        "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
    ));
    v.push(raw(
        0.45,
        Stream::Stderr,
        "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.71it/s]",
    ));
    let kv = shared.kv_capacity();
    for rank in 0..a.tp.min(8) {
        v.push(app(0.5, Who::Rank(rank), "", format!(
            "Load weight end. type=Qwen3ForCausalLM, dtype=torch.bfloat16, avail mem={:.2} GB, mem usage={:.2} GB.",
            138.92 - 61.0 / f64::from(a.tp), 61.0 / f64::from(a.tp)
        )));
        v.push(app(
            0.6,
            Who::Rank(rank),
            "",
            format!("KV Cache is allocated. #tokens: {kv}, K size: 24.61 GB, V size: 24.61 GB"),
        ));
        v.push(app(
            0.62,
            Who::Rank(rank),
            "",
            "Memory pool end. avail mem=26.17 GB",
        ));
        v.push(app(
            0.65,
            Who::Rank(rank),
            "",
            "Capture cuda graph begin. This can take up to several minutes. avail mem=25.52 GB",
        ));
    }
    v.push(raw(
        0.7,
        Stream::Stderr,
        "Capturing batches (bs=256 avail_mem=25.40 GB):   0%|          | 0/35 [00:00<?, ?it/s]",
    ));
    v.push(raw(0.8, Stream::Stderr, "Capturing batches (bs=1 avail_mem=24.71 GB): 100%|██████████| 35/35 [00:03<00:00, 10.21it/s]"));
    for rank in 0..a.tp.min(8) {
        v.push(app(
            0.82,
            Who::Rank(rank),
            "",
            "Capture cuda graph end. Time elapsed: 3.43 s. mem usage=0.81 GB. avail mem=24.71 GB.",
        ));
    }
    v.push(app(
        0.85,
        Who::Rank(0),
        "",
        format!(
            "max_total_num_tokens={kv}, chunked_prefill_size=8192, max_prefill_tokens=16384, \
         max_running_requests=4096, context_len={}, available_gpu_mem=24.71 GB",
            a.max_model_len
        ),
    ));
    let pid = shared.style.pid;
    v.push(app(
        0.88,
        Who::Main,
        "",
        format!("INFO:     Started server process [{pid}]"),
    ));
    v.push(app(
        0.88,
        Who::Main,
        "",
        "INFO:     Waiting for application startup.",
    ));
    // SGLang's uvicorn says "startup complete" long before the server is ready.
    v.push(app(
        0.88,
        Who::Main,
        "",
        "INFO:     Application startup complete.",
    ));
    v.push(app(
        0.89,
        Who::Main,
        "",
        format!("INFO:     Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)"),
    ));
    v.push(raw(
        0.9,
        Stream::Stdout,
        logs::access_line("127.0.0.1:40560", "GET", "/get_model_info", "HTTP/1.1", 200),
    ));
    v.push(app(0.92, Who::Rank(0), "", "Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0"));
    v.push(raw(
        0.99,
        Stream::Stdout,
        logs::access_line("127.0.0.1:40562", "POST", "/generate", "HTTP/1.1", 200),
    ));
    v
}

fn vllm_steps(shared: &Shared, port: u16) -> Vec<Step> {
    let a = &shared.args;
    let host = &a.host;
    let spec = match a.method {
        Method::None => String::new(),
        Method::Dflash => {
            ", 'speculative_config': {'method': 'dflash', 'num_speculative_tokens': 15}".to_string()
        }
        Method::Ddtree => format!(
            ", 'speculative_config': {{'method': 'ddtree', 'num_speculative_tokens': {}}}",
            a.budget
        ),
    };
    let mut v = vec![
        app(0.0, Who::Main, "__init__.py:241", "Automatically detected platform cuda."),
        app(0.03, Who::Main, "api_server.py:1805", "vLLM API server version 0.10.1"),
        app(0.03, Who::Main, "utils.py:326", format!(
            "non-default args: {{'model': '{}', 'max_model_len': {}, 'tensor_parallel_size': {}, 'port': {port}{spec}}}",
            a.model, a.max_model_len, a.tp
        )),
        app(0.08, Who::Main, "__init__.py:711", "Resolved architecture: Qwen3ForCausalLM"),
        app(0.08, Who::Main, "__init__.py:1750", format!("Using max model len {}", a.max_model_len)),
        app(0.1, Who::Engine, "core.py:654", "Waiting for init message from front-end."),
        app(0.11, Who::Engine, "core.py:73", format!(
            "Initializing a V1 LLM engine (v0.10.1) with config: model='{m}', tokenizer='{m}', \
             dtype=torch.bfloat16, max_seq_len={}, tensor_parallel_size={}, seed={}",
            a.max_model_len, a.tp, a.seed, m = a.model
        )),
    ];
    for rank in 0..a.tp.min(8) {
        v.push(app(0.15, Who::Rank(rank), "parallel_state.py:1134", format!(
            "rank {rank} in world size {} is assigned as DP rank 0, PP rank 0, TP rank {rank}, EP rank {rank}",
            a.tp
        )));
    }
    if a.tp > 1 {
        v.push(app(
            0.16,
            Who::Rank(0),
            "pynccl.py:70",
            "vLLM is using nccl==2.26.2",
        ));
        v.extend(nccl_lines(shared, 0.17));
    }
    for rank in 0..a.tp.min(8) {
        v.push(app(
            0.2,
            Who::Rank(rank),
            "gpu_model_runner.py:1953",
            format!("Starting to load model {}...", a.model),
        ));
    }
    v.push(raw(
        0.3,
        Stream::Stderr,
        "Loading safetensors checkpoint shards:   0% Completed | 0/4 [00:00<?, ?it/s]",
    ));
    v.push(raw(
        0.45,
        Stream::Stderr,
        "Loading safetensors checkpoint shards: 100% Completed | 4/4 [00:02<00:00,  1.69it/s]",
    ));
    for rank in 0..a.tp.min(8) {
        v.push(app(
            0.5,
            Who::Rank(rank),
            "default_loader.py:262",
            "Loading weights took 2.38 seconds",
        ));
        v.push(app(
            0.52,
            Who::Rank(rank),
            "gpu_model_runner.py:2005",
            format!(
                "Model loading took {:.4} GiB and 2.91 seconds",
                61.03 / f64::from(a.tp)
            ),
        ));
        v.push(app(
            0.6,
            Who::Rank(rank),
            "gpu_worker.py:276",
            "Available KV cache memory: 49.22 GiB",
        ));
    }
    let kv = shared.kv_capacity();
    v.push(app(
        0.62,
        Who::Engine,
        "kv_cache_utils.py:849",
        format!("GPU KV cache size: {} tokens", group_thousands(kv)),
    ));
    v.push(app(
        0.62,
        Who::Engine,
        "kv_cache_utils.py:853",
        format!(
            "Maximum concurrency for {} tokens per request: {:.2}x",
            group_thousands(a.max_model_len),
            kv as f64 / a.max_model_len.max(1) as f64
        ),
    ));
    v.push(raw(0.7, Stream::Stderr, "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|██████████| 67/67 [00:02<00:00, 25.12it/s]"));
    for rank in 0..a.tp.min(8) {
        v.push(app(
            0.8,
            Who::Rank(rank),
            "gpu_model_runner.py:2708",
            "Graph capturing finished in 3 secs, took 0.74 GiB",
        ));
    }
    v.push(app(
        0.82,
        Who::Engine,
        "core.py:214",
        "init engine (profile, create kv cache, warmup model) took 14.87 seconds",
    ));
    v.push(app(
        0.85,
        Who::Main,
        "loggers.py:142",
        format!(
            "Engine 000: vllm cache_config_info with initialization after num_gpu_blocks is: {}",
            kv / 16
        ),
    ));
    v.push(app(
        0.87,
        Who::Main,
        "api_server.py:1611",
        "Supported_tasks: ['generate']",
    ));
    v.push(app(
        0.88,
        Who::Main,
        "api_server.py:1880",
        format!("Starting vLLM API server 0 on http://{host}:{port}"),
    ));
    v.push(app(
        0.88,
        Who::Main,
        "launcher.py:29",
        "Available routes are:",
    ));
    for route in [
        "/health",
        "/tokenize",
        "/v1/models",
        "/v1/chat/completions",
        "/v1/completions",
        "/metrics",
    ] {
        let method = if route.starts_with("/v1/c") || route == "/tokenize" {
            "POST"
        } else {
            "GET"
        };
        v.push(app(
            0.88,
            Who::Main,
            "launcher.py:37",
            format!("Route: {route}, Methods: {method}"),
        ));
    }
    let pid = shared.style.pid;
    v.push(raw(
        0.9,
        Stream::Stderr,
        format!("INFO:     Started server process [{pid}]"),
    ));
    v.push(raw(
        0.9,
        Stream::Stderr,
        "INFO:     Waiting for application startup.",
    ));
    v
}

fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn print(shared: &Shared, line: &Line) {
    match line {
        Line::App(who, src, msg) => shared.style.info(*who, src, msg),
        Line::Raw(stream, text) => logs::line(*stream, text.clone()),
    }
}

/// Runs the startup: prints its lines on schedule, then marks the server ready and
/// prints the ready line. A startup crash never returns; a startup hang pends.
pub async fn run(shared: Arc<Shared>, port: u16) {
    let total = Duration::from_millis(shared.args.startup_ms);
    let steps = match shared.args.flavor {
        Flavor::Sglang => sglang_steps(&shared, port),
        Flavor::Vllm => vllm_steps(&shared, port),
    };
    let crash = shared.args.startup_crash();
    let hang = shared.args.startup_hang();
    let start = tokio::time::Instant::now();
    for step in &steps {
        let stop_at = if crash.is_some() {
            Some(CRASH_AT)
        } else if hang {
            Some(HANG_AT)
        } else {
            None
        };
        if stop_at.is_some_and(|s| step.at >= s) {
            break;
        }
        tokio::time::sleep_until(start + total.mul_f64(step.at)).await;
        print(&shared, &step.line);
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
        hang_forever(&shared).await;
    }
    tokio::time::sleep_until(start + total).await;
    shared.ready.store(true, Ordering::Release);
    match shared.args.flavor {
        Flavor::Sglang => {
            shared
                .style
                .info(Who::Main, "", "The server is fired up and ready to roll!")
        }
        Flavor::Vllm => {
            logs::line(
                Stream::Stderr,
                "INFO:     Application startup complete.".to_string(),
            );
            logs::line(
                Stream::Stderr,
                format!(
                    "INFO:     Uvicorn running on http://{}:{port} (Press CTRL+C to quit)",
                    shared.args.host
                ),
            );
        }
    }
}

/// A hung startup: vLLM's shared-memory broadcast complains now and then; SGLang
/// is silent.
async fn hang_forever(shared: &Shared) -> ! {
    loop {
        tokio::time::sleep(Duration::from_secs(10)).await;
        if shared.args.flavor == Flavor::Vllm {
            shared.style.info(
                Who::Engine,
                "shm_broadcast.py:466",
                "No available shared memory broadcast block found in 60 second. This typically \
                 happens when some processes are hanging or doing some time-consuming work (e.g. \
                 compilation).",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(32768), "32,768");
        assert_eq!(group_thousands(1_234_567), "1,234,567");
    }
}
