//! Reading a script's text into sections of nodes: strict, every malformed
//! line an error with its line number.

use super::*;

impl Template {
    fn parse(s: &str) -> Result<Template, Problem> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let mut rest = s;
        while let Some(i) = rest.find("${") {
            lit.push_str(&rest[..i]);
            let after = &rest[i + 2..];
            let end = after
                .find('}')
                .ok_or_else(|| Problem::UnclosedPlaceholder {
                    text: s.to_string(),
                })?;
            let inner = &after[..end];
            let (name, spec) = match inner.split_once(':') {
                None => (inner, Spec::Plain),
                Some((name, ",")) => (name, Spec::Thousands),
                Some((name, spec)) => match spec.strip_prefix('.').map(str::parse::<usize>) {
                    Some(Ok(n)) if n <= 9 => (name, Spec::Decimals(n)),
                    _ => {
                        return Err(Problem::BadFormat {
                            inner: inner.to_string(),
                        })
                    }
                },
            };
            if !is_var_name(name) {
                return Err(Problem::BadPlaceholder {
                    inner: inner.to_string(),
                });
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
    fn parse(words: &str) -> Result<Head, Problem> {
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
                    return Err(Problem::TwoWriters {
                        words: words.to_string(),
                    });
                }
            } else if let Some(l) = level {
                if head.level.replace(l).is_some() {
                    return Err(Problem::TwoLevels {
                        words: words.to_string(),
                    });
                }
            } else if let Some(at) = word.strip_prefix('@') {
                let at: f64 = at
                    .parse()
                    .ok()
                    .filter(|x: &f64| (0.0..=1.0).contains(x))
                    .ok_or_else(|| Problem::BadTime {
                        word: word.to_string(),
                    })?;
                if head.at.replace(at).is_some() {
                    return Err(Problem::TwoTimes {
                        words: words.to_string(),
                    });
                }
            } else if let Some(src) = word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
                if src.is_empty() || head.source.replace(src.to_string()).is_some() {
                    return Err(Problem::BadSource {
                        word: word.to_string(),
                    });
                }
            } else {
                return Err(Problem::NotAHeadWord {
                    word: word.to_string(),
                });
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

fn classify(t: &str) -> Result<Item, Problem> {
    if let Some(rest) = t.strip_prefix("==") {
        let (name, head) = match rest.split_once(':') {
            Some((name, head)) => (name.trim(), Head::parse(head)?),
            None => (rest.trim(), Head::default()),
        };
        if !is_section_name(name) {
            return Err(Problem::BadSectionName {
                name: name.to_string(),
            });
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
                _ => Err(Problem::BadLet),
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
                    None => {
                        return Err(Problem::IfWithoutTest {
                            cond: cond.to_string(),
                        })
                    }
                },
            };
            let values: Vec<String> = values.split(',').map(str::to_string).collect();
            if !is_var_name(var) || values.iter().any(String::is_empty) {
                return Err(Problem::IfWithoutValues {
                    cond: cond.to_string(),
                });
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
            _ => Err(Problem::UnknownLine {
                text: t.to_string(),
            }),
        },
    }
}

impl Script {
    /// Parses a script; `file` names it in errors.
    pub fn parse(file: &str, src: &str) -> Result<Script, ParseError> {
        let mut script = Script::default();
        let err = |line: usize, problem: Problem| ParseError {
            file: file.to_string(),
            line,
            problem,
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
                    return Err(err(o.line(), Problem::NotClosed));
                }
                if let Some((name, head, body)) = current.take() {
                    script.sections.insert(name, Section { head, body });
                }
                if script.sections.contains_key(&name) {
                    return Err(err(n, Problem::DefinedTwice { name }));
                }
                current = Some((name, head, Vec::new()));
                continue;
            }
            let Some((_, _, body)) = current.as_mut() else {
                match item {
                    Item::Let(name, text) => {
                        let text = text
                            .literal()
                            .ok_or_else(|| err(n, Problem::ConstantWithPlaceholders))?;
                        script.constants.push((name, text));
                        continue;
                    }
                    _ => return Err(err(n, Problem::BeforeFirstSection)),
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
                    _ => return Err(err(n, Problem::ElseWithoutIf)),
                },
                Item::End => match open.pop() {
                    Some(Open::If {
                        cond,
                        then,
                        otherwise,
                        ..
                    }) => Node::If(cond, then, otherwise),
                    Some(Open::For { body, .. }) => Node::ForRank(body),
                    None => return Err(err(n, Problem::EndWithoutBlock)),
                },
            };
            match open.last_mut() {
                Some(o) => o.target().push(node),
                None => body.push(node),
            }
        }
        if let Some(o) = open.last() {
            return Err(err(o.line(), Problem::NotClosed));
        }
        if let Some((name, head, body)) = current.take() {
            script.sections.insert(name, Section { head, body });
        }
        Ok(script)
    }
}
