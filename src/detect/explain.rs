//! `sweeptop classify --explain`: not only the kind, but which rule decided
//! it, on which line, and the lines around it, so a user can write a
//! `[[patterns]]` entry with confidence.

use serde::Serialize;

use super::traceback::runs;
use super::traceback::{judge, Verdict};
use super::{
    classify_text_ended, clean_line, find_error_body, is_overflow_message, Classification, Ended,
    LineClass, LogPatterns, EVIDENCE_CONTEXT,
};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub classification: Classification,
    /// How the kind was decided, in words.
    pub rule: String,
    /// The deciding line, 1-based, when one line decided it.
    pub line: Option<usize>,
    /// The lines around it, each `N: text`, the deciding one marked `>`.
    pub window: Vec<String>,
}

pub fn explain(text: &str, ended: Option<Ended>) -> Explanation {
    let classification = classify_text_ended(text, ended);
    let lines: Vec<&str> = text.lines().collect();
    let (rule, at) = decide(text, &lines, &classification, ended);
    let window = match at {
        Some(i) => window(&lines, i),
        None => Vec::new(),
    };
    Explanation {
        classification,
        rule,
        line: at.map(|i| i + 1),
        window,
    }
}

/// Up to [`EVIDENCE_CONTEXT`] different lines on each side of line `at`
/// (0-based), each `N: text`, the deciding one marked `>`; a line repeated in
/// a row is shown once as `N-M: text (×K)`, so forty watchdog lines before a
/// fault leave room for what came before them.
fn window(lines: &[&str], at: usize) -> Vec<String> {
    let cleaned = |j: usize| clean_line(lines[j]);
    // Runs of equal lines, walking away from `at`.
    let mut before = runs((0..at).rev(), cleaned, EVIDENCE_CONTEXT);
    before.reverse();
    let after = runs(at + 1..lines.len(), cleaned, EVIDENCE_CONTEXT);
    let show = |(first, last): (usize, usize), mark: char| {
        let text = cleaned(first);
        if first == last {
            format!("{mark}{:>6}: {text}", first + 1)
        } else {
            let n = last - first + 1;
            format!(
                "{mark}{:>6}: {text} (×{n})",
                format!("{}-{}", first + 1, last + 1)
            )
        }
    };
    let mut out: Vec<String> = before.into_iter().map(|r| show(r, ' ')).collect();
    out.push(show((at, at), '>'));
    out.extend(after.into_iter().map(|r| show(r, ' ')));
    out
}

/// Which rule decided, and on which line (0-based).
fn decide(
    text: &str,
    lines: &[&str],
    c: &Classification,
    ended: Option<Ended>,
) -> (String, Option<usize>) {
    let Some(kind) = c.kind else {
        if let Some(e) = ended.filter(|e| e.is_stop()) {
            return (
                format!(
                    "the process was stopped ({}) and no rule names a failure before it",
                    e.describe()
                ),
                None,
            );
        }
        let cleaned: Vec<String> = lines.iter().map(|l| clean_line(l)).collect();
        return match judge(&cleaned) {
            Some(Verdict::Handled { exception, served }) => (
                format!("a traceback ({exception}) the server survived: it served on after it (this line)"),
                Some(served),
            ),
            Some(Verdict::Stopped { at }) => (
                "the exceptions came after the server was being stopped (this line): its shutdown's, not a failure".into(),
                Some(at),
            ),
            _ => (
                "nothing matched: no rule names a failure in this text".into(),
                None,
            ),
        };
    };
    if let Some((status, body)) = find_error_body(text) {
        let first = body.lines().next().unwrap_or(&body);
        let at = lines
            .iter()
            .position(|l| l.contains(first))
            .or_else(|| lines.iter().position(|l| l.contains('{')));
        return (
            format!("a JSON error body (HTTP {status}) read by the HTTP classifier"),
            at,
        );
    }
    let patterns = LogPatterns::builtin();
    for (i, line) in lines.iter().enumerate() {
        if let (LineClass::Fatal(k), Some(rule)) = patterns.explain(line) {
            if k == kind {
                return (rule, Some(i));
            }
        }
    }
    if let Some(i) = lines.iter().position(|l| is_overflow_message(l)) {
        return (
            "a context-overflow message read by the HTTP classifier".into(),
            Some(i),
        );
    }
    let at = c
        .evidence
        .as_deref()
        .and_then(|e| lines.iter().rposition(|l| clean_line(l).ends_with(e)));
    match at {
        Some(i) if ended.is_some() => (
            format!(
                "no pattern matched; the process's end names the kind ({kind}), the last exception printed the message"
            ),
            Some(i),
        ),
        Some(i) => (
            "no pattern matched; the last exception printed names it (server_exited)".into(),
            Some(i),
        ),
        None => (
            "the server's exit, from its last lines (no single line decided)".into(),
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::FailureKind;

    #[test]
    fn names_the_rule_the_line_and_its_window() {
        let mut text = String::new();
        for i in 0..15 {
            text.push_str(&format!("INFO line {i}\n"));
        }
        text.push_str("[2025-08-13 15:12:48 TP0] RuntimeError: CUDA error: an illegal instruction was encountered\n");
        text.push_str("INFO after\n");
        let e = explain(&text, None);
        assert_eq!(
            e.classification.kind,
            Some(FailureKind::CudaIllegalInstruction)
        );
        assert_eq!(e.line, Some(16));
        assert!(e.rule.starts_with("builtin pattern "), "{}", e.rule);
        assert!(
            e.rule.contains("illegal instruction was encountered"),
            "{}",
            e.rule
        );
        assert_eq!(e.window.len(), 12);
        assert!(
            e.window[10].starts_with(">    16: [2025-08-13"),
            "{:?}",
            e.window
        );

        let e = explain(
            "Traceback (most recent call last):\n  File \"x.py\", line 1\nKeyError: 'rid'\n",
            None,
        );
        assert_eq!(e.classification.kind, Some(FailureKind::ServerExited));
        assert_eq!(e.line, Some(3));
        assert!(e.rule.contains("last exception"), "{}", e.rule);

        let e = explain(
            r#"{"object":"error","message":"This model's maximum context length is 2048 tokens. However, you requested 2100 tokens (2000 in the messages, 100 in the completion).","type":"BadRequestError","code":400}"#,
            None,
        );
        assert_eq!(e.classification.kind, Some(FailureKind::ContextOverflow));
        assert!(e.rule.contains("JSON error body (HTTP 400)"), "{}", e.rule);
        assert_eq!(e.line, Some(1));

        let e = explain("all good\n", None);
        assert_eq!(e.classification.kind, None);
        assert_eq!(e.line, None);
    }

    #[test]
    fn repeated_lines_in_the_window_are_counted_once() {
        let mut text = String::from("INFO model loaded\n");
        for _ in 0..40 {
            text.push_str(
                "[rank3]:[W] ProcessGroupNCCL.cpp:1000 Watchdog heartbeat: no progress\n",
            );
        }
        text.push_str("RuntimeError: CUDA error: an illegal instruction was encountered\nKilled\n");
        let e = explain(&text, None);
        assert_eq!(e.line, Some(42));
        assert_eq!(
            e.window,
            vec![
                "      1: INFO model loaded".to_string(),
                "   2-41: [rank3]:[W] ProcessGroupNCCL.cpp:1000 Watchdog heartbeat: no progress (×40)".to_string(),
                ">    42: RuntimeError: CUDA error: an illegal instruction was encountered".to_string(),
                "     43: Killed".to_string(),
            ]
        );
    }
}
