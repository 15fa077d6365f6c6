//! The one table of log patterns: what each entry means, the literals that
//! prefilter it and its regex, in priority order.

use crate::model::FailureKind;

/// What a table entry means when its regex matches.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Meaning {
    /// A known look-alike: the whole line is Plain, whatever else it contains.
    Benign,
    Fatal(FailureKind),
    Gone,
    Ready,
    /// Mean acceptance length; the number follows the regex match.
    AcceptLen,
    /// llama.cpp draft acceptance rate; the number follows the regex match.
    DraftRate,
}

/// One entry of the pattern table.
pub(super) struct Pattern {
    pub meaning: Meaning,
    /// Lower-case literals, at least one of which occurs (ASCII
    /// case-insensitively) in every line the regex matches: the prefilter.
    pub literals: &'static [&'static str],
    /// Matched case-insensitively against the ANSI-stripped line. For the
    /// statistics entries the number starts where the match ends.
    pub regex: &'static str,
}

use FailureKind as K;

/// The one table of log patterns. Order is priority: the first entry whose
/// regex matches decides the line. Look-alikes come first so they can veto,
/// host OOM comes before CUDA OOM (Ray's error is also an `OutOfMemoryError`),
/// specific CUDA faults come before NCCL errors (an NCCL error that wraps
/// `an illegal memory access` is the memory fault), and CPU signals come last
/// (`an illegal instruction was encountered` is the GPU, `Illegal instruction
/// (core dumped)` is the CPU).
pub(super) const PATTERNS: &[Pattern] = &[
    // --- benign look-alikes ---
    Pattern {
        meaning: Meaning::Benign,
        // The NCCL entry's literal: one literal, two owners.
        literals: &["nccl"],
        regex: r"\bnccl info\b|found nccl from library|nccl warn .*failed to open lib",
    },
    Pattern {
        meaning: Meaning::Benign,
        literals: &["indices sequence length"],
        regex: r"token indices sequence length is longer than the specified maximum",
    },
    Pattern {
        meaning: Meaning::Fatal(K::OomKilled),
        literals: &[
            // `OutOfMemoryError`, `low on memory`, `memory pressure`: one
            // literal shared with CUDA's entry below (the set stays within
            // the SIMD prefilter's 64, and no hot stats line has it).
            "memory", // `worker died` (shared with `died unexpectedly`).
            "died",   // `ray-oom-prevention` (the literal is shared with `oom-kill`).
            "oom",    // `Ray killed this worker` (shared with the entries below).
            "killed",
        ],
        regex: r"ray\.exceptions\.outofmemoryerror|running low on memory|killed due to memory pressure|worker died.*\b(oom|out of memory)\b|ray-oom-prevention|\bray killed this worker\b",
    },
    Pattern {
        meaning: Meaning::Fatal(K::OomKilled),
        literals: &["killed", "oom"],
        regex: r"out of memory: killed? process|\boom-kill",
    },
    Pattern {
        // What a shell prints when its child got SIGKILL: a bare `Killed`, or
        // bash's `line 1:  4242 Killed   python ...`.
        meaning: Meaning::Fatal(K::OomKilled),
        literals: &["killed"],
        regex: r"^\s*killed\s*$|\]killed\s*$|\bline \d+:\s+\d+\s+killed\b",
    },
    // --- Ray: a worker vanished (after its memory-pressure kill above) ---
    Pattern {
        // Ray: a worker vanished. The server is gone; the line goes on to
        // list the OOM killer and SIGSEGV as possible causes, which names
        // neither (a specific cause found later replaces this one).
        meaning: Meaning::Gone,
        literals: &["the actor is dead because"],
        regex: r"the actor is dead because its worker process has died",
    },
    Pattern {
        // Ray's hedge, on its own: not a cause.
        meaning: Meaning::Benign,
        literals: &["potential root causes"],
        regex: r"there are some potential root causes",
    },
    // --- GPU faults ---
    Pattern {
        meaning: Meaning::Fatal(K::CudaIllegalInstruction),
        // "illegal" stands for every spelling (`illegal instruction`,
        // `cudaErrorIllegalInstruction`, `CUDA_ERROR_ILLEGAL_ADDRESS`…): one
        // literal keeps the set within the SIMD prefilter's 64.
        literals: &["illegal"],
        regex: r"illegal instruction was encountered|cudaerrorillegalinstruction|cuda_error_illegal_instruction",
    },
    Pattern {
        meaning: Meaning::Fatal(K::CudaIllegalAddress),
        literals: &["illegal"],
        regex: r"illegal memory access was encountered|cudaerrorillegaladdress|cuda_error_illegal_address",
    },
    Pattern {
        meaning: Meaning::Fatal(K::DeviceAssert),
        // `device-side assert`, `cudaErrorAssert`, `Assertion … failed`.
        literals: &["assert"],
        regex: r"device-side assert(ion)? triggered|\bblock: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] assertion .* failed|cudaerrorassert|\.cuh?:\d+:.*\bassertion\b.*\bfailed",
    },
    Pattern {
        meaning: Meaning::Fatal(K::NoKernelImage),
        literals: &[
            "no kernel image",
            "nokernelimage",
            "no_binary_for_gpu",
            "not compatible with the current pytorch",
            "capability",
        ],
        regex: r"no kernel image is available for execution on the device|\bcuda_error_no_binary_for_gpu\b|cudaerrornokernelimagefordevice|is not compatible with the current pytorch installation|only supported on gpus with compute capability of at least|gpus with compute capability below \d[\d.]* are not supported",
    },
    Pattern {
        meaning: Meaning::Fatal(K::CudaOom),
        literals: &[
            "# gpu blocks: 0",
            // `out of memory`, `OutOfMemoryError`, `CUDA_ERROR_OUT_OF_MEMORY`,
            // `insufficient gpu memory`, `not enough memory`, `no available
            // memory`, `available kv cache memory`, `cudaErrorMemoryAllocation`.
            "memory",
            // `failed to allocate CUDA`, `ALLOC_FAILED`.
            "alloc",
            // Not "kv cache" alone: vLLM's every stats line says it.
            "stored in kv cache",
        ],
        regex: r"# gpu blocks: 0(?:[^0-9]|$)|(cuda|hip) out of memory|\b(?:decode|prefill) out of memory\. try|cudamalloc\w*\(.*\): out of memory|\)\): out of memory\b|insufficient gpu memory|outofmemoryerror|cuda error: out of memory|\bcuda(?:\]| runtime error| driver error)?: out of memory|\bcuda_error_out_of_memory\b|cudamalloc failed: out of memory|failed to allocate cuda\d* buffer|cudaerrormemoryallocation|cublas_status_alloc_failed|\bnot enough memory\b|no available memory for the cache blocks|maximum number of tokens that can be stored in kv cache|larger than the available kv cache memory",
    },
    Pattern {
        meaning: Meaning::Fatal(K::NcclError),
        literals: &[
            // One short literal for the nccl* error names keeps the literal
            // set small enough for the SIMD prefilter (<= 64).
            "nccl",
            "watchdog caught",
            "distbackenderror",
            "gloo",
        ],
        regex: r"gloo/transport/\S+\] timed out waiting|\bnccl warn .*(?:\bfailed\b|\bfailure\b|connection closed by remote peer|error encountered)|nccl warn socket\w*: connect to .* failed|nccl watchdog thread terminated with exception|\bnccl error\b|\bnccl(internal|unhandledcuda|system|invalidusage|invalidargument|remote)error\b|watchdog caught collective operation timeout|distbackenderror",
    },
    Pattern {
        // Any other CUDA runtime or driver error, in the wordings of the CUDA
        // runtime (`cudaErrorLaunchFailure: unspecified launch failure`), the
        // driver API (`CUDA_ERROR_LAUNCH_FAILED`), PyTorch (`CUDA error: …`,
        // `CUDA driver error`, the older `cuda runtime error (719)`), CuPy,
        // Triton's launcher (`Triton Error [CUDA]: …`), llama.cpp, the
        // kernel's Xid lines and ECC faults. After the specific kinds above
        // (an illegal address, OOM, an assert, no kernel image, NCCL's own
        // errors) and before Triton's compiler errors.
        meaning: Meaning::Fatal(K::CudaError),
        // Not `cuda` alone: SGLang's every decode line says `cuda graph`.
        // The CUDA runtime's, the driver API's and PyTorch's names
        // (`cudaError…`, `CUDA_ERROR_…`, `CUDA error`, `unhandled cuda
        // error`), `CUDA driver error`, `cuda runtime error (N)`, the launch
        // and ECC faults, and the kernel's Xid.
        literals: &[
            "cudaerror",
            "cuda_error",
            "cuda error",
            "driver error",
            "runtime error",
            "launch ",
            "misaligned address",
            "invalid program counter",
            "busy or unavailable",
            "ecc",
            "xid",
        ],
        regex: r"\bcudaerror[a-z]+\b|\bcuda_error_[a-z_]+\b|\bcuda error: \S|\bunhandled cuda error\b|\bcuda driver error\b|\bcuda runtime error \(\d+\)|\bcuda\b.*(?:unspecified launch failure|the launch timed out|misaligned address|invalid program counter|busy or unavailable|uncorrectable ecc|double[- ]bit ecc)|\bnvrm: xid\b|\bxid \(pci:",
    },
    Pattern {
        meaning: Meaning::Fatal(K::TritonError),
        literals: &[
            "triton",
            // `OutOfResources`, `out of resource`.
            "esource",
            "ptxas",
            "inductorerror",
            "gcc: fatal error",
        ],
        regex: r"triton compilation failed|triton\.(runtime|compiler)\.errors\.\w+|\boutofresources\b|out of resource: \w|\bptxas\b.*\bfatal\b|\bptxas\b.*\berror\s*: |calledprocesserror: command .*\bptxas\b|\bcompilationerror: at \d+:\d+|triton error \[|_inductor\.exc\.inductorerror\b|gcc: fatal error: cannot execute",
    },
    // --- process crashes (CPU side) ---
    Pattern {
        meaning: Meaning::Fatal(K::SignalCrash),
        literals: &[
            // `segmentation fault`, `segfault`; `SIGSEGV`, `SIGBUS`, `SIGILL`,
            // `SIGABRT` (two short literals keep the set within 64).
            "seg",
            "sig",
            "fatal python error",
            "illegal",
            "(core dumped)",
            "exit code: -",
            // `GGML_ASSERT(…) failed`, `Assertion … failed` in host code.
            "assert",
            "abort",
        ],
        regex: r"died, exit code: -(?:4|7|11)\b|signaled to shutdown with signal (?:4|7|11)\b|\bggml_assert\(.*\) failed|\bggml_assert: \S+:\d+:|\.(?:c|cc|cpp|cxx|h|hpp):\d+: .*\bassertion .* failed|^\s*(?:zsh|bash|sh): (?:line \d+: +\d+ )?abort(?:ed)?\b|segmentation fault|segfault encountered|\bsig(segv|bus|ill)\b|fatal python error|illegal instruction\s*\(core dumped\)|illegal instruction\s*$|received (signal )?sigabrt|^\s*signal \((?:4|6|7|11)\) received\.|sigabrt received|\*\*\* sigabrt|aborted \(core dumped\)|bus error \(core dumped\)",
    },
    // --- the server could not start ---
    Pattern {
        meaning: Meaning::Fatal(K::StartupFailed),
        literals: &[
            "address already in use",
            // `HFValidationError: …` is found by `error: `.
            // RepositoryNotFoundError, "Invalid repository ID".
            "repositor",
            // `OSError: … is not a valid model identifier`, `… does not appear
            // to have a file named …` are found by `error: `.
            // `vllm: error: unrecognized arguments`, clap's `error: invalid value`.
            "error: ",
            "derived max_model_len",
            "architectures",
            "couldn't bind",
            "initialization failed",
            "load",
            "gguf",
            "argument",
        ],
        regex: r"failed to load model|error loading model|failed to open gguf file|\berror: invalid argument: |error while handling argument|tools setup failed|couldn't bind http server socket|initialization failed\. warmup error|is greater than the derived max_model_len|model architectures \[.*\] are not supported|address already in use|\bhfvalidationerror\b|\brepositorynotfounderror\b|is not a valid model identifier|does not appear to have a file named|invalid repository id or local directory|\berror: unrecognized arguments|^\s*error: invalid value '[^']*' for '--|^\s*error: (?:webserverfailed|shardcannotstart)\b|^\s*error: creating server: |^\s*error: listen tcp \S+: bind: ",
    },
    // --- the server is gone ---
    Pattern {
        meaning: Meaning::Gone,
        literals: &[
            "deaderror",
            "loop is not running",
            "sig",
            // `died unexpectedly` (shared with `worker died`).
            "died",
            "encountered a fatal error",
            "initialization failed",
            "iteration timed out",
            "error: ",
        ],
        regex: r"text_generation_client: .*server error: transport error|engine iteration timed out|enginedeaderror|engine loop is not running|received sigquit from a child process|engine ?core\b.*\bdied unexpectedly|enginecore encountered a fatal error|engine core initialization failed",
    },
    // --- readiness ---
    Pattern {
        meaning: Meaning::Ready,
        literals: &[
            "fired up and ready to roll",
            "application startup complete",
            "listening on",
            "ready at",
        ],
        regex: r"the server is fired up and ready to roll|application startup complete|server is listening on|\bllama_server: listening on https?://|application '[^']*' is ready at https?://",
    },
    // --- speculative decoding statistics ---
    Pattern {
        // SGLang: `Decode batch. ... accept len: 3.42, ...` (newer: `Decode batch,`).
        meaning: Meaning::AcceptLen,
        literals: &["accept len:"],
        regex: r"decode batch\b.*?accept len:\s*",
    },
    Pattern {
        // vLLM: `SpecDecoding metrics: ... Mean acceptance length: 2.91, ...`.
        meaning: Meaning::AcceptLen,
        literals: &["mean acceptance length:"],
        regex: r"mean acceptance length:\s*",
    },
    Pattern {
        // llama.cpp: `draft acceptance rate = 0.64479 (  167 accepted /   259 generated)`.
        meaning: Meaning::DraftRate,
        literals: &["draft acceptance"],
        regex: r"draft acceptance(?: rate)?\s*[=:]\s*",
    },
];
