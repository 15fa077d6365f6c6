//! A server process that exited: which failure kind its exit status and last
//! lines point to, when its log named no cause.

use super::traceback;
use crate::model::{Failure, FailureKind, FailureSource};

const SIGILL: i32 = 4;
const SIGABRT: i32 = 6;
const SIGBUS: i32 = 7;
const SIGKILL: i32 = 9;
const SIGSEGV: i32 = 11;

/// Kind for a server process that exited.
///
/// A specific cause already found in its log (`logged`, from
/// `LogWatch::first_fatal`) wins over anything the exit status suggests: a
/// CUDA fault usually ends in SIGABRT, and the fault is the news. Otherwise
/// SIGKILL with `Killed` (or a kernel OOM line) in the log tail is the OOM
/// killer, SIGSEGV/SIGILL/SIGABRT/SIGBUS is a crash, and anything else is a
/// plain exit. Shell-style codes (128 + signal) and negative codes (-signal,
/// as Python reports them) are read as signals too.
pub fn classify_exit(
    code: Option<i32>,
    signal: Option<i32>,
    logged: Option<FailureKind>,
    tail: &[String],
) -> FailureKind {
    if let Some(kind) = logged {
        if kind != FailureKind::ServerExited {
            return kind;
        }
    }
    let signal = signal.or(match code {
        Some(c) if (129..=159).contains(&c) => Some(c - 128),
        Some(c) if (-31..=-1).contains(&c) => Some(-c),
        _ => None,
    });
    let oom_in_tail = tail.iter().any(|line| {
        let t = line.trim();
        let lower = t.to_ascii_lowercase();
        t == "Killed"
            || lower.ends_with(" killed")
            || lower.contains("out of memory: killed process")
            || lower.contains(" killed ")
    });
    match signal {
        Some(SIGKILL) if oom_in_tail => FailureKind::OomKilled,
        Some(SIGSEGV | SIGILL | SIGABRT | SIGBUS) => FailureKind::SignalCrash,
        _ => FailureKind::ServerExited,
    }
}

/// Lines of a log tail kept as evidence when it shows no exception.
const TAIL_EVIDENCE: usize = 20;

/// A server's exit that no log pattern explained: the kind its exit status
/// says, named by the last exception it printed (a Python traceback's last
/// line, C++'s `terminate called`), with the traceback as the evidence;
/// without one, the last lines of its log. `what` says when it exited
/// (`server exited while the cell ran`), `how` how (`exit code 1`).
pub fn exit_failure(
    code: Option<i32>,
    signal: Option<i32>,
    what: &str,
    how: &str,
    tail: &[String],
) -> Failure {
    let kind = classify_exit(code, signal, None, tail);
    match traceback::last_exception(tail) {
        Some(e) => Failure::new(
            kind,
            FailureSource::Exit,
            format!("{what} ({how}): {}", e.line),
        )
        .with_evidence(e.evidence),
        None => {
            let last = &tail[tail.len().saturating_sub(TAIL_EVIDENCE)..];
            Failure::new(kind, FailureSource::Exit, format!("{what} ({how})"))
                .with_evidence(traceback::collapse(last))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn exit_classification() {
        use FailureKind::*;
        let killed = lines(&["INFO ok", "Killed"]);
        assert_eq!(classify_exit(None, Some(9), None, &killed), OomKilled);
        assert_eq!(classify_exit(Some(137), None, None, &killed), OomKilled);
        let bash = lines(&["bash: line 1:  4242 Killed                  python -m sglang"]);
        assert_eq!(classify_exit(None, Some(9), None, &bash), OomKilled);
        // SIGKILL without evidence of the OOM killer may be our own stop.
        assert_eq!(classify_exit(None, Some(9), None, &[]), ServerExited);
        assert_eq!(classify_exit(None, Some(11), None, &[]), SignalCrash);
        assert_eq!(classify_exit(None, Some(4), None, &[]), SignalCrash);
        assert_eq!(classify_exit(None, Some(6), None, &[]), SignalCrash);
        assert_eq!(classify_exit(None, Some(7), None, &[]), SignalCrash);
        assert_eq!(classify_exit(Some(139), None, None, &[]), SignalCrash);
        assert_eq!(classify_exit(Some(-11), None, None, &[]), SignalCrash);
        assert_eq!(classify_exit(Some(1), None, None, &killed), ServerExited);
        assert_eq!(classify_exit(Some(0), None, None, &[]), ServerExited);
        assert_eq!(classify_exit(None, Some(15), None, &[]), ServerExited);
        assert_eq!(classify_exit(None, None, None, &[]), ServerExited);
        // A logged CUDA cause beats the SIGABRT it leads to.
        assert_eq!(
            classify_exit(None, Some(6), Some(CudaIllegalInstruction), &[]),
            CudaIllegalInstruction
        );
        assert_eq!(classify_exit(Some(1), None, Some(CudaOom), &[]), CudaOom);
        // A weak "server gone" log line does not hide the signal.
        assert_eq!(
            classify_exit(None, Some(11), Some(ServerExited), &[]),
            SignalCrash
        );
        assert_eq!(
            classify_exit(Some(i32::MIN), Some(i32::MAX), None, &[]),
            ServerExited
        );
    }
}
