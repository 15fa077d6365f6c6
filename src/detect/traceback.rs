//! A crash no pattern knows is still named: the last exception a server
//! printed (a Python traceback's final line, or C++'s `terminate called
//! after throwing an instance of 'X'` with its `what():`), and the traceback
//! that led to it, with repeated lines collapsed (`… ×40`).

use super::text::clean_line;

/// The most lines an evidence window keeps.
pub const MAX_EVIDENCE: usize = 40;

/// The last exception in `lines`: its line (prefixes as printed) and the
/// window that shows it (from the traceback's start, repeats collapsed).
#[derive(Debug, Clone, PartialEq)]
pub struct Exception {
    /// `ValueError: No available memory for the cache blocks.`, without
    /// the log prefix.
    pub line: String,
    pub evidence: Vec<String>,
}

/// What is left of a log line once its usual prefixes are gone: vLLM's
/// `(EngineCore_0 pid=123) ERROR 08-13 15:12:48 [core.py:700] `, SGLang's
/// `[2025-08-13 15:12:48 TP0] `, TGI's `2025-08-13T15:12:48.123Z ERROR
/// text_generation_launcher: `, Ray's `(pid=42) `.
pub(crate) fn body(line: &str) -> &str {
    let mut s = strip_journald(line.trim());
    // docker compose's `service  | `, buildkite's `| `.
    if let Some(i) = s.find("| ") {
        if !s[..i].trim().contains(' ') {
            s = s[i + 2..].trim_start();
        }
    }
    // `(EngineCore_0 pid=123)`, `(pid=42)`, `(VllmWorkerProcess pid=409)`.
    if s.starts_with('(') {
        if let Some(end) = s.find(')') {
            if s[..end].contains("pid=") {
                s = s[end + 1..].trim_start();
            }
        }
    }
    // `[2025-08-13 15:12:48 TP0]`, `[rank0]:`, `[TensorRT-LLM][ERROR]`.
    while s.starts_with('[') {
        let Some(end) = s.find(']') else { break };
        let inner = &s[1..end];
        let tag = !inner.contains(' ') && inner.len() <= 24;
        if inner.starts_with(|c: char| c.is_ascii_digit()) || inner.starts_with("rank") || tag {
            s = s[end + 1..].trim_start_matches(':').trim_start();
        } else {
            break;
        }
    }
    // `ERROR 08-13 15:12:48 [core.py:700] ` (vLLM), `ERROR text_generation_launcher: ` (TGI).
    for level in ["ERROR ", "CRITICAL ", "WARNING ", "INFO "] {
        if let Some(rest) = strip_timestamp(s).strip_prefix(level) {
            let rest = rest.trim_start();
            // vLLM: date, time, then `[file.py:N]`.
            let rest = match rest.find("] ") {
                Some(i) if rest.starts_with(|c: char| c.is_ascii_digit()) && i < 40 => {
                    &rest[i + 2..]
                }
                _ => rest,
            };
            // TGI: `text_generation_launcher: `.
            let rest = match rest.split_once(": ") {
                Some((target, r))
                    if !target.contains(' ')
                        && !target.contains('.')
                        && target.contains('_')
                        && !is_exception_line(target) =>
                {
                    r
                }
                _ => rest,
            };
            return rest.trim_start();
        }
    }
    s
}

/// journald's `Sep 05 11:48:04 host bash[20397]: `, dropped.
fn strip_journald(s: &str) -> &str {
    let b = s.as_bytes();
    let month = b.len() > 16 && b[..3].iter().all(u8::is_ascii_alphabetic) && b[3] == b' ';
    let clock = month && b[9] == b':' && b[12] == b':';
    if !clock {
        return s;
    }
    // `host unit[pid]: ` after the clock.
    match s[15..].find("]: ") {
        Some(i) if s[15..15 + i].contains('[') => &s[15 + i + 3..],
        _ => s,
    }
}

/// `2025-08-13T15:12:48.123456Z ` at the start of a line, dropped.
fn strip_timestamp(s: &str) -> &str {
    let bytes = s.as_bytes();
    if bytes.len() > 20 && bytes[..4].iter().all(u8::is_ascii_digit) && bytes[4] == b'-' {
        if let Some(i) = s.find(' ') {
            return s[i + 1..].trim_start();
        }
    }
    s
}

/// `ValueError: …`, `torch.OutOfMemoryError: …`, `KeyError`, `SystemExit: 1`.
fn is_exception_line(b: &str) -> bool {
    let name_end = b.find(": ").unwrap_or(b.len());
    let name = b[..name_end].trim_end_matches(':');
    if name.is_empty() || name.len() > 120 || name.contains(' ') {
        return false;
    }
    let last = name.rsplit(['.', ':']).next().unwrap_or(name);
    let ident = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    name.split(['.', ':']).filter(|p| !p.is_empty()).all(ident)
        && last.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && [
            "Error",
            "Exception",
            "Exit",
            "Interrupt",
            "Fault",
            "Failure",
        ]
        .iter()
        .any(|s| last.ends_with(s))
}

/// The last exception in `lines`, if any.
pub fn last_exception(lines: &[String]) -> Option<Exception> {
    last_exception_at(lines).map(|(_, e)| e)
}

/// What a log's exceptions mean when no pattern named a cause and nothing
/// says how the process ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The last exception before any stop, and nothing served after it: the
    /// server died of it.
    Crash(Exception),
    /// The server answered requests after its last exception (line `served`,
    /// 0-based): a request handler caught it.
    Handled { exception: String, served: usize },
    /// Someone stopped the server (line `at`): the exceptions after it are
    /// its shutdown's (`KeyboardInterrupt`, `CancelledError`), and none came
    /// before it that the server did not survive.
    Stopped { at: usize },
}

/// Judge `lines` (cleaned log lines) by their exceptions; `None` when they
/// hold none.
pub fn judge(lines: &[String]) -> Option<Verdict> {
    let bodies: Vec<String> = lines.iter().map(|l| body(l).to_ascii_lowercase()).collect();
    let stop = bodies.iter().position(|b| is_stop(b));
    let before = &lines[..stop.unwrap_or(lines.len())];
    match last_exception_at(before) {
        Some((at, e)) => {
            if let Some(i) = bodies[at + 1..].iter().position(|b| is_serving(b)) {
                return Some(Verdict::Handled {
                    exception: e.line,
                    served: at + 1 + i,
                });
            }
            // A task cancelled by the stop, or an exception whose handling
            // the interrupt cut short (`During handling of the above
            // exception…` leading into it), is the shutdown's.
            if let Some(s) = stop {
                let cancelled = e
                    .line
                    .split(':')
                    .next()
                    .is_some_and(|n| n.ends_with("CancelledError"));
                let chained = bodies[at + 1..s].iter().any(|b| {
                    b.starts_with("during handling of the above exception")
                        || b.starts_with("the above exception was the direct cause")
                });
                if cancelled || chained {
                    return Some(Verdict::Stopped { at: s });
                }
            }
            Some(Verdict::Crash(e))
        }
        None => {
            let at = stop?;
            last_exception_at(&lines[at..]).map(|_| Verdict::Stopped { at })
        }
    }
}

/// A line that says the server was being stopped from outside: an
/// interrupt, a termination signal received, a shutdown begun.
fn is_stop(lower_body: &str) -> bool {
    const STOPS: &[&str] = &[
        "keyboardinterrupt",
        "received sigint",
        "received sigterm",
        "sigint received",
        "sigterm received",
        "caught sigint",
        "caught sigterm",
        "received signal 2,",
        "received signal 15,",
        "interrupted by user",
        "shutting down",
    ];
    STOPS.iter().any(|s| lower_body.contains(s))
}

/// A line that shows the server answering a request or making progress:
/// an access log line with its status, a batch or throughput line.
fn is_serving(lower_body: &str) -> bool {
    const SERVING: &[&str] = &[
        " http/1.1\" ",
        " http/1.0\" ",
        " http/2\" ",
        "avg prompt throughput",
        "prefill batch",
        "decode batch",
        "log_server_r: request: ",
        "log_server_r: done request",
        "launch_slot_",
        "print_timing",
    ];
    SERVING.iter().any(|s| lower_body.contains(s))
}

fn last_exception_at(lines: &[String]) -> Option<(usize, Exception)> {
    let bodies: Vec<&str> = lines.iter().map(|l| body(l)).collect();
    let mut found: Option<(usize, String)> = None;
    // Python's `Exception ignored in: …` heads an exception it could not
    // raise (a destructor's): printed and dropped, never the process's end.
    let mut ignored = false;
    for (i, b) in bodies.iter().enumerate() {
        if b.starts_with("Exception ignored in") {
            ignored = true;
            continue;
        }
        if ignored {
            if is_exception_line(b) {
                ignored = false;
            }
            continue;
        }
        if let Some(rest) = b.strip_prefix("terminate called after throwing an instance of ") {
            let what = bodies
                .get(i + 1)
                .and_then(|n| n.trim_start().strip_prefix("what():"))
                .map(str::trim);
            let line = match what {
                Some(w) => format!("terminate called: {} ({w})", rest.trim_matches('\'')),
                None => format!("terminate called: {}", rest.trim_matches('\'')),
            };
            found = Some((i, line));
        } else if is_exception_line(b) {
            found = Some((i, b.to_string()));
        }
    }
    let (at, line) = found?;
    let start = bodies[..=at]
        .iter()
        .rposition(|b| b.starts_with("Traceback (most recent call last)"))
        .unwrap_or(at.saturating_sub(MAX_EVIDENCE / 2));
    let evidence = collapse(&lines[start..=at.min(lines.len() - 1)]);
    Some((
        at,
        Exception {
            line: clean_line(&line),
            evidence,
        },
    ))
}

/// Runs of a line repeated in a row (the same text after its prefix), met
/// in the order `ids` gives, at most `limit` of them: each as the lowest and
/// the highest index it covers. The one grouping behind every evidence
/// window: the live one, `--explain`'s and a traceback's.
pub(crate) fn runs<S: AsRef<str>>(
    ids: impl Iterator<Item = usize>,
    line: impl Fn(usize) -> S,
    limit: usize,
) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    let mut last: Option<S> = None;
    for j in ids {
        let l = line(j);
        if let (Some(prev), Some(run)) = (&last, out.last_mut()) {
            if body(prev.as_ref()) == body(l.as_ref()) {
                *run = (run.0.min(j), run.1.max(j));
                continue;
            }
        }
        if out.len() == limit {
            break;
        }
        out.push((j, j));
        last = Some(l);
    }
    out
}

/// Consecutive repeats of a line (the same text after its prefix) become one
/// line marked `(×N)`; a window longer than [`MAX_EVIDENCE`] keeps its start
/// and its end around a `… N lines …` marker.
pub fn collapse(lines: &[String]) -> Vec<String> {
    let mut out: Vec<String> = runs(0..lines.len(), |i| lines[i].as_str(), usize::MAX)
        .into_iter()
        .map(|(first, last)| match last - first + 1 {
            1 => lines[first].clone(),
            n => format!("{} (×{n})", lines[first]),
        })
        .collect();
    if out.len() > MAX_EVIDENCE {
        let head = 5;
        let tail = MAX_EVIDENCE - head - 1;
        let cut = out.len() - head - tail;
        let mut kept: Vec<String> = out[..head].to_vec();
        kept.push(format!("… {cut} lines …"));
        kept.extend_from_slice(&out[out.len() - tail..]);
        out = kept;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn a_python_traceback_is_named_by_its_last_line() {
        // vLLM 0.32's startup failure, as its engine process prints it.
        let log = lines(
            "(EngineCore_DP0 pid=4382) INFO 12-04 02:16:38 [core.py:133] Initializing a V1 LLM engine\n\
             (EngineCore_DP0 pid=4382) ERROR 12-04 02:16:40 [core.py:708] EngineCore failed to start.\n\
             (EngineCore_DP0 pid=4382) ERROR 12-04 02:16:40 [core.py:708] Traceback (most recent call last):\n\
             (EngineCore_DP0 pid=4382) ERROR 12-04 02:16:40 [core.py:708]   File \"/v/core.py\", line 699, in run_engine_core\n\
             (EngineCore_DP0 pid=4382) ERROR 12-04 02:16:40 [core.py:708]     engine_core = EngineCoreProc(*args, **kwargs)\n\
             (EngineCore_DP0 pid=4382) ERROR 12-04 02:16:40 [core.py:708] RuntimeError: Engine core initialization failed. Failed core proc(s): {}\n\
             (APIServer pid=4353) INFO 12-04 02:16:41 [launcher.py:99] Shutting down",
        );
        let e = last_exception(&log).unwrap();
        assert_eq!(
            e.line,
            "RuntimeError: Engine core initialization failed. Failed core proc(s): {}"
        );
        assert_eq!(e.evidence.len(), 4, "{:?}", e.evidence);
        assert!(e.evidence[0].contains("Traceback (most recent call last)"));
    }

    #[test]
    fn cpp_terminate_and_prefixes_of_every_server() {
        let log = lines(
            "terminate called after throwing an instance of 'c10::Error'\n  what():  CUDA driver error: unknown error",
        );
        assert_eq!(
            last_exception(&log).unwrap().line,
            "terminate called: c10::Error (CUDA driver error: unknown error)"
        );
        for (line, want) in [
            ("[2025-08-13 15:12:48 TP0] KeyError: 'rid-42'", "KeyError: 'rid-42'"),
            ("2025-08-13T15:12:48.123456Z ERROR text_generation_launcher: torch.distributed.DistStoreError: timed out", "torch.distributed.DistStoreError: timed out"),
            ("(pid=42) ray.exceptions.RayActorError: The actor died", "ray.exceptions.RayActorError: The actor died"),
            ("AssertionError", "AssertionError"),
        ] {
            assert_eq!(last_exception(&lines(line)).unwrap().line, want, "{line}");
        }
        // Not exceptions: prose, warnings, a logger's name.
        for line in [
            "INFO: Error rate is 0.0%",
            "Note: ValueError handling changed in 0.5",
            "WARNING 08-13 15:12:48 [x.py:1] some Error happened",
            "error: unrecognized arguments",
        ] {
            assert_eq!(last_exception(&lines(line)), None, "{line}");
        }
    }

    #[test]
    fn a_traceback_the_server_served_on_after_is_handled() {
        // vLLM's chat handler catching a malformed body: logged, answered
        // 400, and the next request served.
        let log = lines(
            "INFO:     127.0.0.1:40000 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK\n\
             ERROR 08-13 15:12:48 [serving_chat.py:222] Error in preprocessing prompt inputs\n\
             ERROR 08-13 15:12:48 [serving_chat.py:222] Traceback (most recent call last):\n\
             ERROR 08-13 15:12:48 [serving_chat.py:222]   File \"/v/serving_chat.py\", line 200, in create_chat_completion\n\
             ERROR 08-13 15:12:48 [serving_chat.py:222] json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)\n\
             INFO:     127.0.0.1:40002 - \"POST /v1/chat/completions HTTP/1.1\" 400 Bad Request\n\
             INFO:     127.0.0.1:40004 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
        );
        assert_eq!(
            judge(&log),
            Some(Verdict::Handled {
                exception:
                    "json.decoder.JSONDecodeError: Expecting value: line 1 column 1 (char 0)".into(),
                served: 5
            })
        );
        // The same traceback with nothing after it: the server died of it.
        assert!(
            matches!(judge(&log[..5]), Some(Verdict::Crash(e)) if e.line.starts_with("json.decoder"))
        );
    }

    #[test]
    fn the_shutdown_of_a_stopped_server_is_not_a_crash() {
        // Ctrl-C (or sweeptop's SIGINT) under uvicorn and asyncio.
        let stopped = lines(
            "INFO:     127.0.0.1:40004 - \"POST /v1/completions HTTP/1.1\" 200 OK\n\
             INFO:     Shutting down\n\
             INFO:     Waiting for application shutdown.\n\
             Traceback (most recent call last):\n\
             \x20 File \"/usr/lib/python3.12/asyncio/runners.py\", line 118, in run\n\
             asyncio.exceptions.CancelledError\n\
             \n\
             During handling of the above exception, another exception occurred:\n\
             \n\
             Traceback (most recent call last):\n\
             KeyboardInterrupt",
        );
        assert_eq!(judge(&stopped), Some(Verdict::Stopped { at: 1 }));
        // The interrupt's own traceback, no shutdown line first.
        let interrupted = lines(
            "Traceback (most recent call last):\n\
             \x20 File \"/s/server.py\", line 9, in serve_forever\n\
             asyncio.exceptions.CancelledError\n\
             \n\
             During handling of the above exception, another exception occurred:\n\
             \n\
             KeyboardInterrupt",
        );
        assert_eq!(judge(&interrupted), Some(Verdict::Stopped { at: 6 }));
        // A crash that the server then shut down after is still the crash.
        let crashed = lines(
            "Traceback (most recent call last):\n\
             \x20 File \"/s/model_runner.py\", line 9, in forward\n\
             RuntimeError: Expected all tensors to be on the same device\n\
             INFO:     Shutting down\n\
             Traceback (most recent call last):\n\
             asyncio.exceptions.CancelledError",
        );
        assert!(
            matches!(judge(&crashed), Some(Verdict::Crash(e)) if e.line.starts_with("RuntimeError: Expected")),
            "{:?}",
            judge(&crashed)
        );
        assert_eq!(judge(&lines("INFO: all good")), None);
    }

    #[test]
    fn an_exception_python_ignored_is_not_the_last_one() {
        let log = lines(
            "Generation Aborted\n\
             Exception ignored in: <function Variable.__del__ at 0x7f00>\n\
             Traceback (most recent call last):\n\
             \x20 File \"tkinter/__init__.py\", line 363, in __del__\n\
             RuntimeError: main thread is not in main loop",
        );
        assert_eq!(last_exception(&log), None);
        assert_eq!(judge(&log), None);
    }

    #[test]
    fn repeats_collapse_and_long_windows_keep_both_ends() {
        let mut log = vec!["Traceback (most recent call last):".to_string()];
        for _ in 0..40 {
            log.push("[2025-08-13 15:12:48 TP0] retrying allocation".into());
        }
        log.push("torch.OutOfMemoryError: CUDA out of memory.".into());
        let e = last_exception(&log).unwrap();
        assert_eq!(e.evidence.len(), 3, "{:?}", e.evidence);
        assert!(e.evidence[1].ends_with("(×40)"), "{:?}", e.evidence);
        let long: Vec<String> = (0..100).map(|i| format!("line {i}")).collect();
        let c = collapse(&long);
        assert_eq!(c.len(), MAX_EVIDENCE);
        assert_eq!(c[5], "… 61 lines …");
        assert_eq!(c.last().unwrap(), "line 99");
    }
}
