//! The script format: what the simulated server prints, as text with placeholders
//! in named sections (`scripts/*.txt`; the format is described in the crate's
//! documentation). This module parses a script and renders a section into lines;
//! `texts` embeds the scripts and says which file a flavor reads.
//!
//! The parsed tree is here; reading a script into it in `parse.rs`, filling
//! a section into lines in `render.rs`.
//!
//! Parsing is strict (any malformed line is an error with its line number), so a
//! mistake in a script fails a unit test instead of reaching a user's run.
//! Rendering never fails: a problem (a missing section or value) leaves the
//! placeholder as written, `${name}`, and is reported to the caller, which is what
//! the tests check.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use crate::logs::{Clock, Level, Who};

mod parse;
pub mod render;
#[cfg(test)]
mod tests;

pub use render::render;

/// Logs at most this many ranks, like the servers' per-rank lines in one log.
pub const MAX_RANKS_LOGGED: u64 = 8;

/// How deep includes may nest: deeper means an include cycle.
const MAX_DEPTH: usize = 16;

/// A script that does not parse: the file, the line, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {problem}")]
pub struct ParseError {
    pub file: String,
    pub line: usize,
    pub problem: Problem,
}

/// What is wrong with a script's line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("`${{` without its `}}` in `{text}`")]
    UnclosedPlaceholder { text: String },
    #[error(
        "`${{{inner}}}`: a format is `:.N` (N decimals, at most 9) or `:,` (thousands separators)"
    )]
    BadFormat { inner: String },
    #[error("`${{{inner}}}`: a placeholder names a value in a-z, 0-9 and _")]
    BadPlaceholder { inner: String },
    #[error("two writers in `{words}`")]
    TwoWriters { words: String },
    #[error("two levels in `{words}`")]
    TwoLevels { words: String },
    #[error("`{word}`: @ takes a fraction from 0 to 1")]
    BadTime { word: String },
    #[error("two times in `{words}`")]
    TwoTimes { words: String },
    #[error("`{word}`: one non-empty [source] per head")]
    BadSource { word: String },
    #[error(
        "`{word}` is not a head word (@AT, out, err, main, engine, rank, rankN, info, error, [source])"
    )]
    NotAHeadWord { word: String },
    #[error("`{name}`: a section name is in a-z, 0-9, _, - and .")]
    BadSectionName { name: String },
    #[error("`let NAME | TEXT` names one value in a-z, 0-9 and _")]
    BadLet,
    #[error("`if {cond}`: expected NAME=VALUE or NAME!=VALUE")]
    IfWithoutTest { cond: String },
    #[error("`if {cond}`: expected NAME=V1,V2,...")]
    IfWithoutValues { cond: String },
    #[error(
        "`{text}`: expected `HEAD | TEXT`, `HEAD > SECTION`, `let NAME | TEXT`, \
         `if NAME=VALUES`, `else`, `end`, `for rank` or `== SECTION`"
    )]
    UnknownLine { text: String },
    #[error("block not closed with `end`")]
    NotClosed,
    #[error("section `{name}` defined twice")]
    DefinedTwice { name: String },
    #[error("a constant (a `let` before any section) has no placeholders")]
    ConstantWithPlaceholders,
    #[error("only `let` lines come before the first section")]
    BeforeFirstSection,
    #[error("`else` without its `if`")]
    ElseWithoutIf,
    #[error("`end` without its `if` or `for`")]
    EndWithoutBlock,
}

/// Where a rendered line goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// Standard output, as written.
    Out,
    /// Standard error, as written.
    Err,
    /// Through the server's logger, with the writer's prefix.
    Log(Who),
}

/// One rendered line: its text with the placeholders filled, and its head.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'s> {
    /// Point of the startup at which it appears (fraction of `--startup-ms`).
    pub at: Option<f64>,
    /// None: as written, to wherever the caller sends the section (standard error).
    pub writer: Option<Writer>,
    pub level: Level,
    /// vLLM's `file.py:line` tag; empty when the head gave none.
    pub source: &'s str,
    pub text: String,
}

/// A value to fill placeholders with.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Text(Cow<'a, str>),
    Int(u64),
    Num(f64),
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(s: &'a str) -> Self {
        Value::Text(Cow::Borrowed(s))
    }
}

impl From<String> for Value<'_> {
    fn from(s: String) -> Self {
        Value::Text(Cow::Owned(s))
    }
}

impl From<u64> for Value<'_> {
    fn from(n: u64) -> Self {
        Value::Int(n)
    }
}

impl From<u32> for Value<'_> {
    fn from(n: u32) -> Self {
        Value::Int(u64::from(n))
    }
}

impl From<u16> for Value<'_> {
    fn from(n: u16) -> Self {
        Value::Int(u64::from(n))
    }
}

impl From<f64> for Value<'_> {
    fn from(x: f64) -> Self {
        Value::Num(x)
    }
}

impl fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Text(s) => f.write_str(s),
            Value::Int(n) => write!(f, "{n}"),
            Value::Num(x) => write!(f, "{x}"),
        }
    }
}

impl Value<'_> {
    fn as_int(&self) -> Option<u64> {
        match self {
            Value::Int(n) => Some(*n),
            _ => None,
        }
    }

    fn write(&self, spec: Spec, out: &mut String) -> Result<(), &'static str> {
        use std::fmt::Write as _;
        match (spec, self) {
            (Spec::Plain, v) => {
                let _ = write!(out, "{v}");
            }
            (Spec::Decimals(n), Value::Num(x)) => {
                let _ = write!(out, "{x:.n$}");
            }
            (Spec::Decimals(n), Value::Int(i)) => {
                let _ = write!(out, "{:.n$}", *i as f64);
            }
            (Spec::Thousands, Value::Int(i)) => out.push_str(&group_thousands(*i)),
            (Spec::Decimals(_), Value::Text(_)) => return Err("`:.N` needs a number"),
            (Spec::Thousands, _) => return Err("`:,` needs a whole number"),
        }
        Ok(())
    }
}

/// `1234567` as `1,234,567`.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The values a render fills placeholders with; a later `set` of a name wins.
#[derive(Debug, Clone, Default)]
pub struct Vars<'a> {
    items: Vec<(&'a str, Value<'a>)>,
}

impl<'a> Vars<'a> {
    pub fn new() -> Self {
        Vars::default()
    }

    pub fn set(&mut self, name: &'a str, value: impl Into<Value<'a>>) -> &mut Self {
        self.items.push((name, value.into()));
        self
    }

    /// Sets `rank` and the numbers that go with it (see [`rank_values`]); needs
    /// `pid` set first.
    pub fn rank(&mut self, rank: u32) -> &mut Self {
        let pid = self.get("pid").and_then(Value::as_int);
        self.items.extend(rank_values(pid, rank));
        self
    }

    fn get(&self, name: &str) -> Option<&Value<'a>> {
        self.items
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }
}

/// The values that differ per TP rank: `rank`, `worker_pid` (the rank's worker
/// process), `bus_id` (its GPU's PCI bus), `assert_block` (the CUDA block a device
/// assert names) and `frame_addr_0` to `frame_addr_4` (the low hex digits of the
/// c10 frames' addresses in a watchdog dump). Without a pid there is no worker pid.
pub fn rank_values(pid: Option<u64>, rank: u32) -> Vec<(&'static str, Value<'static>)> {
    let r = u64::from(rank);
    let mut v: Vec<(&'static str, Value<'static>)> = vec![
        ("rank", Value::Int(r)),
        ("bus_id", Value::Int(18 + r * 16)),
        ("assert_block", Value::Int(17 + r * 3)),
    ];
    if let Some(pid) = pid {
        v.push(("worker_pid", Value::Int(pid + 60 + r)));
    }
    const FRAME_ADDR: [&str; 5] = [
        "frame_addr_0",
        "frame_addr_1",
        "frame_addr_2",
        "frame_addr_3",
        "frame_addr_4",
    ];
    for (i, name) in FRAME_ADDR.into_iter().enumerate() {
        let addr = 0x3785e8 + i as u64 * 0x1c4a1 + r * 0x100;
        v.push((name, Value::Text(Cow::Owned(format!("{addr:06x}")))));
    }
    v
}

/// A parsed script file: sections by name, and its constants.
#[derive(Debug, Default)]
pub struct Script {
    sections: HashMap<String, Section>,
    constants: Vec<(String, String)>,
}

#[derive(Debug)]
struct Section {
    head: Head,
    body: Vec<Node>,
}

#[derive(Debug)]
enum Node {
    Text { head: Head, text: Template },
    Include { head: Head, name: String },
    Let { name: String, text: Template },
    If(Cond, Vec<Node>, Vec<Node>),
    ForRank(Vec<Node>),
}

#[derive(Debug)]
struct Cond {
    var: String,
    negate: bool,
    values: Vec<String>,
}

/// A writer as written in a head: `rank` alone means the rank being rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriterSpec {
    Out,
    Err,
    Main,
    Engine,
    Rank(Option<u32>),
}

#[derive(Debug, Default, Clone, PartialEq)]
struct Head {
    at: Option<f64>,
    writer: Option<WriterSpec>,
    level: Option<Level>,
    source: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spec {
    Plain,
    Decimals(usize),
    Thousands,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Lit(String),
    Var(String, Spec),
}

#[derive(Debug, Clone, PartialEq, Default)]
struct Template(Vec<Part>);

impl Script {
    #[cfg(test)]
    pub fn section_names(&self) -> impl Iterator<Item = &str> {
        self.sections.keys().map(String::as_str)
    }

    pub fn constant(&self, name: &str) -> Option<&str> {
        self.constants
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}
