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
