//! Filling a section into lines: includes and constants looked up along a
//! chain of scripts, a missing one left as written and reported.

use super::*;

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
