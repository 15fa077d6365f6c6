//! Server log classification: the one table of log patterns ([`PATTERNS`]),
//! its compiled form ([`LogPatterns`]) and the streaming watcher over one
//! server's output ([`LogWatch`]).
//!
//! Every line of every server goes through [`LogPatterns::classify`], so the
//! common case (a benign line) must cost one pass of a literal automaton and
//! no allocation. Only lines that contain one of the table's literals run the
//! regexes of the entries that own those literals.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex::{Regex, RegexSet};

use super::text::{clean_stripped_into, strip_ansi};
use super::traceback;
use crate::model::{Failure, FailureKind, FailureSource};

/// What one log line means.
#[derive(Debug, Clone, PartialEq)]
pub enum LineClass {
    /// Nothing we act on.
    Plain,
    /// A fatal cause.
    Fatal(FailureKind),
    /// The server says it is ready (SGLang's "fired up", uvicorn's "Application
    /// startup complete.", llama.cpp's "server is listening on"). A hint only:
    /// SGLang prints the uvicorn line before its warm-up finished, and
    /// llama.cpp listens before the model is loaded, so readiness still needs
    /// the health check.
    Ready,
    /// Speculative decoding: mean accepted tokens per verify step (SGLang
    /// `accept len`, vLLM `Mean acceptance length`). Always >= 1 by definition.
    SpecStats { accept_len: f64 },
    /// llama.cpp's `draft acceptance = R (A accepted / D generated)`: a
    /// fraction of drafted tokens accepted, in [0, 1]. It is kept apart from
    /// [`LineClass::SpecStats`] because the line does not say how many verify
    /// steps there were, so tokens per step cannot be derived from it, and
    /// mixing a rate into the `accept_len` column would mislead.
    DraftAcceptance { rate: f64 },
    /// The server is gone even if HTTP still answers: vLLM `EngineDeadError`,
    /// `Engine loop is not running`, `Engine core proc ... died unexpectedly`;
    /// SGLang `Received sigquit from a child process`.
    ServerGone,
}

/// What a table entry means when its regex matches.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Meaning {
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
struct Pattern {
    meaning: Meaning,
    /// Lower-case literals, at least one of which occurs (ASCII
    /// case-insensitively) in every line the regex matches: the prefilter.
    literals: &'static [&'static str],
    /// Matched case-insensitively against the ANSI-stripped line. For the
    /// statistics entries the number starts where the match ends.
    regex: &'static str,
}

use FailureKind as K;

/// The one table of log patterns. Order is priority: the first entry whose
/// regex matches decides the line. Look-alikes come first so they can veto,
/// host OOM comes before CUDA OOM (Ray's error is also an `OutOfMemoryError`),
/// specific CUDA faults come before NCCL errors (an NCCL error that wraps
/// `an illegal memory access` is the memory fault), and CPU signals come last
/// (`an illegal instruction was encountered` is the GPU, `Illegal instruction
/// (core dumped)` is the CPU).
const PATTERNS: &[Pattern] = &[
    // --- benign look-alikes ---
    Pattern {
        meaning: Meaning::Benign,
        // The NCCL entry's literal: one literal, two owners.
        literals: &["nccl"],
        regex: r"\bnccl info\b|found nccl from library|nccl warn .*failed to open lib",
    },
    Pattern {
        meaning: Meaning::Benign,
        literals: &["token indices sequence length"],
        regex: r"token indices sequence length is longer than the specified maximum",
    },
    Pattern {
        meaning: Meaning::Fatal(K::OomKilled),
        literals: &[
            // Ray's `ray.exceptions.OutOfMemoryError` (the literal is shared
            // with CUDA's entry below).
            "outofmemoryerror",
            "running low on memory",
            "memory pressure",
            "worker died",
            // `ray-oom-prevention` (the literal is shared with `oom-kill`).
            "oom",
        ],
        regex: r"ray\.exceptions\.outofmemoryerror|running low on memory|killed due to memory pressure|worker died.*\b(oom|out of memory)\b|ray-oom-prevention",
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
        literals: &["illegal", "misaligned address"],
        regex: r"illegal memory access was encountered|cudaerrorillegaladdress|cuda_error_illegal_address|cuda error: misaligned address",
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
            "not compatible with the current pytorch",
            "compute capability",
        ],
        regex: r"no kernel image is available for execution on the device|cudaerrornokernelimagefordevice|is not compatible with the current pytorch installation|only supported on gpus with compute capability of at least|gpus with compute capability below \d[\d.]* are not supported",
    },
    Pattern {
        meaning: Meaning::Fatal(K::CudaOom),
        literals: &[
            "# gpu blocks: 0",
            "out of memory",
            "outofmemoryerror",
            // `failed to allocate CUDA`, `ALLOC_FAILED`, `cudaErrorMemoryAllocation`.
            "alloc",
            "insufficient gpu memory",
            "not enough memory",
            "no available memory",
            // Not "kv cache" alone: vLLM's every stats line says it.
            "stored in kv cache",
            "available kv cache memory",
        ],
        regex: r"# gpu blocks: 0(?:[^0-9]|$)|(cuda|hip) out of memory|\b(?:decode|prefill) out of memory\. try|cudamalloc\w*\(.*\): out of memory|\)\): out of memory\b|insufficient gpu memory|outofmemoryerror|cuda error: out of memory|cudamalloc failed: out of memory|failed to allocate cuda\d* buffer|cudaerrormemoryallocation|cublas_status_alloc_failed|\bnot enough memory\b|no available memory for the cache blocks|maximum number of tokens that can be stored in kv cache|larger than the available kv cache memory",
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
        meaning: Meaning::Fatal(K::TritonError),
        literals: &[
            "triton",
            // `OutOfResources`, `out of resource`.
            "resource",
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
        regex: r"died, exit code: -(?:4|7|11)\b|signaled to shutdown with signal (?:4|7|11)\b|\bggml_assert\(.*\) failed|\bggml_assert: \S+:\d+:|\.(?:c|cc|cpp|cxx|h|hpp):\d+: .*\bassertion .* failed|^\s*(?:zsh|bash|sh): (?:line \d+: +\d+ )?abort(?:ed)?\b|segmentation fault|segfault encountered|\bsig(segv|bus|ill)\b|fatal python error|illegal instruction\s*\(core dumped\)|illegal instruction\s*$|received (signal )?sigabrt|sigabrt received|\*\*\* sigabrt|aborted \(core dumped\)|bus error \(core dumped\)",
    },
    // --- the server could not start ---
    Pattern {
        meaning: Meaning::Fatal(K::StartupFailed),
        literals: &[
            "address already in use",
            "hfvalidationerror",
            // RepositoryNotFoundError, "Invalid repository ID".
            "repositor",
            "model identifier",
            "a file named",
            // `vllm: error: unrecognized arguments`, clap's `error: invalid value`.
            "error: ",
            "derived max_model_len",
            "model architectures",
            "couldn't bind",
            "initialization failed",
            "load",
            "gguf",
            "argument",
        ],
        regex: r"failed to load model|error loading model|failed to open gguf file|\berror: invalid argument: |error while handling argument|tools setup failed|couldn't bind http server socket|initialization failed\. warmup error|is greater than the derived max_model_len|model architectures \[.*\] are not supported|address already in use|\bhfvalidationerror\b|\brepositorynotfounderror\b|is not a valid model identifier|does not appear to have a file named|invalid repository id or local directory|\berror: unrecognized arguments|^\s*error: invalid value '[^']*' for '--|^\s*error: (?:webserverfailed|shardcannotstart)\b",
    },
    // --- the server is gone ---
    Pattern {
        meaning: Meaning::Gone,
        literals: &[
            "enginedeaderror",
            "engine loop is not running",
            "sig",
            "died unexpectedly",
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
            "is ready at",
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

/// A decimal number at the start of `s` (`3.42`, `2`), if finite.
fn leading_number(s: &str) -> Option<f64> {
    let end = s
        .bytes()
        .position(|b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(s.len());
    let v: f64 = s.get(..end)?.parse().ok()?;
    v.is_finite().then_some(v)
}

/// Which entry decided a line: the plan's N-th, or the builtin table's.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Plan(usize),
    Builtin(usize),
}

/// The compiled builtin table, built once per process.
struct Compiled {
    /// Leftmost-first automaton over the distinct literals, searched in the
    /// ASCII-lowercased line: it gets a SIMD prefilter, so a line with no
    /// literal costs one fast scan. `None` only if it could not be built, in
    /// which case every entry is a candidate (slow but correct).
    quick: Option<AhoCorasick>,
    /// Distinct literal index -> bit set of the entries that own it or any
    /// literal that is a prefix of it (see `build`).
    owners: Vec<u128>,
    /// Entry index -> compiled regex (`None` if it failed to compile; a test
    /// keeps that from happening).
    regexes: Vec<Option<Regex>>,
}

impl Compiled {
    fn build() -> Compiled {
        let mut literals: Vec<&str> = Vec::new();
        let mut own: Vec<u128> = Vec::new();
        for (i, p) in PATTERNS.iter().enumerate() {
            let bit = 1u128.checked_shl(i as u32).unwrap_or(0);
            for lit in p.literals {
                match literals.iter().position(|l| l == lit) {
                    Some(j) => {
                        if let Some(o) = own.get_mut(j) {
                            *o |= bit;
                        }
                    }
                    None => {
                        literals.push(lit);
                        own.push(bit);
                    }
                }
            }
        }
        // We find every literal occurrence by searching leftmost-first and
        // restarting one byte after each match start. Literals that match at
        // the same start are prefixes of one another, and leftmost-first
        // reports the one listed first; so list longer literals first and
        // let each carry the owners of its prefixes. Then nothing is missed.
        let mut order: Vec<usize> = (0..literals.len()).collect();
        order.sort_by_key(|&j| std::cmp::Reverse(literals.get(j).map_or(0, |l| l.len())));
        let sorted: Vec<&str> = order
            .iter()
            .filter_map(|&j| literals.get(j).copied())
            .collect();
        let owners: Vec<u128> = sorted
            .iter()
            .map(|lit| {
                literals
                    .iter()
                    .zip(&own)
                    .filter(|(p, _)| lit.starts_with(**p))
                    .fold(0, |acc, (_, o)| acc | o)
            })
            .collect();
        let quick = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&sorted)
            .ok();
        // `\b` is rewritten to its ASCII form: a Unicode word boundary makes
        // the regex engine leave its fast DFA for any non-ASCII haystack (a
        // U+FFFD from lossy decoding is enough), and every word we anchor is
        // ASCII anyway.
        let regexes = PATTERNS
            .iter()
            .map(|p| Regex::new(&format!("(?i){}", p.regex.replace(r"\b", r"(?-u:\b)"))).ok())
            .collect();
        Compiled {
            quick,
            owners,
            regexes,
        }
    }

    /// Entry indices whose literals occur in `text`, as a bit set.
    fn candidates(&self, text: &str) -> u128 {
        thread_local! {
            static LOWER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let scan = |lower: &[u8]| self.candidates_lower(lower);
        let lowered = |buf: &mut Vec<u8>| {
            buf.clear();
            buf.extend_from_slice(text.as_bytes());
            buf.make_ascii_lowercase();
        };
        // Reuse a per-thread buffer; fall back to a fresh one if it is busy
        // or the thread is shutting down.
        LOWER
            .try_with(|cell| match cell.try_borrow_mut() {
                Ok(mut buf) => {
                    lowered(&mut buf);
                    let mask = scan(&buf);
                    // Don't keep a megabyte line's buffer around.
                    if buf.capacity() > 64 * 1024 {
                        *buf = Vec::new();
                    }
                    mask
                }
                Err(_) => {
                    let mut buf = Vec::new();
                    lowered(&mut buf);
                    scan(&buf)
                }
            })
            .unwrap_or_else(|_| {
                let mut buf = Vec::new();
                lowered(&mut buf);
                scan(&buf)
            })
    }

    fn candidates_lower(&self, lower: &[u8]) -> u128 {
        let Some(quick) = &self.quick else {
            return u128::MAX;
        };
        let mut mask = 0u128;
        let mut at = 0;
        while at < lower.len() {
            let input = aho_corasick::Input::new(lower).span(at..lower.len());
            let Some(m) = quick.find(input) else {
                break;
            };
            mask |= self
                .owners
                .get(m.pattern().as_usize())
                .copied()
                .unwrap_or(0);
            at = m.start() + 1;
        }
        mask
    }

    /// What entry `i` says about `text`, or `None` when its regex does not
    /// match (or matched without a usable number).
    fn apply(&self, i: usize, text: &str) -> Option<LineClass> {
        let pattern = PATTERNS.get(i)?;
        let re = self.regexes.get(i)?.as_ref()?;
        // `shortest_match` runs only the forward DFA; the regexes end just
        // before the number, so the earliest match end is where it starts.
        let number = || leading_number(text.get(re.shortest_match(text)?..)?.trim_start());
        match pattern.meaning {
            Meaning::Benign => re.is_match(text).then_some(LineClass::Plain),
            Meaning::Fatal(kind) => re.is_match(text).then_some(LineClass::Fatal(kind)),
            Meaning::Gone => re.is_match(text).then_some(LineClass::ServerGone),
            Meaning::Ready => re.is_match(text).then_some(LineClass::Ready),
            Meaning::AcceptLen => number().map(|accept_len| LineClass::SpecStats { accept_len }),
            Meaning::DraftRate => number().map(|rate| LineClass::DraftAcceptance { rate }),
        }
    }
}

fn builtin_compiled() -> Arc<Compiled> {
    static BUILTIN: OnceLock<Arc<Compiled>> = OnceLock::new();
    BUILTIN.get_or_init(|| Arc::new(Compiled::build())).clone()
}

/// The log pattern table, compiled: the builtin entries plus any entries a
/// plan adds. Cloning is cheap (shared compiled state).
#[derive(Clone)]
pub struct LogPatterns {
    builtin: Arc<Compiled>,
    /// Plan-supplied entries, checked before the builtin table.
    extra: Option<(RegexSet, Vec<FailureKind>)>,
}

impl std::fmt::Debug for LogPatterns {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogPatterns")
            .field("builtin", &PATTERNS.len())
            .field("extra", &self.extra.as_ref().map(|(set, _)| set.patterns()))
            .finish()
    }
}

impl LogPatterns {
    /// The builtin table (compiled once per process, shared).
    pub fn builtin() -> LogPatterns {
        LogPatterns {
            builtin: builtin_compiled(),
            extra: None,
        }
    }

    /// The builtin table plus plan-supplied `regex -> kind` entries, which are
    /// checked first (in order) and compiled exactly as written, the way the
    /// plan validator compiles them: add `(?i)` for case-insensitivity.
    pub fn with_extra(extra: &[(String, FailureKind)]) -> Result<LogPatterns, regex::Error> {
        if extra.is_empty() {
            return Ok(LogPatterns::builtin());
        }
        let set = RegexSet::new(extra.iter().map(|(re, _)| re.as_str()))?;
        let kinds = extra.iter().map(|(_, k)| *k).collect();
        Ok(LogPatterns {
            builtin: builtin_compiled(),
            extra: Some((set, kinds)),
        })
    }

    /// What one line means. Accepts any shape: ANSI escapes, timestamps,
    /// rank and process prefixes, U+FFFD from lossy decoding, huge lines.
    pub fn classify(&self, line: &str) -> LineClass {
        self.classify_stripped(&strip_ansi(line))
    }

    /// [`LogPatterns::classify`] for a line already stripped of escapes.
    fn classify_stripped(&self, text: &str) -> LineClass {
        self.rule_for(text).0
    }

    /// What one line means and which entry decided it: `plan pattern N
    /// /regex/` or `builtin pattern N /regex/` (none for a plain line no
    /// entry matched). What `sweeptop classify --explain` shows.
    pub fn explain(&self, line: &str) -> (LineClass, Option<String>) {
        let (class, rule) = self.rule_for(&strip_ansi(line));
        let words = rule.and_then(|r| match r {
            Rule::Plan(i) => self
                .extra
                .as_ref()
                .and_then(|(set, _)| set.patterns().get(i))
                .map(|re| format!("plan pattern {} /{re}/", i + 1)),
            Rule::Builtin(i) => PATTERNS
                .get(i)
                .map(|p| format!("builtin pattern {} /{}/", i + 1, p.regex)),
        });
        (class, words)
    }

    /// The class of a line and the entry that decided it (no allocation).
    fn rule_for(&self, text: &str) -> (LineClass, Option<Rule>) {
        if let Some((set, kinds)) = &self.extra {
            if let Some(i) = set.matches(text).iter().next() {
                if let Some(kind) = kinds.get(i) {
                    return (LineClass::Fatal(*kind), Some(Rule::Plan(i)));
                }
            }
        }
        let mut mask = self.builtin.candidates(text);
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            if i >= PATTERNS.len() {
                break;
            }
            if let Some(class) = self.builtin.apply(i, text) {
                return (class, Some(Rule::Builtin(i)));
            }
        }
        (LineClass::Plain, None)
    }
}

/// Lines kept for [`LogWatch::tail`] (and for the evidence before a cause).
pub const TAIL_KEEP: usize = 200;
/// Lines of context kept on each side of the causing line.
pub const EVIDENCE_CONTEXT: usize = 10;

#[derive(Debug, Clone)]
struct Cause {
    kind: FailureKind,
    /// A "server gone" line with no specific cause yet: a specific cause
    /// seen later replaces it, because the parent's "a child died" line can
    /// reach us before the child's traceback (separate pipes, separate
    /// processes).
    weak: bool,
    message: String,
    /// Lines around the cause, each with how many times it came in a row
    /// (the same text after its prefix: eight ranks, a repeated watchdog).
    evidence: Vec<(String, u32)>,
    /// Distinct lines still to keep after the cause.
    after_left: usize,
    /// False once a line that does not repeat the last kept one arrived
    /// after the window was full: nothing more is counted.
    open: bool,
}

impl Cause {
    /// Keep a line that followed the cause: a repeat of the last kept line
    /// only counts, so a window of ten shows ten different lines.
    fn follow(&mut self, line: &str) {
        if !self.open {
            return;
        }
        if let Some((last, n)) = self.evidence.last_mut() {
            if traceback::body(last) == traceback::body(line) {
                *n = n.saturating_add(1);
                return;
            }
        }
        if self.after_left == 0 {
            self.open = false;
            return;
        }
        self.evidence.push((line.to_string(), 1));
        self.after_left -= 1;
    }
}

/// Streaming watcher over one server's stdout+stderr lines. Keeps the first
/// fatal cause with the lines around it, a bounded tail, readiness and the
/// latest speculative decoding statistics.
#[derive(Debug, Clone)]
pub struct LogWatch {
    patterns: Arc<LogPatterns>,
    /// Ring of cleaned lines; buffers are reused once full.
    recent: VecDeque<String>,
    cause: Option<Cause>,
    gone: bool,
    ready: bool,
    accept_len: Option<f64>,
    draft_rate: Option<f64>,
    lines: u64,
}

impl LogWatch {
    pub fn new(patterns: Arc<LogPatterns>) -> LogWatch {
        LogWatch {
            patterns,
            recent: VecDeque::with_capacity(TAIL_KEEP),
            cause: None,
            gone: false,
            ready: false,
            accept_len: None,
            draft_rate: None,
            lines: 0,
        }
    }

    /// Classify one line and remember what matters. The first fatal cause
    /// wins: NCCL watchdog noise after an illegal instruction, or the same
    /// error from eight ranks, does not replace it.
    pub fn push(&mut self, line: &str) -> LineClass {
        let stripped = strip_ansi(line);
        let class = self.patterns.classify_stripped(&stripped);
        self.lines = self.lines.saturating_add(1);

        // Reuse the oldest buffer once the ring is full.
        let mut cleaned = if self.recent.len() >= TAIL_KEEP {
            self.recent.pop_front().unwrap_or_default()
        } else {
            String::new()
        };
        clean_stripped_into(&mut cleaned, &stripped);

        let new_cause = match &class {
            LineClass::Fatal(kind) => match &self.cause {
                None => Some((*kind, false)),
                Some(c) if c.weak => Some((*kind, false)),
                Some(_) => None,
            },
            LineClass::ServerGone => {
                self.gone = true;
                self.cause
                    .is_none()
                    .then_some((FailureKind::ServerExited, true))
            }
            LineClass::Ready => {
                self.ready = true;
                None
            }
            LineClass::SpecStats { accept_len } => {
                self.accept_len = Some(*accept_len);
                None
            }
            LineClass::DraftAcceptance { rate } => {
                self.draft_rate = Some(*rate);
                None
            }
            LineClass::Plain => None,
        };

        if let Some((kind, weak)) = new_cause {
            let mut evidence = before_context(&self.recent);
            evidence.push((cleaned.clone(), 1));
            self.cause = Some(Cause {
                kind,
                weak,
                message: cleaned.clone(),
                evidence,
                after_left: EVIDENCE_CONTEXT,
                open: true,
            });
        } else if let Some(cause) = &mut self.cause {
            cause.follow(&cleaned);
        }

        self.recent.push_back(cleaned);
        class
    }

    /// The first fatal cause, if any. A "server gone" line with no specific
    /// cause reads as [`FailureKind::ServerExited`].
    pub fn first_fatal(&self) -> Option<FailureKind> {
        self.cause.as_ref().map(|c| c.kind)
    }

    /// The first fatal cause as a failure record: the cleaned line as the
    /// message and up to 10 different lines on each side (as pushed so far)
    /// as evidence, a line repeated in a row shown once with `(×N)`.
    pub fn failure(&self) -> Option<Failure> {
        self.cause.as_ref().map(|c| {
            let evidence = c
                .evidence
                .iter()
                .map(|(line, n)| match n {
                    1 => line.clone(),
                    n => format!("{line} (×{n})"),
                })
                .collect();
            Failure::new(c.kind, FailureSource::ServerLog, c.message.clone())
                .with_evidence(evidence)
        })
    }

    /// The last `n` lines (cleaned), oldest first; at most [`TAIL_KEEP`].
    pub fn tail(&self, n: usize) -> Vec<String> {
        let skip = self.recent.len().saturating_sub(n);
        self.recent.iter().skip(skip).cloned().collect()
    }

    /// The latest SGLang/vLLM mean acceptance length seen.
    pub fn last_accept_len(&self) -> Option<f64> {
        self.accept_len
    }

    /// The latest llama.cpp draft acceptance rate seen (a fraction).
    pub fn last_draft_acceptance(&self) -> Option<f64> {
        self.draft_rate
    }

    /// True once a ready line was seen (a hint; see [`LineClass::Ready`]).
    pub fn saw_ready(&self) -> bool {
        self.ready
    }

    /// True once the server said it is gone (engine dead, child died).
    pub fn server_gone(&self) -> bool {
        self.gone
    }

    /// Lines pushed so far.
    pub fn lines_seen(&self) -> u64 {
        self.lines
    }
}

/// Up to [`EVIDENCE_CONTEXT`] different lines before a cause, oldest first,
/// lines repeated in a row counted once: the context of a cause that follows
/// forty watchdog lines is what came before them, not the watchdog.
fn before_context(recent: &VecDeque<String>) -> Vec<(String, u32)> {
    let mut runs = traceback::runs(
        (0..recent.len()).rev(),
        |i| recent[i].as_str(),
        EVIDENCE_CONTEXT,
    );
    runs.reverse();
    runs.into_iter()
        .map(|(first, last)| {
            let n = u32::try_from(last - first + 1).unwrap_or(u32::MAX);
            (recent[first].clone(), n)
        })
        .collect()
}

/// Classify a single line with the builtin table; for callers without a plan.
pub fn classify_line(line: &str) -> LineClass {
    LogPatterns::builtin().classify(line)
}

#[cfg(test)]
mod tests;
