//! The pattern table compiled: a literal automaton that rules out most
//! lines in one scan, the regexes of the entries whose literals a line holds,
//! and a plan's own entries checked first.

use std::sync::{Arc, OnceLock};

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex::{Regex, RegexSet};

use super::table::{Meaning, PATTERNS};
use super::LineClass;
use crate::detect::text::strip_ansi;
use crate::model::FailureKind;

/// Which entry decided a line: the plan's N-th, or the builtin table's.
#[derive(Debug, Clone, Copy)]
pub(super) enum Rule {
    Plan(usize),
    Builtin(usize),
}

/// The compiled builtin table, built once per process.
pub(super) struct Compiled {
    /// Leftmost-first automaton over the distinct literals, searched in the
    /// ASCII-lowercased line: it gets a SIMD prefilter, so a line with no
    /// literal costs one fast scan. `None` only if it could not be built, in
    /// which case every entry is a candidate (slow but correct).
    pub quick: Option<AhoCorasick>,
    /// Distinct literal index -> bit set of the entries that own it or any
    /// literal that is a prefix of it (see `build`).
    pub owners: Vec<u128>,
    /// Entry index -> compiled regex (`None` if it failed to compile; a test
    /// keeps that from happening).
    pub regexes: Vec<Option<Regex>>,
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
    pub(super) fn candidates(&self, text: &str) -> u128 {
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

pub(super) fn builtin_compiled() -> Arc<Compiled> {
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
    pub(super) fn classify_stripped(&self, text: &str) -> LineClass {
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

/// A decimal number at the start of `s` (`3.42`, `2`), if finite.
fn leading_number(s: &str) -> Option<f64> {
    let end = s
        .bytes()
        .position(|b| !(b.is_ascii_digit() || b == b'.'))
        .unwrap_or(s.len());
    let v: f64 = s.get(..end)?.parse().ok()?;
    v.is_finite().then_some(v)
}
