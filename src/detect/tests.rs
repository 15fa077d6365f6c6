//! Tests across the module: `classify_text` and a fuzz-style sweep that feeds
//! arbitrary input to every classifier.

use std::sync::Arc;

use super::fixtures::{
    BODIES, CPU_SIGILL_LOG, HEALTHY_LOG, LINES, LLAMA_CRASH_LOG, SGLANG_CRASH_LOG, TGI_CRASH_LOG,
    VLLM_CRASH_LOG,
};
use super::*;

#[test]
fn classify_text_on_logs() {
    let c = classify_text(SGLANG_CRASH_LOG);
    assert_eq!(c.kind, Some(FailureKind::CudaIllegalInstruction));
    assert_eq!(
        c.evidence.as_deref(),
        Some("torch.AcceleratorError: CUDA error: an illegal instruction was encountered")
    );
    assert_eq!(c.message.as_deref(), Some("CUDA illegal instruction"));
    assert_eq!(c.context, None);
    assert_eq!(
        classify_text(VLLM_CRASH_LOG).kind,
        Some(FailureKind::CudaIllegalAddress)
    );
    assert_eq!(
        classify_text(LLAMA_CRASH_LOG).kind,
        Some(FailureKind::CudaIllegalAddress)
    );
    assert_eq!(
        classify_text(TGI_CRASH_LOG).kind,
        Some(FailureKind::CudaOom)
    );
    assert_eq!(
        classify_text(CPU_SIGILL_LOG).kind,
        Some(FailureKind::SignalCrash)
    );
    assert_eq!(classify_text(HEALTHY_LOG), Classification::none());
    assert_eq!(classify_text(""), Classification::none());
    assert_eq!(
        classify_text("Received sigquit from a child process.").kind,
        Some(FailureKind::ServerExited)
    );
}

#[test]
fn classify_text_on_bodies() {
    for case in BODIES {
        let c = classify_text(case.body);
        if case.body.trim_start().starts_with('{') || case.kind == FailureKind::ContextOverflow {
            assert_eq!(c.kind, Some(case.kind), "{}", case.name);
        } else {
            // Not clearly an HTTP error body: no kind.
            assert_eq!(c.kind, None, "{}", case.name);
        }
    }
    let c = classify_text(BODIES[0].body);
    assert_eq!(
        c.context.map(|n| n.summary(Some(400))).as_deref(),
        Some("ctx 400: 33,012 > 32,768")
    );
    assert!(c
        .message
        .as_deref()
        .is_some_and(|m| m.ends_with("(ctx 400: 33,012 > 32,768)")));
    assert!(c
        .evidence
        .as_deref()
        .is_some_and(|e| e.contains("BadRequestError")));
    // Status comes from the body's code.
    let c = classify_text(
        r#"{"error":{"code":500,"message":"request (33012 tokens) exceeds the available context size (32768 tokens)"}}"#,
    );
    assert!(c
        .message
        .as_deref()
        .is_some_and(|m| m.starts_with("HTTP 500:") && m.ends_with("(ctx 500: 33,012 > 32,768)")));
}

#[test]
fn classify_text_on_wrapped_bodies_and_log_lines() {
    let curl = "HTTP/1.1 422 Unprocessable Entity\r\ncontent-type: application/json\r\n\r\n{\"error\":\"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`\",\"error_type\":\"validation\"}";
    let c = classify_text(curl);
    assert_eq!(c.kind, Some(FailureKind::ContextOverflow));
    assert!(c
        .message
        .as_deref()
        .is_some_and(|m| m.starts_with("HTTP 422") && m.ends_with("(ctx 422: 4,200 > 4,096)")));

    let sse = r#"data: {"error": {"message": "The model `x` does not exist.", "code": 404}}"#;
    let c = classify_text(sse);
    assert_eq!(c.kind, Some(FailureKind::HttpError));
    assert!(c
        .message
        .as_deref()
        .is_some_and(|m| m.starts_with("HTTP 404:")));

    let log = "INFO 08-13 15:11:00 [logger.py:1] Received request\nERROR 08-13 15:11:00 [serving_chat.py:200] ValueError: This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens.\nINFO:     127.0.0.1:1 - \"POST /v1/chat/completions HTTP/1.1\" 400 Bad Request\n";
    let c = classify_text(log);
    assert_eq!(c.kind, Some(FailureKind::ContextOverflow));
    assert_eq!(c.context.and_then(|n| n.prompt_tokens), Some(40000));

    // A crash beats an overflow in the same excerpt.
    let both = format!("{log}RuntimeError: CUDA error: an illegal memory access was encountered\n");
    assert_eq!(
        classify_text(&both).kind,
        Some(FailureKind::CudaIllegalAddress)
    );

    // JSON that is not an error body is not an HTTP error.
    assert_eq!(classify_text(r#"{"id":"x","choices":[]}"#).kind, None);
    assert_eq!(classify_text("just some words").kind, None);
}

#[test]
fn classification_serializes() {
    let c = classify_text(BODIES[0].body);
    let s = serde_json::to_string(&c).unwrap_or_default();
    assert!(s.contains(r#""kind":"context_overflow""#));
    assert!(s.contains(r#""limit":32768"#));
}

/// xorshift64*: deterministic, no extra crates.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn exercise(text: &str, watch: &mut LogWatch, statuses: &[u16]) {
    let patterns = LogPatterns::builtin();
    let _ = patterns.classify(text);
    let _ = watch.push(text);
    let _ = watch.failure();
    let _ = watch.tail(3);
    for &status in statuses {
        let f = classify_http(status, text);
        assert!(f.message.starts_with("HTTP "));
        if let Some(ctx) = f.context {
            let _ = ctx.summary(Some(status));
        }
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        let _ = classify_stream_error(&v);
    }
    let _ = classify_stream_error(&serde_json::Value::String(text.to_string()));
    let c = classify_text(text);
    let _ = serde_json::to_string(&c);
    let _ = classify_exit(None, Some(9), watch.first_fatal(), &watch.tail(5));
}

/// All the fixture text, as one corpus to cut random slices from.
fn corpus() -> String {
    let mut all = String::new();
    for (_, line, _) in LINES {
        all.push_str(line);
        all.push('\n');
    }
    for case in BODIES {
        all.push_str(case.body);
        all.push('\n');
    }
    for log in [
        SGLANG_CRASH_LOG,
        VLLM_CRASH_LOG,
        LLAMA_CRASH_LOG,
        TGI_CRASH_LOG,
        CPU_SIGILL_LOG,
        HEALTHY_LOG,
    ] {
        all.push_str(log);
    }
    all
}

#[test]
fn fuzz_arbitrary_bytes_and_fixture_slices_never_panic() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut watch = LogWatch::new(Arc::new(LogPatterns::builtin()));
    let corpus = corpus().into_bytes();
    for round in 0..3000 {
        let bytes: Vec<u8> = match round % 3 {
            // Random bytes (invalid UTF-8, ESC, NUL, \r).
            0 => (0..rng.below(300)).map(|_| rng.next() as u8).collect(),
            // A random slice of the fixtures, possibly mid-character.
            1 => {
                let a = rng.below(corpus.len());
                let b = (a + rng.below(600)).min(corpus.len());
                corpus[a..b].to_vec()
            }
            // A slice with random bytes flipped.
            _ => {
                let a = rng.below(corpus.len());
                let b = (a + rng.below(400)).min(corpus.len());
                let mut v = corpus[a..b].to_vec();
                for _ in 0..rng.below(8) {
                    let i = rng.below(v.len());
                    if let Some(x) = v.get_mut(i) {
                        *x = rng.next() as u8;
                    }
                }
                v
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        exercise(&text, &mut watch, &[0, 200, 400, 404, 422, 500, 999]);
    }
    assert!(watch.tail(TAIL_KEEP + 10).len() <= TAIL_KEEP);
}

#[test]
fn giant_inputs_are_linear() {
    let mut watch = LogWatch::new(Arc::new(LogPatterns::builtin()));
    let mb = 1 << 20;
    let start = std::time::Instant::now();
    let giants = [
        "\u{FFFD}".repeat(mb / 3),
        "a".repeat(mb),
        // Every literal hit, over and over: the prefilter sees a match at
        // every position and the regexes must still run once each.
        "killed accept len: nccl error ptxas assertion ".repeat(mb / 47),
        "\u{1b}[31m".repeat(mb / 5),
        "{".repeat(mb),
        format!(
            "{{\"error\":{{\"message\":\"{}maximum context length is 5 tokens\"}}}}",
            "9".repeat(mb)
        ),
        "Decode batch. accept len: ".repeat(mb / 26),
    ];
    for g in &giants {
        exercise(g, &mut watch, &[400]);
    }
    // Generous even for an unoptimised build on a busy machine; a quadratic
    // path on 1 MB would take minutes.
    assert!(start.elapsed().as_secs() < 60, "took {:?}", start.elapsed());
}

#[test]
fn how_the_process_ended_decides_what_no_rule_names() {
    let traceback =
        "Traceback (most recent call last):\n  File \"s.py\", line 3, in run\nKeyError: 'rid-42'\n";
    let ended = |code: Option<i32>, signal: Option<i32>| Some(Ended { code, signal });
    // Unknown end: the last exception names it.
    assert_eq!(
        classify_text(traceback).kind,
        Some(FailureKind::ServerExited)
    );
    // A stop is no failure, however it is spelled.
    for stop in [
        ended(Some(0), None),
        ended(None, Some(2)),
        ended(None, Some(15)),
        ended(Some(130), None),
        ended(Some(-15), None),
    ] {
        let c = classify_text_ended(traceback, stop);
        assert_eq!(c.kind, None, "{stop:?}");
        assert!(c.message.unwrap().starts_with("stopped"));
    }
    // Any other end is classified by it and named by the exception.
    let c = classify_text_ended(traceback, ended(None, Some(11)));
    assert_eq!(c.kind, Some(FailureKind::SignalCrash));
    assert_eq!(
        c.message.as_deref(),
        Some("the server exited (killed by signal 11): KeyError: 'rid-42'")
    );
    let c = classify_text_ended(traceback, ended(Some(1), None));
    assert_eq!(c.kind, Some(FailureKind::ServerExited));
    // A cause a rule names wins over the stop that followed it.
    let cuda = "RuntimeError: CUDA error: unspecified launch failure\n";
    assert_eq!(
        classify_text_ended(cuda, ended(None, Some(2))).kind,
        Some(FailureKind::CudaError)
    );
    // A server-gone line names no cause: the signal does.
    let gone = "(APIServer pid=1) ERROR [async_llm.py:400] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.\n";
    assert_eq!(classify_text(gone).kind, Some(FailureKind::ServerExited));
    assert_eq!(
        classify_text_ended(gone, ended(None, Some(11))).kind,
        Some(FailureKind::SignalCrash)
    );
    assert_eq!(classify_text_ended(gone, ended(None, Some(15))).kind, None);
}

#[test]
fn every_cuda_fault_is_named_and_the_specific_ones_win() {
    for (text, kind) in [
        // The real H200 run of the gpu-torch harness: a faulting kernel.
        ("torch.AcceleratorError: CUDA error: unspecified launch failure", Some(FailureKind::CudaError)),
        ("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure", Some(FailureKind::CudaError)),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", Some(FailureKind::CudaIllegalAddress)),
        ("RuntimeError: CUDA error: out of memory", Some(FailureKind::CudaOom)),
        ("RuntimeError: [TM][ERROR] CUDA runtime error: out of memory /lmdeploy/src/turbomind/utils/memory_utils.cu:32", Some(FailureKind::CudaOom)),
        ("cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 8,589,934,592 bytes (allocated so far: 0 bytes).", Some(FailureKind::CudaOom)),
        ("RuntimeError: CUDA error: device-side assert triggered", Some(FailureKind::DeviceAssert)),
        ("RuntimeError: CUDA error: no kernel image is available for execution on the device", Some(FailureKind::NoKernelImage)),
        ("NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)", Some(FailureKind::NcclError)),
        ("INFO 08-13 [cuda.py:300] Using Flash Attention backend.", None),
    ] {
        assert_eq!(classify_text(text).kind, kind, "{text}");
    }
}
