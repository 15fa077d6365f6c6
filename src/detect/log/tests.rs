use std::sync::Arc;

use super::patterns::builtin_compiled;
use super::table::{Meaning, PATTERNS};
use super::*;
use crate::detect::fixtures::{
    CPU_SIGILL_LOG, HEALTHY_LOG, LINES, LLAMA_CRASH_LOG, SGLANG_CRASH_LOG, TGI_CRASH_LOG,
    VLLM_CRASH_LOG,
};
use crate::detect::strip_ansi;
use crate::model::FailureSource;

fn watch() -> LogWatch {
    LogWatch::new(Arc::new(LogPatterns::builtin()))
}

fn run(log: &str) -> LogWatch {
    let mut w = watch();
    for line in log.lines() {
        w.push(line);
    }
    w
}

#[test]
fn every_builtin_regex_compiles_and_table_fits_the_mask() {
    let compiled = builtin_compiled();
    assert!(compiled.quick.is_some());
    // More than 64 distinct literals turns off the SIMD prefilter and halves
    // throughput on benign lines (measured: 589 MB/s with 63, 302 with 70).
    assert!(
        compiled.owners.len() <= 64,
        "{} literals",
        compiled.owners.len()
    );
    assert!(PATTERNS.len() <= 128);
    for (i, p) in PATTERNS.iter().enumerate() {
        assert!(
            compiled.regexes[i].is_some(),
            "regex {i} failed: {}",
            p.regex
        );
        assert!(!p.literals.is_empty(), "entry {i} has no literal");
        for lit in p.literals {
            assert_eq!(
                *lit,
                lit.to_lowercase(),
                "literal {lit:?} must be lower case"
            );
        }
    }
}

#[test]
fn fixture_lines_classify_as_expected() {
    let patterns = LogPatterns::builtin();
    for (style, line, expected) in LINES {
        assert_eq!(&patterns.classify(line), expected, "[{style}] {line:?}");
    }
}

#[test]
fn every_fatal_kind_has_a_fixture_in_at_least_two_styles() {
    for kind in FailureKind::ALL
        .iter()
        .filter(|k| k.is_fatal_server_error())
    {
        let styles: std::collections::HashSet<&str> = LINES
            .iter()
            .filter(|(_, _, c)| *c == LineClass::Fatal(*kind))
            .map(|(s, _, _)| *s)
            .collect();
        assert!(styles.len() >= 2, "{kind:?} has fixtures from {styles:?}");
    }
}

/// Every regex match must be reachable through the prefilter: the literal
/// set of an entry has to cover its regex. Check it on the fixtures by
/// running the regexes directly, bypassing the prefilter.
#[test]
fn prefilter_never_hides_a_regex_match() {
    let compiled = builtin_compiled();
    for (_, line, _) in LINES {
        let text = strip_ansi(line);
        let mask = compiled.candidates(&text);
        for (i, re) in compiled.regexes.iter().enumerate() {
            if re.as_ref().is_some_and(|re| re.is_match(&text)) {
                assert!(
                    mask & (1u128 << i) != 0,
                    "entry {i} matched {line:?} without a literal hit"
                );
            }
        }
    }
}

#[test]
fn case_insensitive_and_ansi_inside_the_message() {
    let p = LogPatterns::builtin();
    assert_eq!(
        p.classify("runtimeerror: cuda ERROR: AN ILLEGAL INSTRUCTION WAS ENCOUNTERED"),
        LineClass::Fatal(FailureKind::CudaIllegalInstruction)
    );
    assert_eq!(
        p.classify(
            "RuntimeError: \u{1b}[31mCUDA error: an illegal\u{1b}[0m memory access was encountered"
        ),
        LineClass::Fatal(FailureKind::CudaIllegalAddress)
    );
}

#[test]
fn cpu_illegal_instruction_is_a_signal_crash() {
    let w = run(CPU_SIGILL_LOG);
    assert_eq!(w.first_fatal(), Some(FailureKind::SignalCrash));
    let f = w.failure().expect("failure");
    assert_eq!(f.message, "Illegal instruction (core dumped)");
}

#[test]
fn healthy_log_has_no_cause_and_is_ready() {
    let w = run(HEALTHY_LOG);
    assert_eq!(w.first_fatal(), None);
    assert_eq!(w.failure(), None);
    assert!(w.saw_ready());
    assert!(!w.server_gone());
}

#[test]
fn sglang_first_cause_wins_over_watchdog_and_sigquit() {
    let w = run(SGLANG_CRASH_LOG);
    assert_eq!(w.first_fatal(), Some(FailureKind::CudaIllegalInstruction));
    assert!(w.server_gone());
    assert_eq!(w.last_accept_len(), Some(3.10));
    let f = w.failure().expect("failure");
    assert_eq!(f.source, FailureSource::ServerLog);
    assert_eq!(
        f.message,
        "torch.AcceleratorError: CUDA error: an illegal instruction was encountered"
    );
    // 10 lines before (the traceback), the line, and the 9 that followed,
    // ranks 0 and 1 saying the same thing counted as one line.
    assert_eq!(f.evidence.len(), 19);
    assert!(f.evidence[15].starts_with("[2025-08-13 15:12:48 DP0 TP0 EP0]"));
    assert!(f.evidence[15].ends_with("(×2)"), "{}", f.evidence[15]);
    assert_eq!(f.evidence[10], f.message);
    assert!(f.evidence[0].contains("Decode batch"));
    assert!(f.evidence.iter().any(|l| l.contains("Watchdog caught")));
    assert_eq!(f.evidence.last().map(String::as_str), Some("Killed"));
}

#[test]
fn multi_rank_duplicates_keep_the_first_rank() {
    let mut w = watch();
    for rank in 0..8 {
        w.push(&format!(
            "[2025-08-13 15:12:48 DP{rank} TP{rank} EP{rank}] RuntimeError: CUDA error: an illegal memory access was encountered"
        ));
    }
    let f = w.failure().expect("failure");
    assert_eq!(f.kind, FailureKind::CudaIllegalAddress);
    assert!(f.message.starts_with("[2025-08-13 15:12:48 DP0 TP0 EP0]"));
    // The seven ranks that said the same are counted, not listed.
    assert_eq!(f.evidence, vec![format!("{} (×8)", f.message)]);
}

#[test]
fn repeated_lines_around_the_cause_are_counted_so_the_window_shows_what_happened() {
    let mut w = watch();
    w.push("INFO model loaded");
    w.push("INFO capturing cuda graphs");
    for _ in 0..40 {
        w.push("[rank3]:[W] ProcessGroupNCCL.cpp:1000 Watchdog heartbeat: no progress");
    }
    w.push("RuntimeError: CUDA error: an illegal instruction was encountered");
    for i in 0..25 {
        w.push(&format!(
            "(pid={i}) [rank3]:[W] ProcessGroupNCCL.cpp:1000 Watchdog heartbeat: no progress"
        ));
    }
    w.push("Killed");
    w.push("a line after the window is closed");
    let f = w.failure().expect("failure");
    assert_eq!(f.kind, FailureKind::CudaIllegalInstruction);
    assert_eq!(
        f.evidence,
        vec![
            "INFO model loaded".to_string(),
            "INFO capturing cuda graphs".to_string(),
            "[rank3]:[W] ProcessGroupNCCL.cpp:1000 Watchdog heartbeat: no progress (×40)"
                .to_string(),
            f.message.clone(),
            "(pid=0) [rank3]:[W] ProcessGroupNCCL.cpp:1000 Watchdog heartbeat: no progress (×25)"
                .to_string(),
            "Killed".to_string(),
            "a line after the window is closed".to_string(),
        ]
    );
}

#[test]
fn vllm_gone_line_is_replaced_by_the_real_cause() {
    let w = run(VLLM_CRASH_LOG);
    assert_eq!(w.first_fatal(), Some(FailureKind::CudaIllegalAddress));
    assert!(w.server_gone());
    assert_eq!(w.last_accept_len(), Some(2.91));
    let f = w.failure().expect("failure");
    assert!(f.message.starts_with("(EngineCore_0 pid=123) ERROR"));
    assert!(!f.message.contains('\u{1b}'));
    assert!(f.evidence.iter().all(|l| !l.contains('\u{1b}')));
    assert!(f.evidence.iter().any(|l| l.contains("EngineDeadError")));
}

#[test]
fn gone_alone_reads_as_server_exited() {
    let mut w = watch();
    w.push("INFO:     127.0.0.1:1 - \"POST /v1/completions HTTP/1.1\" 200 OK");
    assert_eq!(
        w.push("[2025-08-13 15:12:49] Received sigquit from a child process. It usually means the child failed."),
        LineClass::ServerGone
    );
    assert_eq!(w.first_fatal(), Some(FailureKind::ServerExited));
    let f = w.failure().expect("failure");
    assert_eq!(f.evidence.len(), 2);
    // A second "gone" line does not move the cause.
    w.push("vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue.");
    assert!(w.failure().is_some_and(|f| f.message.contains("sigquit")));
}

#[test]
fn llama_and_tgi_crash_logs() {
    let w = run(LLAMA_CRASH_LOG);
    assert_eq!(w.first_fatal(), Some(FailureKind::CudaIllegalAddress));
    assert!(w.saw_ready());
    assert_eq!(w.last_draft_acceptance(), Some(0.64479));
    assert_eq!(w.last_accept_len(), None);
    let f = w.failure().expect("failure");
    assert_eq!(f.evidence.len(), 9, "{:?}", f.evidence);

    let w = run(TGI_CRASH_LOG);
    assert_eq!(w.first_fatal(), Some(FailureKind::CudaOom));
}

#[test]
fn evidence_window_is_bounded_on_both_sides() {
    let mut w = watch();
    for i in 0..50 {
        w.push(&format!("INFO before {i}"));
    }
    w.push("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.");
    let f = w.failure().expect("failure");
    assert_eq!(f.evidence.len(), 11);
    assert_eq!(f.evidence[0], "INFO before 40");
    for i in 0..50 {
        w.push(&format!("INFO after {i}"));
    }
    let f = w.failure().expect("failure");
    assert_eq!(f.evidence.len(), 21);
    assert_eq!(f.evidence[20], "INFO after 9");
}

#[test]
fn tail_is_bounded_and_ordered() {
    let mut w = watch();
    assert!(w.tail(5).is_empty());
    for i in 0..1000 {
        w.push(&format!("line {i}"));
    }
    assert_eq!(w.tail(3), vec!["line 997", "line 998", "line 999"]);
    assert_eq!(w.tail(10_000).len(), TAIL_KEEP);
    assert_eq!(w.tail(10_000)[0], "line 800");
    assert_eq!(w.tail(0), Vec::<String>::new());
    assert_eq!(w.lines_seen(), 1000);
}

#[test]
fn giant_line_is_classified_and_stored_bounded() {
    let mut big = "x".repeat(1 << 20);
    big.push_str(" CUDA error: an illegal instruction was encountered");
    let mut w = watch();
    assert_eq!(
        w.push(&big),
        LineClass::Fatal(FailureKind::CudaIllegalInstruction)
    );
    let f = w.failure().expect("failure");
    assert!(f.message.len() <= crate::detect::text::MAX_KEPT_LINE + 3);
    assert!(w.tail(1)[0].len() <= crate::detect::text::MAX_KEPT_LINE + 3);
}

#[test]
fn extra_patterns_are_checked_first() {
    let extra = vec![
        ("MyKernelPanic".to_string(), FailureKind::TritonError),
        (r"(?i)weird\s+hang".to_string(), FailureKind::Stalled),
        // Overrides a builtin look-alike on purpose.
        (
            r"NCCL INFO.*Init FAILED".to_string(),
            FailureKind::NcclError,
        ),
    ];
    let p = LogPatterns::with_extra(&extra).expect("valid");
    assert_eq!(
        p.classify("boom MyKernelPanic"),
        LineClass::Fatal(FailureKind::TritonError)
    );
    assert_eq!(
        p.classify("a WEIRD   hang"),
        LineClass::Fatal(FailureKind::Stalled)
    );
    assert_eq!(p.classify("mykernelpanic"), LineClass::Plain);
    assert_eq!(
        p.classify("node1:1:1 [0] NCCL INFO comm 0x1 Init FAILED"),
        LineClass::Fatal(FailureKind::NcclError)
    );
    assert_eq!(
        p.classify("CUDA error: an illegal instruction was encountered"),
        LineClass::Fatal(FailureKind::CudaIllegalInstruction)
    );
    assert!(LogPatterns::with_extra(&[("(".to_string(), FailureKind::Stalled)]).is_err());
    let none = LogPatterns::with_extra(&[]).expect("empty");
    assert_eq!(none.classify("MyKernelPanic"), LineClass::Plain);
    assert!(format!("{p:?}").contains("MyKernelPanic"));
}

#[test]
fn spec_stats_need_a_number() {
    let p = LogPatterns::builtin();
    assert_eq!(
        p.classify("Decode batch. accept len: nan"),
        LineClass::Plain
    );
    assert_eq!(p.classify("accept len: 3.0"), LineClass::Plain);
    assert_eq!(
        p.classify("Decode batch. #running-req: 1, accept len: 1"),
        LineClass::SpecStats { accept_len: 1.0 }
    );
    assert_eq!(
        p.classify("SpecDecoding metrics: Accepted: 10 tokens, Drafted: 20 tokens, Mean acceptance length: 1.50"),
        LineClass::SpecStats { accept_len: 1.5 }
    );
}

fn entry_index(meaning: Meaning, regex_part: &str) -> usize {
    PATTERNS
        .iter()
        .position(|p| p.meaning == meaning && p.regex.contains(regex_part))
        .unwrap_or(usize::MAX)
}

/// Literals that overlap (one a prefix of another, or sharing bytes) must
/// all be reported, or an entry could be skipped without its regex running.
#[test]
fn candidates_include_overlapping_literals() {
    let compiled = builtin_compiled();
    let benign = entry_index(Meaning::Benign, "nccl info");
    let nccl = entry_index(Meaning::Fatal(FailureKind::NcclError), "nccl error");
    let dmesg = entry_index(Meaning::Fatal(FailureKind::OomKilled), "killed? process");
    let bare = entry_index(Meaning::Fatal(FailureKind::OomKilled), "^");
    let oom = entry_index(Meaning::Fatal(FailureKind::CudaOom), "cuda|hip");
    for i in [benign, nccl, dmesg, bare, oom] {
        assert!(i < PATTERNS.len());
    }
    let has = |mask: u128, i: usize| mask & (1u128 << i) != 0;

    // "nccl info" is listed before its prefix "nccl" and carries its owners.
    let m = compiled.candidates("x NCCL INFO y");
    assert!(has(m, benign) && has(m, nccl));
    // Overlapping at different starts: "out of memory: killed process".
    let m = compiled.candidates("Out of memory: Killed process 4242 (python)");
    assert!(has(m, oom) && has(m, dmesg) && has(m, bare));
    // Literal at the very end, and repeated literals.
    let m = compiled.candidates("aaa killedkilled");
    assert!(has(m, bare));
    assert_eq!(compiled.candidates(""), 0);
    assert_eq!(compiled.candidates("plain decode line"), 0);
}
