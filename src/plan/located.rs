//! Plan errors located in the file (`file:line:col`), and the checks of one
//! value that every part of the plan's validation shares.

use std::fmt;
use std::ops::Range;

use toml::Spanned;

use super::{PlanError, MAX_SECONDS};

/// The plan file being read: what an error names and counts lines in.
pub(super) struct Ctx<'a> {
    pub file: String,
    pub source: &'a str,
}

impl Ctx<'_> {
    /// An error about the text at `span` (byte offsets into the source).
    pub fn err(&self, span: Range<usize>, message: impl Into<String>) -> PlanError {
        let (line, col) = line_col(self.source, span.start);
        PlanError {
            file: self.file.clone(),
            line,
            col,
            message: message.into(),
        }
    }
}

/// The candidate nearest to a misspelt `name` (at most two edits, and
/// fewer than half its letters), for a `did you mean …?`.
pub(super) fn nearest<'c>(
    name: &str,
    candidates: impl IntoIterator<Item = &'c str>,
) -> Option<&'c str> {
    let limit = (name.chars().count() / 2).clamp(1, 2);
    candidates
        .into_iter()
        .filter(|c| *c != name)
        .map(|c| (edits(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Levenshtein distance, by characters.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let up = row[j + 1];
            row[j + 1] = (diag + usize::from(ca != *cb)).min(up + 1).min(row[j] + 1);
            diag = up;
        }
    }
    row[b.len()]
}

/// What the TOML reader says, said for a person: a misspelt key gets its
/// nearest known one, a duplicate key is named, a duration written as text
/// where seconds are asked is told how to write it.
pub(super) fn toml_message(source: &str, span: Range<usize>, message: &str) -> String {
    let message = message.trim();
    if let Some(rest) = message.strip_prefix("unknown field `") {
        if let Some((field, expected)) = rest.split_once('`') {
            let known = expected.split('`').skip(1).step_by(2);
            if let Some(near) = nearest(field, known) {
                return format!("{message}; did you mean `{near}`?");
            }
        }
        return message.to_string();
    }
    if message == "duplicate key" {
        let key: String = source
            .get(span.start..)
            .unwrap_or("")
            .chars()
            .take_while(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '"' | '\''))
            .filter(|c| !matches!(c, '"' | '\''))
            .collect();
        if !key.is_empty() {
            return format!("duplicate key `{key}`: it is set more than once in this table");
        }
        return message.to_string();
    }
    // `cell_timeout_s = "5s"`: seconds are a number.
    if let Some(rest) = message.strip_prefix("invalid type: string \"") {
        let line_start = source
            .get(..span.start)
            .and_then(|b| b.rfind('\n'))
            .map_or(0, |i| i + 1);
        let key = source
            .get(line_start..span.start)
            .and_then(|l| l.split('=').next())
            .map(str::trim)
            .unwrap_or("");
        if key.ends_with("_s") {
            let given = rest.split('"').next().unwrap_or("");
            let number: String = given
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            let example = if number.is_empty() {
                "30".to_string()
            } else {
                number
            };
            return format!(
                "expected a number of seconds for `{key}`, not the text \"{given}\": write {key} = {example}"
            );
        }
    }
    message.to_string()
}

/// 1-based line and column (in characters) of a byte offset.
pub(super) fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

/// An id the plan names (plan, phase, workload, config): letters, digits,
/// '-', '_' or '.'.
pub(super) fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// A number of seconds above 0 and at most [`MAX_SECONDS`] (NaN and infinity
/// are neither), or `default` when not given; an error points at the value.
pub(super) fn seconds(
    ctx: &Ctx,
    v: Option<&Spanned<f64>>,
    default: f64,
    name: &str,
) -> Result<f64, PlanError> {
    match v {
        None => Ok(default),
        Some(v) if *v.get_ref() > 0.0 && *v.get_ref() <= MAX_SECONDS => Ok(*v.get_ref()),
        Some(v) => Err(ctx.err(
            v.span(),
            format!("{name} must be more than 0 and at most {MAX_SECONDS} seconds"),
        )),
    }
}

/// A whole number within `range` (inclusive); an error points at the value.
pub(super) fn within<T: PartialOrd + Copy + fmt::Display>(
    ctx: &Ctx,
    v: &Spanned<T>,
    (lo, hi): (T, T),
    name: &str,
) -> Result<T, PlanError> {
    let x = *v.get_ref();
    if x >= lo && x <= hi {
        Ok(x)
    } else {
        Err(ctx.err(
            v.span(),
            format!("{name} must be from {lo} to {hi}, not {x}"),
        ))
    }
}
