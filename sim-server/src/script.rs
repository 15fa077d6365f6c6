//! The script format: what the simulated server prints, as text with placeholders
//! in named sections (`scripts/*.txt`; the format is described in the crate's
//! documentation). This module parses a script and renders a section into lines;
//! `texts` embeds the scripts and says which file a flavor reads.
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

/// Logs at most this many ranks, like the servers' per-rank lines in one log.
pub const MAX_RANKS_LOGGED: u64 = 8;

/// How deep includes may nest: deeper means an include cycle.
const MAX_DEPTH: usize = 16;

/// A script that does not parse: the file, the line, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

impl std::error::Error for ParseError {}

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

/// A head during rendering: a line's own, filled in from its section's and from
/// the include that brought it in.
#[derive(Debug, Default, Clone, Copy)]
struct Eff<'s> {
    at: Option<f64>,
    writer: Option<WriterSpec>,
    level: Option<Level>,
    source: Option<&'s str>,
}

impl<'s> Eff<'s> {
    fn of(head: &'s Head) -> Self {
        Eff {
            at: head.at,
            writer: head.writer,
            level: head.level,
            source: head.source.as_deref(),
        }
    }

    fn or(self, other: Eff<'s>) -> Self {
        Eff {
            at: self.at.or(other.at),
            writer: self.writer.or(other.writer),
            level: self.level.or(other.level),
            source: self.source.or(other.source),
        }
    }
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

impl Template {
    fn parse(s: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("${") {
            lit.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| format!("`${{` without its `}}` in `{s}`"))?;
            let inner = &after[..end];
            let (name, spec) = match inner.split_once(':') {
                None => (inner, Spec::Plain),
                Some((name, ",")) => (name, Spec::Thousands),
                Some((name, spec)) => match spec.strip_prefix('.').map(str::parse::<usize>) {
                    Some(Ok(n)) if n <= 9 => (name, Spec::Decimals(n)),
                    _ => {
                        return Err(format!(
                            "`${{{inner}}}`: a format is `:.N` (N decimals, at most 9) or `:,` \
                             (thousands separators)"
                        ))
                    }
                },
            };
            if !is_var_name(name) {
                return Err(format!(
                    "`${{{inner}}}`: a placeholder names a value in a-z, 0-9 and _"
                ));
            }
            if !lit.is_empty() {
                parts.push(Part::Lit(std::mem::take(&mut lit)));
            }
            parts.push(Part::Var(name.to_string(), spec));
            rest = &after[end + 1..];
        }
        lit.push_str(rest);
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        Ok(Template(parts))
    }

    fn literal(&self) -> Option<String> {
        let mut s = String::new();
        for p in &self.0 {
            match p {
                Part::Lit(l) => s.push_str(l),
                Part::Var(..) => return None,
            }
        }
        Some(s)
    }
}

fn is_var_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn is_section_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'.')
        })
}

impl Head {
    fn parse(words: &str) -> Result<Head, String> {
        let mut head = Head::default();
        for word in words.split_whitespace() {
            let writer = match word {
                "out" => Some(WriterSpec::Out),
                "err" => Some(WriterSpec::Err),
                "main" => Some(WriterSpec::Main),
                "engine" => Some(WriterSpec::Engine),
                "rank" => Some(WriterSpec::Rank(None)),
                _ => match word.strip_prefix("rank").map(str::parse::<u32>) {
                    Some(Ok(n)) => Some(WriterSpec::Rank(Some(n))),
                    _ => None,
                },
            };
            let level = match word {
                "info" => Some(Level::Info),
                "error" => Some(Level::Error),
                _ => None,
            };
            if let Some(w) = writer {
                if head.writer.replace(w).is_some() {
                    return Err(format!("two writers in `{words}`"));
                }
            } else if let Some(l) = level {
                if head.level.replace(l).is_some() {
                    return Err(format!("two levels in `{words}`"));
                }
            } else if let Some(at) = word.strip_prefix('@') {
                let at: f64 = at
                    .parse()
                    .ok()
                    .filter(|x: &f64| (0.0..=1.0).contains(x))
                    .ok_or_else(|| format!("`{word}`: @ takes a fraction from 0 to 1"))?;
                if head.at.replace(at).is_some() {
                    return Err(format!("two times in `{words}`"));
                }
            } else if let Some(src) = word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
                if src.is_empty() || head.source.replace(src.to_string()).is_some() {
                    return Err(format!("`{word}`: one non-empty [source] per head"));
                }
            } else {
                return Err(format!(
                    "`{word}` is not a head word (@AT, out, err, main, engine, rank, rankN, \
                     info, error, [source])"
                ));
            }
        }
        Ok(head)
    }
}

/// An `if` or `for rank` block being read.
enum Open {
    If {
        cond: Cond,
        then: Vec<Node>,
        otherwise: Vec<Node>,
        in_else: bool,
        line: usize,
    },
    For {
        body: Vec<Node>,
        line: usize,
    },
}

impl Open {
    fn target(&mut self) -> &mut Vec<Node> {
        match self {
            Open::If {
                then,
                otherwise,
                in_else,
                ..
            } => {
                if *in_else {
                    otherwise
                } else {
                    then
                }
            }
            Open::For { body, .. } => body,
        }
    }

    fn line(&self) -> usize {
        match self {
            Open::If { line, .. } | Open::For { line, .. } => *line,
        }
    }
}

/// One line of a script, classified.
enum Item {
    Section(String, Head),
    Text(Head, Template),
    Include(Head, String),
    Let(String, Template),
    If(Cond),
    Else,
    End,
    ForRank,
}

fn classify(t: &str) -> Result<Item, String> {
    if let Some(rest) = t.strip_prefix("==") {
        let (name, head) = match rest.split_once(':') {
            Some((name, head)) => (name.trim(), Head::parse(head)?),
            None => (rest.trim(), Head::default()),
        };
        if !is_section_name(name) {
            return Err(format!(
                "`{name}`: a section name is in a-z, 0-9, _, - and ."
            ));
        }
        return Ok(Item::Section(name.to_string(), head));
    }
    if let Some((head, text)) = t.split_once('|') {
        let text = text.strip_prefix(' ').unwrap_or(text);
        let template = Template::parse(text)?;
        let words: Vec<&str> = head.split_whitespace().collect();
        if words.first() == Some(&"let") {
            return match words[..] {
                [_, name] if is_var_name(name) => Ok(Item::Let(name.to_string(), template)),
                _ => Err("`let NAME | TEXT` names one value in a-z, 0-9 and _".to_string()),
            };
        }
        return Ok(Item::Text(Head::parse(head)?, template));
    }
    let words: Vec<&str> = t.split_whitespace().collect();
    match words[..] {
        ["if", cond] => {
            let (var, negate, values) = match cond.split_once("!=") {
                Some((var, values)) => (var, true, values),
                None => match cond.split_once('=') {
                    Some((var, values)) => (var, false, values),
                    None => return Err(format!("`if {cond}`: expected NAME=VALUE or NAME!=VALUE")),
                },
            };
            let values: Vec<String> = values.split(',').map(str::to_string).collect();
            if !is_var_name(var) || values.iter().any(String::is_empty) {
                return Err(format!("`if {cond}`: expected NAME=V1,V2,..."));
            }
            Ok(Item::If(Cond {
                var: var.to_string(),
                negate,
                values,
            }))
        }
        ["else"] => Ok(Item::Else),
        ["end"] => Ok(Item::End),
        ["for", "rank"] => Ok(Item::ForRank),
        _ => match t.split_once('>') {
            Some((head, name)) if is_section_name(name.trim()) => {
                Ok(Item::Include(Head::parse(head)?, name.trim().to_string()))
            }
            _ => Err(format!(
                "`{t}`: expected `HEAD | TEXT`, `HEAD > SECTION`, `let NAME | TEXT`, \
                 `if NAME=VALUES`, `else`, `end`, `for rank` or `== SECTION`"
            )),
        },
    }
}

impl Script {
    /// Parses a script; `file` names it in errors.
    pub fn parse(file: &str, src: &str) -> Result<Script, ParseError> {
        let mut script = Script::default();
        let err = |line: usize, message: String| ParseError {
            file: file.to_string(),
            line,
            message,
        };
        // The section being read: its name, head, body, and the blocks open in it.
        let mut current: Option<(String, Head, Vec<Node>)> = None;
        let mut open: Vec<Open> = Vec::new();
        for (i, raw) in src.lines().enumerate() {
            let n = i + 1;
            // Trailing blanks never count: editors strip them (`${space}` keeps one).
            let t = raw.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let item = classify(t).map_err(|m| err(n, m))?;
            if let Item::Section(name, head) = item {
                if let Some(o) = open.last() {
                    return Err(err(o.line(), "block not closed with `end`".to_string()));
                }
                if let Some((name, head, body)) = current.take() {
                    script.sections.insert(name, Section { head, body });
                }
                if script.sections.contains_key(&name) {
                    return Err(err(n, format!("section `{name}` defined twice")));
                }
                current = Some((name, head, Vec::new()));
                continue;
            }
            let Some((_, _, body)) = current.as_mut() else {
                match item {
                    Item::Let(name, text) => {
                        let text = text.literal().ok_or_else(|| {
                            err(
                                n,
                                "a constant (a `let` before any section) has no placeholders"
                                    .to_string(),
                            )
                        })?;
                        script.constants.push((name, text));
                        continue;
                    }
                    _ => {
                        return Err(err(
                            n,
                            "only `let` lines come before the first section".to_string(),
                        ))
                    }
                }
            };
            let node = match item {
                Item::Section(..) => continue,
                Item::Text(head, text) => Node::Text { head, text },
                Item::Include(head, name) => Node::Include { head, name },
                Item::Let(name, text) => Node::Let { name, text },
                Item::If(cond) => {
                    open.push(Open::If {
                        cond,
                        then: Vec::new(),
                        otherwise: Vec::new(),
                        in_else: false,
                        line: n,
                    });
                    continue;
                }
                Item::ForRank => {
                    open.push(Open::For {
                        body: Vec::new(),
                        line: n,
                    });
                    continue;
                }
                Item::Else => match open.last_mut() {
                    Some(Open::If { in_else, .. }) if !*in_else => {
                        *in_else = true;
                        continue;
                    }
                    _ => return Err(err(n, "`else` without its `if`".to_string())),
                },
                Item::End => match open.pop() {
                    Some(Open::If {
                        cond,
                        then,
                        otherwise,
                        ..
                    }) => Node::If(cond, then, otherwise),
                    Some(Open::For { body, .. }) => Node::ForRank(body),
                    None => return Err(err(n, "`end` without its `if` or `for`".to_string())),
                },
            };
            match open.last_mut() {
                Some(o) => o.target().push(node),
                None => body.push(node),
            }
        }
        if let Some(o) = open.last() {
            return Err(err(o.line(), "block not closed with `end`".to_string()));
        }
        if let Some((name, head, body)) = current.take() {
            script.sections.insert(name, Section { head, body });
        }
        Ok(script)
    }

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

/// What a render produced: the lines, and what was missing (for the tests).
#[derive(Debug, Default)]
pub struct Rendered<'s> {
    pub lines: Vec<Line<'s>>,
    pub problems: Vec<String>,
    /// Every section rendered, includes too.
    pub sections: Vec<&'s str>,
}

/// Renders `section` from the first script in `chain` that has it; includes and
/// constants are looked up along the same chain.
pub fn render<'s>(chain: &[&'s Script], section: &str, vars: &Vars<'_>) -> Rendered<'s> {
    let mut r = Renderer {
        chain,
        vars,
        local: Vec::new(),
        out: Rendered::default(),
        depth: 0,
    };
    r.section(section, Eff::default());
    r.out
}

struct Renderer<'c, 's, 'v> {
    chain: &'c [&'s Script],
    vars: &'v Vars<'v>,
    /// Values from `let` lines and `for rank` passes, innermost last.
    local: Vec<(&'s str, Value<'s>)>,
    out: Rendered<'s>,
    depth: usize,
}

impl<'s> Renderer<'_, 's, '_> {
    fn section(&mut self, name: &str, inherited: Eff<'s>) {
        let found = self
            .chain
            .iter()
            .find_map(|s| s.sections.get_key_value(name));
        let Some((key, section)) = found else {
            self.out.problems.push(format!("no section `{name}`"));
            return;
        };
        if self.depth >= MAX_DEPTH {
            self.out
                .problems
                .push(format!("`{name}`: includes nest deeper than {MAX_DEPTH}"));
            return;
        }
        self.out.sections.push(key);
        self.depth += 1;
        let mark = self.local.len();
        self.nodes(&section.body, Eff::of(&section.head).or(inherited));
        self.local.truncate(mark);
        self.depth -= 1;
    }

    fn nodes(&mut self, nodes: &'s [Node], inherited: Eff<'s>) {
        for node in nodes {
            match node {
                Node::Text { head, text } => {
                    let eff = Eff::of(head).or(inherited);
                    let text = self.fill(text);
                    let writer = eff.writer.map(|w| self.writer(w));
                    self.out.lines.push(Line {
                        at: eff.at,
                        writer,
                        level: eff.level.unwrap_or(Level::Info),
                        source: eff.source.unwrap_or(""),
                        text,
                    });
                }
                Node::Include { head, name } => self.section(name, Eff::of(head).or(inherited)),
                Node::Let { name, text } => {
                    let value = self.fill(text);
                    self.local.push((name, Value::Text(Cow::Owned(value))));
                }
                Node::If(cond, then, otherwise) => {
                    let holds = match self.lookup(&cond.var, |v| v.to_string()) {
                        Some(v) => cond.values.contains(&v) != cond.negate,
                        None => {
                            self.out
                                .problems
                                .push(format!("`if`: no value `{}`", cond.var));
                            false
                        }
                    };
                    self.nodes(if holds { then } else { otherwise }, inherited);
                }
                Node::ForRank(body) => {
                    let tp = self.int("tp").unwrap_or(0);
                    let pid = self.int("pid");
                    for rank in 0..tp.min(MAX_RANKS_LOGGED) as u32 {
                        let mark = self.local.len();
                        self.local.extend(rank_values(pid, rank));
                        self.nodes(body, inherited);
                        self.local.truncate(mark);
                    }
                }
            }
        }
    }

    fn writer(&mut self, spec: WriterSpec) -> Writer {
        match spec {
            WriterSpec::Out => Writer::Out,
            WriterSpec::Err => Writer::Err,
            WriterSpec::Main => Writer::Log(Who::Main),
            WriterSpec::Engine => Writer::Log(Who::Engine),
            WriterSpec::Rank(Some(r)) => Writer::Log(Who::Rank(r)),
            WriterSpec::Rank(None) => {
                let r = self.int("rank").unwrap_or(0);
                Writer::Log(Who::Rank(u32::try_from(r).unwrap_or(0)))
            }
        }
    }

    fn int(&mut self, name: &str) -> Option<u64> {
        let v = self.lookup(name, |v| v.as_int()).flatten();
        if v.is_none() {
            self.out.problems.push(format!("no whole number `{name}`"));
        }
        v
    }

    /// Applies `f` to the value called `name`: this render's own values first,
    /// then the caller's, the scripts' constants, and the built-in ones.
    fn lookup<R>(&self, name: &str, f: impl FnOnce(&Value<'_>) -> R) -> Option<R> {
        if let Some((_, v)) = self.local.iter().rev().find(|(n, _)| *n == name) {
            return Some(f(v));
        }
        if let Some(v) = self.vars.get(name) {
            return Some(f(v));
        }
        if let Some(c) = self.chain.iter().find_map(|s| s.constant(name)) {
            return Some(f(&Value::from(c)));
        }
        let builtin = match name {
            "space" => Value::from(" "),
            "time" => Value::from(Clock::now().datetime()),
            "time_short" => Value::from(Clock::now().short()),
            "time_glog" => Value::from(Clock::now().glog_time()),
            _ => return None,
        };
        Some(f(&builtin))
    }

    fn fill(&mut self, template: &Template) -> String {
        let mut s = String::new();
        for part in &template.0 {
            match part {
                Part::Lit(l) => s.push_str(l),
                Part::Var(name, spec) => {
                    let mut piece = String::new();
                    match self.lookup(name, |v| v.write(*spec, &mut piece)) {
                        Some(Ok(())) => s.push_str(&piece),
                        found => {
                            let why = match found {
                                Some(Err(e)) => e,
                                _ => "no such value",
                            };
                            self.out.problems.push(format!("`${{{name}}}`: {why}"));
                            s.push_str("${");
                            s.push_str(name);
                            s.push('}');
                        }
                    }
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Script {
        match Script::parse("t.txt", src) {
            Ok(s) => s,
            Err(e) => panic!("{e}"),
        }
    }

    fn texts(s: &Script, section: &str, vars: &Vars) -> Vec<String> {
        let r = render(&[s], section, vars);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        r.lines.into_iter().map(|l| l.text).collect()
    }

    #[test]
    fn lines_heads_and_placeholders() {
        let s = parse(
            "# a comment\n\
             let where | /opt/py\n\
             == a : error engine\n\
             | plain ${where} | bars stay\n\
             @0.5 out | at ${n:,} and ${x:.2}${space}\n\
             rank3 [f.py:9] info | ranked\n\
             |\n",
        );
        let mut v = Vars::new();
        v.set("n", 1234567u64).set("x", 2.0f64 / 3.0);
        let r = render(&[&s], "a", &v);
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        let l = &r.lines;
        assert_eq!(l.len(), 4);
        assert_eq!(l[0].text, "plain /opt/py | bars stay");
        assert_eq!(l[0].writer, Some(Writer::Log(Who::Engine)));
        assert_eq!(l[0].level, Level::Error);
        assert_eq!((l[1].at, l[1].writer), (Some(0.5), Some(Writer::Out)));
        assert_eq!(l[1].text, "at 1,234,567 and 0.67 ");
        assert_eq!(l[2].writer, Some(Writer::Log(Who::Rank(3))));
        assert_eq!((l[2].level, l[2].source), (Level::Info, "f.py:9"));
        assert_eq!(l[3].text, "");
    }

    #[test]
    fn conditions_loops_lets_and_includes() {
        let s = parse(
            "== a\n\
             if kind=x,y\n\
               let what | xy\n\
             else\n\
               let what | other\n\
             end\n\
             | ${what}\n\
             for rank\n\
               if rank!=0\n\
                 rank | r${rank} pid ${worker_pid}\n\
               end\n\
             end\n\
             err > b\n\
             == b\n\
             | from b ${what}\n",
        );
        let mut v = Vars::new();
        v.set("kind", "y").set("tp", 3u32).set("pid", 100u32);
        assert_eq!(
            texts(&s, "a", &v),
            ["xy", "r1 pid 161", "r2 pid 162", "from b xy"]
        );
        let r = render(&[&s], "a", &v);
        assert_eq!(r.lines[1].writer, Some(Writer::Log(Who::Rank(1))));
        assert_eq!(r.lines[3].writer, Some(Writer::Err));
        v.set("kind", "z").set("tp", 20u32);
        let lines = texts(&s, "a", &v);
        assert_eq!(lines[0], "other");
        // At most 8 ranks log.
        assert_eq!(lines.len(), 1 + 7 + 1);
    }

    #[test]
    fn a_line_head_beats_its_section_which_beats_the_include() {
        let s = parse(
            "== outer : [o.py:1]\n\
             error main > inner\n\
             == inner : engine\n\
             | from inner's section\n\
             rank0 | own writer\n",
        );
        let r = render(&[&s], "outer", &Vars::new());
        let heads: Vec<_> = r
            .lines
            .iter()
            .map(|l| (l.writer, l.level, l.source))
            .collect();
        assert_eq!(
            heads,
            [
                (Some(Writer::Log(Who::Engine)), Level::Error, "o.py:1"),
                (Some(Writer::Log(Who::Rank(0))), Level::Error, "o.py:1"),
            ]
        );
    }

    #[test]
    fn the_first_script_in_the_chain_wins() {
        let flavor = parse("let c | flavor\n== a\n> b\n");
        let common = parse("let c | common\n== b\n| ${c}\n== a\n| common a\n");
        let r = render(&[&flavor, &common], "a", &Vars::new());
        assert_eq!(r.lines[0].text, "flavor");
    }

    #[test]
    fn missing_things_are_problems_not_panics() {
        let s = parse("== a\n| ${nope} ${t:,}\n> gone\nrank | x\n== loop\n> loop\n");
        let mut v = Vars::new();
        v.set("t", "text");
        let r = render(&[&s], "a", &v);
        assert_eq!(r.lines[0].text, "${nope} ${t}");
        assert_eq!(r.problems.len(), 4, "{:?}", r.problems);
        let r = render(&[&s], "loop", &v);
        assert_eq!(r.problems.len(), 1, "{:?}", r.problems);
        let r = render(&[&s], "absent", &v);
        assert_eq!(r.problems, ["no section `absent`"]);
    }

    #[test]
    fn parse_errors_name_their_line() {
        for (src, line, what) in [
            ("| text before any section", 1, "only `let`"),
            ("== a\nif x=1\n| y", 2, "not closed"),
            ("== a\nend", 2, "without its"),
            ("== a\nelse", 2, "without its"),
            ("== a\nif x=1\nelse\nelse\nend", 4, "without its"),
            ("== a\n\n# c\nbogus | x", 4, "not a head word"),
            ("== a\n@2 | x", 2, "fraction"),
            ("== a\nout err | x", 2, "two writers"),
            ("== a\n| ${x", 2, "without its"),
            ("== a\n| ${x:3}", 2, "format"),
            ("== a\n| ${X}", 2, "placeholder"),
            ("== a\nwhatever", 2, "expected"),
            ("== a\n== a", 2, "twice"),
            ("== A", 1, "section name"),
            ("let c | ${x}", 1, "constant"),
            ("== a\nlet | x", 2, "let NAME"),
            ("== a\nif x", 2, "NAME=VALUE"),
            ("== a\nfor rank\n== b", 2, "not closed"),
        ] {
            match Script::parse("t.txt", src) {
                Ok(_) => panic!("{src:?} parsed"),
                Err(e) => {
                    assert_eq!(e.line, line, "{src:?}: {e}");
                    assert!(e.message.contains(what), "{src:?}: {e}");
                    assert!(e.to_string().starts_with(&format!("t.txt:{line}: ")));
                }
            }
        }
    }

    #[test]
    fn thousands() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(999), "999");
        assert_eq!(group_thousands(32768), "32,768");
        assert_eq!(group_thousands(1_234_567), "1,234,567");
    }
}
