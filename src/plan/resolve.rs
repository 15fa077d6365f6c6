//! Filling a config's `{placeholders}` when the plan is expanded: `{config}`
//! and `{phase}`, the config's axes, then the plan's variables, which may hold
//! placeholders themselves. The runtime ones (`{port}`, `{host}` …) are left
//! for the launch to fill.

use std::ops::Range;

use indexmap::IndexMap;

use super::combos::Combo;
use super::located::Ctx;
use super::template::{self, FillError};
use super::PlanError;

/// How many times a filled value may be filled again (variables naming
/// variables) before the chain is taken for a loop.
const MAX_DEPTH: usize = 8;

/// Why one of a config's templates could not be filled.
#[derive(Debug, thiserror::Error)]
enum ResolveError {
    #[error(transparent)]
    Fill(#[from] FillError),
    /// Variables that name each other; said where a placeholder's name would be.
    #[error("(variables refer to each other in a loop)")]
    Loop,
}

/// What a config's templates are filled from.
pub(super) struct Resolver<'a> {
    pub ctx: &'a Ctx<'a>,
    pub combo: &'a Combo,
    /// Plan vars, then phase vars, then the `set` rules matching the combo.
    pub vars: &'a IndexMap<String, String>,
    /// The config's id.
    pub id: &'a str,
    pub phase: &'a str,
    /// `server.gpus` is set, so the GPUs are picked at launch.
    pub picked_gpus: bool,
}

impl Resolver<'_> {
    /// `text` with its placeholders filled; an error points at `at`.
    pub fn resolve(&self, text: &str, at: Range<usize>) -> Result<String, PlanError> {
        self.fill(text, 0).map_err(|e| self.error(e, at))
    }

    fn fill(&self, text: &str, depth: usize) -> Result<String, ResolveError> {
        if depth > MAX_DEPTH {
            return Err(ResolveError::Loop);
        }
        let out = template::fill(text, &|name| self.lookup(name))?;
        if out != text && out.contains('{') {
            // Vars may contain placeholders themselves.
            return self.fill(&out, depth + 1);
        }
        Ok(out)
    }

    fn lookup(&self, name: &str) -> Option<String> {
        if template::RUNTIME.contains(&name) {
            return Some(format!("{{{name}}}"));
        }
        // `{gpus}` is the plan's own when it defines one, else (with
        // `server.gpus`) the GPUs given at launch.
        if name == "gpus"
            && self.picked_gpus
            && self.combo.get(name).is_none()
            && !self.vars.contains_key(name)
        {
            return Some("{gpus}".to_string());
        }
        match name {
            "config" => return Some(self.id.to_string()),
            "phase" => return Some(self.phase.to_string()),
            _ => {}
        }
        if let Some(v) = self.combo.get(name) {
            return Some(v.clone());
        }
        self.vars.get(name).cloned()
    }

    fn error(&self, e: ResolveError, at: Range<usize>) -> PlanError {
        // A name the text does not hold itself came through a var or a
        // `set` value: the error points at where it is written.
        let (at, through) = match &e {
            ResolveError::Fill(FillError::Unknown(name)) => {
                let written = format!("{{{name}}}");
                let own = self
                    .ctx
                    .source
                    .get(at.clone())
                    .is_some_and(|t| t.contains(&written));
                match self.ctx.source.find(&written) {
                    Some(i) if !own => {
                        let (line, _) = super::located::line_col(self.ctx.source, at.start);
                        (
                            i..i + written.len(),
                            format!(" (a value the text at line {line} takes in)"),
                        )
                    }
                    _ => (at, String::new()),
                }
            }
            _ => (at, String::new()),
        };
        let unclosed = |text: &str| {
            self.ctx.err(
                at.clone(),
                format!("unclosed `{{` in `{text}`: close it with `}}`, or write `{{{{` for a literal brace"),
            )
        };
        match e {
            ResolveError::Fill(FillError::Unclosed(text)) => unclosed(&text),
            // `{ {x}`: a brace where the name should be is an unclosed `{` too.
            ResolveError::Fill(FillError::Unknown(name)) if name.starts_with('{') => {
                unclosed(&name)
            }
            e => {
                let axes: Vec<String> =
                    self.combo.iter().map(|(k, v)| format!("{k}={v}")).collect();
                // A misspelt name: the nearest one it could have meant.
                let known = self
                    .combo
                    .keys()
                    .chain(self.vars.keys())
                    .map(String::as_str)
                    .chain(template::RUNTIME.iter().copied())
                    .chain(["config", "phase", "gpus"]);
                let hint = match &e {
                    ResolveError::Fill(FillError::Unknown(name)) => {
                        super::located::nearest(name, known)
                            .map(|n| format!(": did you mean `{{{n}}}`? Else"))
                            .unwrap_or_default()
                    }
                    _ => String::new(),
                };
                self.ctx.err(
                    at,
                    format!(
                        "unresolved placeholder `{{{e}}}`{through} for config `{}` ({}){}define it in [vars], a matrix axis, or a `set` rule",
                        self.id,
                        if axes.is_empty() { "no axes".to_string() } else { axes.join(", ") },
                        if hint.is_empty() { "; ".to_string() } else { format!("{hint} ") }
                    ),
                )
            }
        }
    }
}

/// A command (`server.command`, a prepare step's) as argv, filled for the
/// config; `what` names it in errors.
pub(super) fn command_argv(
    r: &Resolver,
    command: &toml::Spanned<String>,
    shell: bool,
    what: &str,
) -> Result<Vec<String>, PlanError> {
    let cmd_span = command.span();
    let split = |text: &str| {
        template::split_words(text).map_err(|e| r.ctx.err(cmd_span.clone(), e.to_string()))
    };
    let mut argv = Vec::new();
    let words = split(command.get_ref())?;
    if shell {
        // The shell reads the command as written (its quotes, pipes and `;`),
        // with the placeholders filled in: one word, run by `sh -c`.
        let filled = r.resolve(command.get_ref(), cmd_span.clone())?;
        if !filled.trim().is_empty() {
            argv.push(filled);
        }
    } else {
        for w in &words {
            let filled = r.resolve(w, cmd_span.clone())?;
            // A word that was only a placeholder and came out empty is dropped, so an
            // optional `{extra_args}` can be empty. A filled value with spaces is
            // split into words as well, so `{spec_args}` can carry several flags.
            if w.trim().starts_with('{')
                && w.trim().ends_with('}')
                && template::placeholders(w).len() == 1
            {
                argv.extend(split(&filled)?);
            } else {
                argv.push(filled);
            }
        }
    }
    if argv.is_empty() {
        return Err(r
            .ctx
            .err(cmd_span, format!("{what} is empty for config `{}`", r.id)));
    }
    Ok(argv)
}
