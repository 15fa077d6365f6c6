//! A phase's configs as axis assignments (combos): the matrix product, each
//! `include` entry, minus what `exclude` takes out; and the filters (`when`,
//! `exclude`, `baseline`) that match them.

use std::collections::HashSet;
use std::ops::Range;

use indexmap::IndexMap;

use super::located::Ctx;
use super::schema::{Axes, RawPhase};
use super::PlanError;

/// One point of a phase's matrix: a value for each axis, in the plan's order.
pub(super) type Combo = IndexMap<String, String>;

/// Combos, each with the span of the plan text that produced it (for an
/// excluded one, the span of the `exclude` entry).
pub(super) type Combos = Vec<(Combo, Range<usize>)>;

/// Configs a phase's matrix and includes name at most (before duplicates and
/// excludes are taken out), counted without building them.
pub(super) fn combos_bound(phase: &RawPhase) -> u128 {
    let product = |axes: &Axes| {
        axes.values()
            .map(|v| v.get_ref().0.len() as u128)
            .fold(1u128, u128::saturating_mul)
    };
    let matrix = if !phase.matrix.is_empty() || phase.include.is_empty() {
        product(&phase.matrix)
    } else {
        0
    };
    phase
        .include
        .iter()
        .map(|i| product(i.get_ref()))
        .fold(matrix, u128::saturating_add)
}

/// The phase's configs as axis assignments: the matrix product, then each
/// `include` entry (a small matrix of its own), minus `exclude` matches; each
/// with the span that produced it. Returns the kept combos and the ones
/// `exclude` took out.
pub(super) fn combos(ctx: &Ctx, phase: &RawPhase) -> Result<(Combos, Combos), PlanError> {
    let mut out: Combos = Vec::new();
    let mut seen: HashSet<Vec<(String, String)>> = HashSet::new();
    if !phase.matrix.is_empty() || phase.include.is_empty() {
        // A phase without axes is one config.
        add(ctx, &phase.matrix, phase.id.span(), &mut seen, &mut out)?;
    }
    for inc in &phase.include {
        if inc.get_ref().is_empty() {
            return Err(ctx.err(inc.span(), "empty include entry"));
        }
        add(ctx, inc.get_ref(), inc.span(), &mut seen, &mut out)?;
    }
    let known: HashSet<&str> = phase
        .matrix
        .keys()
        .chain(phase.include.iter().flat_map(|i| i.get_ref().keys()))
        .map(|k| k.as_str())
        .collect();
    let mut excluded: Combos = Vec::new();
    for ex in &phase.exclude {
        for (axis, values) in ex.get_ref() {
            if !known.contains(axis.as_str()) {
                return Err(ctx.err(
                    values.span(),
                    format!("exclude names `{axis}`, which is not an axis of this phase"),
                ));
            }
        }
        let (gone, kept): (Combos, Combos) =
            out.into_iter().partition(|(c, _)| matches(ex.get_ref(), c));
        out = kept;
        excluded.extend(gone.into_iter().map(|(c, _)| (c, ex.span())));
    }
    set_rules_name_axes(ctx, phase, &known)?;
    Ok((out, excluded))
}

/// Adds the product of `axes` to `out`, each combo once (`seen`).
fn add(
    ctx: &Ctx,
    axes: &Axes,
    span: Range<usize>,
    seen: &mut HashSet<Vec<(String, String)>>,
    out: &mut Combos,
) -> Result<(), PlanError> {
    for (axis, values) in axes {
        if values.get_ref().0.is_empty() {
            return Err(ctx.err(values.span(), format!("axis `{axis}` is empty")));
        }
        if !valid_axis(axis) {
            return Err(ctx.err(
                values.span(),
                format!("axis name `{axis}` must use letters, digits or '_'"),
            ));
        }
        let v = &values.get_ref().0;
        if v.iter().collect::<HashSet<_>>().len() != v.len() {
            return Err(ctx.err(
                values.span(),
                format!("axis `{axis}` has a duplicate value"),
            ));
        }
    }
    let mut acc: Vec<Combo> = vec![IndexMap::new()];
    for (axis, values) in axes {
        let mut next = Vec::new();
        for c in &acc {
            for v in &values.get_ref().0 {
                let mut c = c.clone();
                c.insert(axis.clone(), v.clone());
                next.push(c);
            }
        }
        acc = next;
    }
    for c in acc {
        // The same point named twice (a matrix and an include) is one config.
        let mut key: Vec<(String, String)> =
            c.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        key.sort();
        if seen.insert(key) {
            out.push((c, span.clone()));
        }
    }
    Ok(())
}

/// A `set` rule whose `when` names no axis of the phase would never apply.
fn set_rules_name_axes(
    ctx: &Ctx,
    phase: &RawPhase,
    known: &HashSet<&str>,
) -> Result<(), PlanError> {
    for rule in &phase.set {
        for (axis, values) in rule.when.get_ref() {
            if !known.contains(axis.as_str()) {
                let mut axes: Vec<&str> = known.iter().copied().collect();
                axes.sort_unstable();
                return Err(ctx.err(
                    values.span(),
                    format!(
                        "`when` names `{axis}`, which is not an axis of phase `{}` (its axes: {})",
                        phase.id.get_ref(),
                        if axes.is_empty() {
                            "none".to_string()
                        } else {
                            axes.join(", ")
                        }
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn valid_axis(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether a combo matches a filter (every named axis has one of the listed values).
pub(super) fn matches(filter: &Axes, combo: &Combo) -> bool {
    filter.iter().all(|(axis, values)| {
        combo
            .get(axis)
            .is_some_and(|v| values.get_ref().0.iter().any(|w| w == v))
    })
}
