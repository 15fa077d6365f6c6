//! Injected faults: what each crash kind prints (in the flavor's style, per TP
//! rank) and how the process then dies, plus the log flood thread.
//!
//! The wording follows shared/FAILURE_SIGNATURES.md; the tracebacks are shaped
//! like the real servers' (SGLang scheduler exceptions, vLLM EngineCore / worker
//! errors, c10d watchdog noise) but are written here, not copied.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::args::{CrashKind, Flavor};
use crate::engine::{Phase, Shared};
use crate::logs::{self, Clock, Level, Stream, Style, Who};

const PY: &str = "/usr/local/lib/python3.12/dist-packages";
const TORCH_LIB: &str = "/usr/local/lib/python3.12/dist-packages/torch/lib";

/// vLLM's message for requests in flight when the engine dies.
pub const ENGINE_DEAD_MESSAGE: &str =
    "EngineCore encountered an issue. See stack trace (above) for the root cause.";

const CUDA_TRAILER: [&str; 3] = [
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
];

/// How the process ends after its error output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Death {
    Exit(i32),
    Signal(libc::c_int),
}

/// Where in the server's life a crash happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    Startup,
    Serving,
}

/// A crash report: blocks of lines, each written together to one stream.
#[derive(Debug, Default)]
pub struct Report {
    pub blocks: Vec<(Stream, Vec<String>)>,
}

impl Report {
    fn err(&mut self, lines: Vec<String>) {
        self.blocks.push((Stream::Stderr, lines));
    }

    /// Everything the report prints, in order.
    #[cfg(test)]
    pub fn text(&self) -> String {
        let mut s = String::new();
        for (_, lines) in &self.blocks {
            for l in lines {
                s.push_str(l);
                s.push('\n');
            }
        }
        s
    }
}

/// Begins a crash: streams stop at once (vLLM's end with an in-stream error), the
/// report is written, and the process dies the way the real server would.
pub fn start_crash(shared: Arc<Shared>, kind: CrashKind) {
    let vllm_reports_in_stream = shared.args.flavor == Flavor::Vllm
        && !matches!(
            kind,
            CrashKind::SignalCrash | CrashKind::OomKilled | CrashKind::ServerExited
        );
    shared.set_phase(Phase::Dying {
        stream_error: vllm_reports_in_stream.then(|| ENGINE_DEAD_MESSAGE.to_string()),
    });
    let style = shared.style.clone();
    let tp = shared.args.tp;
    let die = move || {
        let (report, death) = crash_report(&style, tp, kind, When::Serving);
        write_report(&report);
        if vllm_reports_in_stream {
            // Let the in-stream errors reach the clients before the sockets close.
            std::thread::sleep(Duration::from_millis(150));
        }
        end_process(death)
    };
    if std::thread::Builder::new()
        .name("sim-crash".into())
        .spawn(die.clone())
        .is_err()
    {
        die();
    }
}

/// Dies during startup with `kind`'s output.
pub fn startup_crash(style: &Style, tp: u32, kind: CrashKind) -> ! {
    let (report, death) = crash_report(style, tp, kind, When::Startup);
    write_report(&report);
    end_process(death)
}

fn write_report(report: &Report) {
    for (stream, lines) in &report.blocks {
        logs::lines(*stream, lines.clone());
    }
    logs::flush(Duration::from_secs(3));
}

/// Ends the process: exit code, or a signal with its default action.
pub fn end_process(death: Death) -> ! {
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    match death {
        Death::Exit(code) => std::process::exit(code),
        Death::Signal(sig) => {
            // SAFETY: plain libc calls on this process; the default action of these
            // signals ends it. No core file: a simulated segfault needs none.
            unsafe {
                let no_core = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                libc::setrlimit(libc::RLIMIT_CORE, &no_core);
                libc::signal(sig, libc::SIG_DFL);
                libc::kill(libc::getpid(), sig);
            }
            std::thread::sleep(Duration::from_secs(1));
            std::process::exit(128 + sig)
        }
    }
}

fn is_cuda_kind(kind: CrashKind) -> bool {
    !matches!(
        kind,
        CrashKind::SignalCrash | CrashKind::OomKilled | CrashKind::ServerExited
    )
}

/// The report for `kind` and how the process dies after it.
pub fn crash_report(style: &Style, tp: u32, kind: CrashKind, when: When) -> (Report, Death) {
    let mut r = Report::default();
    match kind {
        CrashKind::OomKilled => {
            r.err(vec!["Killed".to_string()]);
            return (r, Death::Signal(libc::SIGKILL));
        }
        CrashKind::ServerExited => return (r, Death::Exit(1)),
        CrashKind::SignalCrash => {
            r.err(faulthandler_dump(style.flavor, when, "Segmentation fault"));
            return (r, Death::Signal(libc::SIGSEGV));
        }
        _ => {}
    }
    debug_assert!(is_cuda_kind(kind));
    let ranks = tp.clamp(1, 8);
    for rank in 0..ranks {
        let pre = before_traceback(kind, rank, when);
        if !pre.is_empty() {
            r.err(pre);
        }
    }
    match style.flavor {
        Flavor::Sglang => sglang_report(style, ranks, kind, when, &mut r),
        Flavor::Vllm => vllm_report(style, ranks, kind, when, &mut r),
    }
    match style.flavor {
        // The scheduler signals its parent, which kills its whole process tree.
        Flavor::Sglang => (r, Death::Signal(libc::SIGKILL)),
        Flavor::Vllm => (r, Death::Exit(1)),
    }
}

/// The exception lines that end a traceback for `kind`.
fn exception_lines(kind: CrashKind, flavor: Flavor, when: When) -> Vec<String> {
    let cuda = |exc: &str, what: &str| {
        let mut v = vec![format!("{exc}: CUDA error: {what}")];
        v.extend(CUDA_TRAILER.iter().map(|s| s.to_string()));
        v.push(String::new());
        v
    };
    match kind {
        CrashKind::CudaIllegalInstruction => cuda(
            "torch.AcceleratorError",
            "an illegal instruction was encountered",
        ),
        CrashKind::CudaIllegalAddress => {
            cuda("RuntimeError", "an illegal memory access was encountered")
        }
        CrashKind::DeviceAssert => cuda("RuntimeError", "device-side assert triggered"),
        CrashKind::NoKernelImage => cuda(
            "RuntimeError",
            "no kernel image is available for execution on the device",
        ),
        CrashKind::CudaOom => match (when, flavor) {
            (When::Startup, Flavor::Sglang) => vec![
                "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
                    .to_string(),
            ],
            (When::Startup, Flavor::Vllm) => vec![
                "ValueError: No available memory for the cache blocks. Try increasing \
                 `gpu_memory_utilization` when initializing the engine."
                    .to_string(),
            ],
            (When::Serving, _) => vec![
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 \
                 has a total capacity of 139.81 GiB of which 1.06 GiB is free. Including \
                 non-PyTorch memory, this process has 138.74 GiB memory in use. Of the allocated \
                 memory 131.92 GiB is allocated by PyTorch, and 4.87 GiB is reserved by PyTorch \
                 but unallocated. If reserved but unallocated memory is large try setting \
                 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See \
                 documentation for Memory Management  \
                 (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
                    .to_string(),
            ],
        },
        CrashKind::NcclError => vec![
            "torch.distributed.DistBackendError: NCCL error in: \
             /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled system error (run \
             with NCCL_DEBUG=INFO for details), NCCL version 2.26.2"
                .to_string(),
            "ncclSystemError: System call (e.g. socket, malloc) or external library call failed \
             or device error. "
                .to_string(),
            "Last error:".to_string(),
            "socketProgress: Connection closed by remote peer sim-node<38291>".to_string(),
        ],
        CrashKind::TritonError => vec![
            "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: \
             262144, Hardware limit: 101376. Reducing block sizes or `num_stages` may help."
                .to_string(),
        ],
        // The engine dies of something no pattern knows; only its death is telling.
        CrashKind::EngineDead => vec!["IndexError: list index out of range".to_string()],
        CrashKind::SignalCrash | CrashKind::OomKilled | CrashKind::ServerExited => Vec::new(),
    }
}

/// Lines some kinds print before the Python traceback (kernel asserts, the c10d
/// watchdog, PyTorch's architecture warning).
fn before_traceback(kind: CrashKind, rank: u32, when: When) -> Vec<String> {
    match kind {
        CrashKind::DeviceAssert => (0..4)
            .map(|i| {
                format!(
                    "/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:94: operator(): block: \
                     [{},0,0], thread: [{},0,0] Assertion `-sizes[i] <= index && index < \
                     sizes[i] && \"index out of bounds\"` failed.",
                    17 + rank * 3,
                    32 + i * 32
                )
            })
            .collect(),
        CrashKind::NcclError => vec![format!(
            "[rank{rank}]:[E{} ProcessGroupNCCL.cpp:685] [Rank {rank}] Watchdog caught collective \
             operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=4194304, \
             NumelOut=4194304, Timeout(ms)=600000) ran for 600043 milliseconds before timing out.",
            Clock::now().glog_time()
        )],
        CrashKind::NoKernelImage if rank == 0 && when == When::Startup => vec![
            format!("{PY}/torch/cuda/__init__.py:287: UserWarning: "),
            "NVIDIA RTX PRO 6000 Blackwell Workstation Edition with CUDA capability sm_120 is not \
             compatible with the current PyTorch installation."
                .to_string(),
            "The current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 \
             sm_80 sm_86 sm_90."
                .to_string(),
            "If you want to use the NVIDIA RTX PRO 6000 Blackwell Workstation Edition GPU with \
             PyTorch, please check the instructions at https://pytorch.org/get-started/locally/"
                .to_string(),
            String::new(),
            "  warnings.warn(".to_string(),
        ],
        _ => Vec::new(),
    }
}

/// c10d watchdog output after an asynchronous CUDA error: its own DistBackendError,
/// then an abort. Detection must let the first fatal cause win over this.
fn watchdog_noise(kind: CrashKind, rank: u32) -> Vec<String> {
    let what = match kind {
        CrashKind::CudaIllegalInstruction => "an illegal instruction was encountered",
        CrashKind::CudaIllegalAddress => "an illegal memory access was encountered",
        _ => return Vec::new(),
    };
    let head = format!(
        "[PG ID 2 PG GUID 3 Rank {rank}] Process group watchdog thread terminated with \
         exception: CUDA error: {what}"
    );
    let frames = |from: &str, at: &str| {
        let mut v = vec![format!(
            "Exception raised from {from} at {at} (most recent call first):"
        )];
        let libs = [
            ("c10::Error::Error(c10::SourceLocation, std::string) + 0x98", "libc10.so"),
            (
                "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool) + 0x3c2",
                "libc10_cuda.so",
            ),
            (
                "c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x56",
                "libtorch_cuda.so",
            ),
            ("c10d::ProcessGroupNCCL::watchdogHandler() + 0x617", "libtorch_cuda.so"),
            ("c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x14d", "libtorch_cuda.so"),
        ];
        for (i, (sym, lib)) in libs.iter().enumerate() {
            v.push(format!(
                "frame #{i}: {sym} (0x7f3a1c{:06x} in {TORCH_LIB}/{lib})",
                0x3785e8 + i * 0x1c4a1 + rank as usize * 0x100
            ));
        }
        v.push(
            "frame #5: <unknown function> + 0xdc253 (0x7f3a5b0b0253 in /lib/x86_64-linux-gnu/libstdc++.so.6)"
                .to_string(),
        );
        v.push(
            "frame #6: <unknown function> + 0x94ac3 (0x7f3a5d6c4ac3 in /lib/x86_64-linux-gnu/libc.so.6)"
                .to_string(),
        );
        v.push(String::new());
        v
    };
    let mut v = vec![format!(
        "[rank{rank}]:[E{} ProcessGroupNCCL.cpp:1899] {head}",
        Clock::now().glog_time()
    )];
    v.extend(CUDA_TRAILER.iter().map(|s| s.to_string()));
    v.push(String::new());
    v.extend(frames(
        "c10_cuda_check_implementation",
        "/pytorch/c10/cuda/CUDAException.cpp:43",
    ));
    v.push("terminate called after throwing an instance of 'c10::DistBackendError'".to_string());
    v.push(format!("  what():  {head}"));
    v.extend(CUDA_TRAILER.iter().map(|s| s.to_string()));
    v.push(String::new());
    v.extend(frames(
        "ncclCommWatchdog",
        "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1905",
    ));
    v.push("Fatal Python error: Aborted".to_string());
    v.push(String::new());
    v
}

fn frame(file: &str, line: u32, func: &str, code: &str) -> [String; 2] {
    [
        format!("  File \"{PY}/{file}\", line {line}, in {func}"),
        format!("    {code}"),
    ]
}

/// Python frames of the failing call, innermost last.
fn sglang_frames(kind: CrashKind, when: When) -> Vec<String> {
    let mut f: Vec<[String; 2]> = Vec::new();
    match when {
        When::Startup => {
            f.push(frame(
                "sglang/srt/managers/scheduler.py",
                2712,
                "run_scheduler_process",
                "scheduler = Scheduler(",
            ));
            f.push(frame(
                "sglang/srt/managers/scheduler.py",
                331,
                "__init__",
                "self.tp_worker = TpWorkerClass(",
            ));
            f.push(frame(
                "sglang/srt/managers/tp_worker.py",
                84,
                "__init__",
                "self.model_runner = ModelRunner(",
            ));
            f.push(frame(
                "sglang/srt/model_executor/model_runner.py",
                241,
                "__init__",
                "self.initialize(min_per_gpu_memory)",
            ));
            if kind == CrashKind::CudaOom {
                f.push(frame(
                    "sglang/srt/model_executor/model_runner.py",
                    322,
                    "initialize",
                    "self.init_memory_pool(",
                ));
                f.push(frame(
                    "sglang/srt/model_executor/model_runner.py",
                    1265,
                    "init_memory_pool",
                    "raise RuntimeError(",
                ));
            } else {
                f.push(frame(
                    "sglang/srt/model_executor/model_runner.py",
                    298,
                    "initialize",
                    "self.load_model()",
                ));
                f.push(frame(
                    "sglang/srt/model_executor/model_runner.py",
                    701,
                    "load_model",
                    "torch.cuda.synchronize()",
                ));
            }
        }
        When::Serving => {
            f.push(frame(
                "sglang/srt/managers/scheduler.py",
                2731,
                "run_scheduler_process",
                "scheduler.event_loop_overlap()",
            ));
            f.push(frame(
                "torch/utils/_contextlib.py",
                120,
                "decorate_context",
                "return func(*args, **kwargs)",
            ));
            f.push(frame(
                "sglang/srt/managers/scheduler.py",
                812,
                "event_loop_overlap",
                "self.process_batch_result(tmp_batch, tmp_result)",
            ));
            f.push(frame(
                "sglang/srt/managers/scheduler.py",
                1944,
                "process_batch_result",
                "self.process_batch_result_decode(batch, result, launch_done)",
            ));
            let last = match kind {
                CrashKind::TritonError => frame(
                    "triton/runtime/jit.py",
                    591,
                    "run",
                    "kernel = self._do_compile(key, signature, device, constants, options, attrs, warmup)",
                ),
                CrashKind::EngineDead => frame(
                    "sglang/srt/managers/scheduler_output_processor_mixin.py",
                    231,
                    "process_batch_result_decode",
                    "req = batch.reqs[i]",
                ),
                _ => frame(
                    "sglang/srt/managers/scheduler_output_processor_mixin.py",
                    218,
                    "process_batch_result_decode",
                    "next_token_ids = next_token_ids.tolist()",
                ),
            };
            f.push(last);
        }
    }
    f.into_iter().flatten().collect()
}

fn sglang_report(style: &Style, ranks: u32, kind: CrashKind, when: When, r: &mut Report) {
    for rank in 0..ranks {
        let mut lines = vec![style.fmt(
            Who::Rank(rank),
            Level::Error,
            "",
            "Scheduler hit an exception: Traceback (most recent call last):",
        )];
        lines.extend(sglang_frames(kind, when));
        lines.extend(exception_lines(kind, Flavor::Sglang, when));
        r.err(lines);
        if when == When::Serving {
            r.err(watchdog_noise(kind, rank));
        }
    }
    r.err(vec![style.fmt(
        Who::Main,
        Level::Error,
        "",
        "Received sigquit from a child process. It usually means the child failed.",
    )]);
}

fn vllm_engine_frames(kind: CrashKind, when: When, multiproc: bool) -> Vec<String> {
    let mut f: Vec<[String; 2]> = Vec::new();
    match when {
        When::Startup => {
            f.push(frame(
                "vllm/v1/engine/core.py",
                699,
                "run_engine_core",
                "engine_core = EngineCoreProc(*args, **kwargs)",
            ));
            f.push(frame(
                "vllm/v1/engine/core.py",
                498,
                "__init__",
                "super().__init__(vllm_config, executor_class, log_stats,",
            ));
            if kind == CrashKind::CudaOom {
                f.push(frame(
                    "vllm/v1/engine/core.py",
                    92,
                    "__init__",
                    "self._initialize_kv_caches(vllm_config)",
                ));
                f.push(frame(
                    "vllm/v1/engine/core.py",
                    199,
                    "_initialize_kv_caches",
                    "kv_cache_configs = get_kv_cache_configs(vllm_config, kv_cache_specs,",
                ));
                f.push(frame(
                    "vllm/v1/core/kv_cache_utils.py",
                    1122,
                    "get_kv_cache_configs",
                    "check_enough_kv_cache_memory(vllm_config, kv_cache_spec_one_worker,",
                ));
                f.push(frame(
                    "vllm/v1/core/kv_cache_utils.py",
                    686,
                    "check_enough_kv_cache_memory",
                    "raise ValueError(\"No available memory for the cache blocks. \"",
                ));
            } else {
                f.push(frame(
                    "vllm/v1/engine/core.py",
                    83,
                    "__init__",
                    "self.model_executor = executor_class(vllm_config)",
                ));
                f.push(frame(
                    "vllm/v1/worker/gpu_model_runner.py",
                    2070,
                    "load_model",
                    "self.model = model_loader.load_model(",
                ));
            }
        }
        When::Serving => {
            f.push(frame(
                "vllm/v1/engine/core.py",
                701,
                "run_engine_core",
                "engine_core.run_busy_loop()",
            ));
            f.push(frame(
                "vllm/v1/engine/core.py",
                728,
                "run_busy_loop",
                "self._process_engine_step()",
            ));
            f.push(frame(
                "vllm/v1/engine/core.py",
                754,
                "_process_engine_step",
                "outputs, model_executed = self.step_fn()",
            ));
            f.push(frame(
                "vllm/v1/engine/core.py",
                284,
                "step",
                "model_output = self.execute_model_with_error_logging(",
            ));
            f.push(frame(
                "vllm/v1/engine/core.py",
                270,
                "execute_model_with_error_logging",
                "raise err",
            ));
            if multiproc {
                f.push(frame(
                    "vllm/v1/executor/multiproc_executor.py",
                    303,
                    "collective_rpc",
                    "raise RuntimeError(",
                ));
            } else {
                f.push(frame(
                    "vllm/v1/worker/gpu_model_runner.py",
                    1643,
                    "execute_model",
                    match kind {
                        CrashKind::TritonError => "hidden_states = self.model(",
                        _ => "valid_sampled_token_ids = sampled_token_ids.tolist()",
                    },
                ));
            }
        }
    }
    f.into_iter().flatten().collect()
}

fn vllm_worker_frames(kind: CrashKind) -> Vec<String> {
    let mut f = vec![
        frame(
            "vllm/v1/executor/multiproc_executor.py",
            591,
            "worker_busy_loop",
            "output = func(*args, **kwargs)",
        ),
        frame(
            "vllm/v1/worker/gpu_worker.py",
            362,
            "execute_model",
            "output = self.model_runner.execute_model(scheduler_output,",
        ),
    ];
    f.push(match kind {
        CrashKind::TritonError => frame(
            "triton/runtime/jit.py",
            591,
            "run",
            "kernel = self._do_compile(key, signature, device, constants, options, attrs, warmup)",
        ),
        _ => frame(
            "vllm/v1/worker/gpu_model_runner.py",
            1643,
            "execute_model",
            "valid_sampled_token_ids = sampled_token_ids.tolist()",
        ),
    });
    f.into_iter().flatten().collect()
}

/// Prefixes every line with the vLLM logger's prefix (its formatter does that for
/// multi-line messages).
fn vllm_prefixed(style: &Style, who: Who, source: &str, lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| style.fmt(who, Level::Error, source, l))
        .collect()
}

fn vllm_report(style: &Style, ranks: u32, kind: CrashKind, when: When, r: &mut Report) {
    let multiproc = ranks > 1 && when == When::Serving;
    let exc = exception_lines(kind, Flavor::Vllm, when);
    let tb = "Traceback (most recent call last):".to_string();
    if multiproc {
        for rank in 0..ranks {
            let mut body = vec!["WorkerProc hit an exception.".to_string(), tb.clone()];
            body.extend(vllm_worker_frames(kind));
            body.extend(exc.iter().cloned());
            r.err(vllm_prefixed(
                style,
                Who::Rank(rank),
                "multiproc_executor.py:597",
                &body,
            ));
            r.err(watchdog_noise(kind, rank));
        }
    }
    let first = match when {
        When::Startup => "EngineCore failed to start.",
        When::Serving => "EngineCore encountered a fatal error.",
    };
    let mut body = vec![first.to_string(), tb.clone()];
    body.extend(vllm_engine_frames(kind, when, multiproc));
    if multiproc {
        body.push(format!(
            "RuntimeError: Worker failed with error '{}', please check the stack trace above \
             for the root cause",
            // str(exception): the message without the exception's type.
            exc.first()
                .and_then(|l| l.split_once(": ").map(|(_, m)| m))
                .unwrap_or_default()
        ));
    } else {
        body.extend(exc.iter().cloned());
    }
    r.err(vllm_prefixed(style, Who::Engine, "core.py:710", &body));
    if !multiproc && when == When::Serving {
        r.err(watchdog_noise(kind, 0));
    }
    match when {
        When::Startup => {
            let mut v = vec![tb];
            v.extend(
                [
                    (
                        "vllm/entrypoints/cli/main.py",
                        54,
                        "main",
                        "args.dispatch_function(args)",
                    ),
                    (
                        "vllm/entrypoints/openai/api_server.py",
                        1884,
                        "run_server",
                        "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
                    ),
                    (
                        "vllm/v1/engine/utils.py",
                        691,
                        "wait_for_engine_startup",
                        "raise RuntimeError(\"Engine core initialization failed. \"",
                    ),
                ]
                .iter()
                .flat_map(|(file, line, func, code)| frame(file, *line, func, code)),
            );
            v.push(
                "RuntimeError: Engine core initialization failed. See root cause above. Failed \
                 core proc(s): {}"
                    .to_string(),
            );
            r.err(v);
        }
        When::Serving => {
            if kind == CrashKind::EngineDead {
                r.err(vec![style.fmt(
                    Who::Main,
                    Level::Error,
                    "core_client.py:564",
                    "Engine core proc EngineCore_0 died unexpectedly, shutting down client.",
                )]);
            }
            let mut body = vec!["AsyncLLM output_handler failed.".to_string(), tb];
            body.extend(
                frame(
                    "vllm/v1/engine/async_llm.py",
                    380,
                    "output_handler",
                    "outputs = await engine_core.get_output_async()",
                )
                .into_iter()
                .chain(frame(
                    "vllm/v1/engine/core_client.py",
                    751,
                    "get_output_async",
                    "raise self._format_exception(outputs) from None",
                )),
            );
            body.push(format!(
                "vllm.v1.engine.exceptions.EngineDeadError: {ENGINE_DEAD_MESSAGE}"
            ));
            r.err(vllm_prefixed(style, Who::Main, "async_llm.py:420", &body));
            r.err(vec![
                style.fmt(
                    Who::Main,
                    Level::Error,
                    "launcher.py:101",
                    "AsyncLLMEngine has failed, terminating server process",
                ),
                "INFO:     Shutting down".to_string(),
                "INFO:     Waiting for application shutdown.".to_string(),
                "INFO:     Application shutdown complete.".to_string(),
                format!("INFO:     Finished server process [{}]", style.pid),
            ]);
        }
    }
}

/// Python's faulthandler dump for a fatal signal.
fn faulthandler_dump(flavor: Flavor, when: When, signal_name: &str) -> Vec<String> {
    let site = |file: &str, line: u32, func: &str| {
        format!("  File \"{PY}/{file}\", line {line} in {func}")
    };
    let mut v = vec![
        format!("Fatal Python error: {signal_name}"),
        String::new(),
        "Thread 0x00007f2b8bfff640 (most recent call first):".to_string(),
        "  File \"/usr/lib/python3.12/threading.py\", line 359 in wait".to_string(),
        "  File \"/usr/lib/python3.12/threading.py\", line 1075 in _bootstrap_inner".to_string(),
        "  File \"/usr/lib/python3.12/threading.py\", line 1032 in _bootstrap".to_string(),
        String::new(),
        "Current thread 0x00007f2d3a1f4740 (most recent call first):".to_string(),
    ];
    match (flavor, when) {
        (Flavor::Sglang, When::Serving) => v.extend([
            site(
                "sglang/srt/layers/attention/flashinfer_backend.py",
                521,
                "forward_decode",
            ),
            site("sglang/srt/layers/radix_attention.py", 108, "forward"),
            site("torch/nn/modules/module.py", 1784, "_call_impl"),
            site(
                "sglang/srt/model_executor/model_runner.py",
                1702,
                "forward_decode",
            ),
            site(
                "sglang/srt/managers/scheduler.py",
                812,
                "event_loop_overlap",
            ),
        ]),
        (Flavor::Vllm, When::Serving) => v.extend([
            site("vllm/attention/backends/flashinfer.py", 1030, "forward"),
            site("torch/nn/modules/module.py", 1784, "_call_impl"),
            site("vllm/v1/worker/gpu_model_runner.py", 1593, "execute_model"),
            site("vllm/v1/engine/core.py", 728, "run_busy_loop"),
        ]),
        (Flavor::Sglang, When::Startup) => v.extend([
            site(
                "sglang/srt/model_executor/model_runner.py",
                701,
                "load_model",
            ),
            site(
                "sglang/srt/managers/scheduler.py",
                2712,
                "run_scheduler_process",
            ),
        ]),
        (Flavor::Vllm, When::Startup) => v.extend([
            site("vllm/v1/worker/gpu_model_runner.py", 2070, "load_model"),
            site("vllm/v1/engine/core.py", 699, "run_engine_core"),
        ]),
    }
    v.push(String::new());
    v.push(
        "Extension modules: numpy._core._multiarray_umath, torch._C, torch._C._dynamo.autograd_compiler, \
         torch._C._fft, torch._C._linalg, torch._C._nn, yaml._yaml, zmq.backend.cython._zmq, \
         sentencepiece._sentencepiece (total: 97)"
            .to_string(),
    );
    v
}

/// Starts the log flood: benign lines to stderr at `mb_per_s`, on its own OS
/// thread so that a slow reader or a busy writer never touches token pacing.
pub fn start_flood(style: Style, mb_per_s: f64) {
    let spawned = std::thread::Builder::new()
        .name("sim-flood".into())
        .spawn(move || flood(style, mb_per_s));
    if let Err(e) = spawned {
        logs::line(
            Stream::Stderr,
            format!("sim: cannot start the log flood: {e}"),
        );
    }
}

fn flood(style: Style, mb_per_s: f64) {
    const TICK: Duration = Duration::from_millis(10);
    let bytes_per_tick = (mb_per_s * 1e6 * TICK.as_secs_f64()).max(1.0) as usize;
    let mut next = Instant::now();
    let mut n: u64 = 0;
    let mut buf = String::with_capacity(bytes_per_tick + 256);
    loop {
        buf.clear();
        let stamp = Clock::now();
        while buf.len() < bytes_per_tick {
            n += 1;
            benign_line(&style, &stamp, n, &mut buf);
            buf.push('\n');
        }
        {
            let mut err = std::io::stderr().lock();
            if err.write_all(buf.as_bytes()).is_err() {
                return;
            }
        }
        next += TICK;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else if now - next > Duration::from_secs(1) {
            // Far behind (a blocked reader): do not burst to catch up.
            next = now;
        }
    }
}

/// One benign line, varied so that it looks like a busy multi-GPU log.
fn benign_line(style: &Style, stamp: &Clock, n: u64, buf: &mut String) {
    use std::fmt::Write as _;
    let rank = n % 4;
    let tid = style.pid + 50 + rank as u32;
    let _ = match n % 3 {
        0 => write!(
            buf,
            "sim-node:{}:{tid} [{rank}] NCCL INFO Channel {:02}/0 : {rank}[{rank}] -> {}[{}] via P2P/CUMEM/read",
            style.pid,
            n % 32,
            (rank + 1) % 4,
            (rank + 1) % 4
        ),
        1 => write!(
            buf,
            "sim-node:{}:{tid} [{rank}] NCCL INFO ncclCommInitRank comm 0x55d0c{:07x} rank {rank} nranks 4 cudaDev {rank} nvmlDev {rank} busId {}000 commId 0x{:016x} - Init COMPLETE",
            style.pid,
            n % 0xfff_ffff,
            18 + rank * 16,
            n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ),
        _ => match style.flavor {
            Flavor::Sglang => write!(
                buf,
                "[{} TP{rank}] Cache flush skipped: {} pending requests (req {n})",
                stamp.datetime(),
                n % 7
            ),
            Flavor::Vllm => write!(
                buf,
                "DEBUG {} [core.py:735] EngineCore waiting for work. (poll {n})",
                stamp.short()
            ),
        },
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn style(flavor: Flavor) -> Style {
        Style { flavor, pid: 4242 }
    }

    #[test]
    fn every_kind_names_its_cause() {
        let cases: [(CrashKind, &str); 8] = [
            (
                CrashKind::CudaIllegalInstruction,
                "CUDA error: an illegal instruction was encountered",
            ),
            (
                CrashKind::CudaIllegalAddress,
                "CUDA error: an illegal memory access was encountered",
            ),
            (CrashKind::CudaOom, "CUDA out of memory"),
            (CrashKind::DeviceAssert, "device-side assert triggered"),
            (CrashKind::NcclError, "NCCL error"),
            (
                CrashKind::NoKernelImage,
                "no kernel image is available for execution on the device",
            ),
            (
                CrashKind::TritonError,
                "triton.runtime.errors.OutOfResources",
            ),
            (
                CrashKind::SignalCrash,
                "Fatal Python error: Segmentation fault",
            ),
        ];
        for flavor in [Flavor::Sglang, Flavor::Vllm] {
            for tp in [1, 4] {
                for (kind, core) in cases {
                    let (r, _) = crash_report(&style(flavor), tp, kind, When::Serving);
                    let text = r.text();
                    assert!(text.contains(core), "{flavor:?} tp{tp} {kind}: {text}");
                }
            }
        }
    }

    #[test]
    fn the_first_fatal_line_is_the_cause_not_the_watchdog() {
        for flavor in [Flavor::Sglang, Flavor::Vllm] {
            let (r, _) = crash_report(
                &style(flavor),
                2,
                CrashKind::CudaIllegalInstruction,
                When::Serving,
            );
            let text = r.text();
            let cause = text.find("an illegal instruction was encountered").unwrap();
            let noise = text.find("DistBackendError").unwrap();
            assert!(cause < noise, "{flavor:?}");
            // Every rank reports it.
            assert!(text.matches("Rank 1] Process group watchdog").count() >= 1);
        }
    }

    #[test]
    fn flavors_die_their_own_way() {
        let k = CrashKind::CudaIllegalAddress;
        let (r, d) = crash_report(&style(Flavor::Sglang), 1, k, When::Serving);
        assert_eq!(d, Death::Signal(libc::SIGKILL));
        assert!(r.text().contains("Received sigquit from a child process"));
        let (r, d) = crash_report(&style(Flavor::Vllm), 1, k, When::Serving);
        assert_eq!(d, Death::Exit(1));
        assert!(r.text().contains("EngineDeadError"));
        let (r, d) = crash_report(&style(Flavor::Vllm), 1, CrashKind::OomKilled, When::Serving);
        assert_eq!(
            (r.text().as_str(), d),
            ("Killed\n", Death::Signal(libc::SIGKILL))
        );
        let (r, d) = crash_report(
            &style(Flavor::Vllm),
            1,
            CrashKind::ServerExited,
            When::Serving,
        );
        assert_eq!((r.text().as_str(), d), ("", Death::Exit(1)));
        let (_, d) = crash_report(
            &style(Flavor::Sglang),
            1,
            CrashKind::SignalCrash,
            When::Serving,
        );
        assert_eq!(d, Death::Signal(libc::SIGSEGV));
    }

    #[test]
    fn startup_oom_wording() {
        let (r, _) = crash_report(&style(Flavor::Sglang), 1, CrashKind::CudaOom, When::Startup);
        assert!(r.text().contains("Not enough memory"));
        let (r, _) = crash_report(&style(Flavor::Vllm), 1, CrashKind::CudaOom, When::Startup);
        assert!(r
            .text()
            .contains("No available memory for the cache blocks"));
        assert!(r.text().contains("Engine core initialization failed"));
        let (r, _) = crash_report(
            &style(Flavor::Vllm),
            1,
            CrashKind::NoKernelImage,
            When::Startup,
        );
        assert!(r
            .text()
            .contains("sm_120 is not compatible with the current PyTorch"));
    }

    #[test]
    fn benign_lines_are_lines() {
        let mut buf = String::new();
        for n in 0..9 {
            benign_line(&style(Flavor::Vllm), &Clock::now(), n, &mut buf);
            assert!(!buf.contains('\n'));
            buf.clear();
        }
    }
}
