//! A plan as written, expanded into configs × cells with stable ids: the
//! checks of the plan as a whole (name, `[server]`, patterns), then each
//! phase's combos built into configs and their cells, in plan order.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::path::PathBuf;

use super::combos::{combos, combos_bound, matches, Combos};
use super::config::build_config;
use super::limits::limits;
use super::located::{line_col, seconds, valid_id, within, Ctx};
use super::schema::{RawPhase, RawPlan};
use super::workloads::{phase_workloads, workloads};
use super::{
    ranges, template, Cell, Config, Excluded, Phase, Plan, PlanError, Port, Workload, MAX_CELLS,
    MAX_NAME_CHARS, MAX_SECONDS,
};
use crate::model::{thousands, FailureKind};

/// The plan as written, checked and expanded (its path and source are the
/// caller's to set).
pub(super) fn expand(ctx: &Ctx, raw: RawPlan) -> Result<Plan, PlanError> {
    let name = plan_name(ctx, &raw)?;
    let limits = limits(ctx, &raw)?;
    let workloads = workloads(ctx, &raw)?;
    let port = server(ctx, &raw)?;
    let patterns = patterns(ctx, &raw)?;
    super::prepare::check_steps(ctx, &raw)?;
    if raw.phases.get_ref().is_empty() {
        return Err(ctx.err(raw.phases.span(), "a plan needs at least one phase"));
    }
    let mut out = Expanded::default();
    for phase in raw.phases.get_ref() {
        let phase = expand_phase(ctx, &raw, phase, &workloads, port, &mut out)?;
        out.phases.push(phase);
    }
    let (prepare, keys) = super::prepare::assign(ctx, &raw, std::mem::take(&mut out.steps))?;
    for (config, keys) in out.configs.iter_mut().zip(keys) {
        config.prepare = keys;
    }
    Ok(Plan {
        name,
        description: raw.description.clone(),
        path: PathBuf::new(),
        source: String::new(),
        limits,
        workloads,
        phases: out.phases,
        configs: out.configs,
        cells: out.cells,
        patterns,
        prepare,
    })
}

fn plan_name(ctx: &Ctx, raw: &RawPlan) -> Result<String, PlanError> {
    let name = raw.name.get_ref().trim().to_string();
    if !valid_id(&name) || name.starts_with('.') {
        return Err(ctx.err(
            raw.name.span(),
            "plan name must be non-empty, use only letters, digits, '-', '_' or '.', and not start with '.'",
        ));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(ctx.err(
            raw.name.span(),
            format!(
                "plan name is {} characters; at most {MAX_NAME_CHARS} (it names the run directory)",
                name.chars().count()
            ),
        ));
    }
    Ok(name)
}

/// The `[server]` values every config shares, checked; its port.
fn server(ctx: &Ctx, raw: &RawPlan) -> Result<Port, PlanError> {
    let port = match raw.server.port.get_ref() {
        toml::Value::Integer(p) if (1..=65535).contains(p) => Port::Fixed(*p as u16),
        toml::Value::String(s) if s == "auto" => Port::Auto,
        _ => {
            return Err(ctx.err(
                raw.server.port.span(),
                "port must be a number from 1 to 65535 or \"auto\"",
            ))
        }
    };
    let grace = &raw.server.stop_grace_s;
    if !(0.0..=MAX_SECONDS).contains(grace.get_ref()) {
        return Err(ctx.err(
            grace.span(),
            format!("server.stop_grace_s must be from 0 to {MAX_SECONDS} seconds"),
        ));
    }
    seconds(
        ctx,
        Some(&raw.server.ready.timeout_s),
        0.0,
        "server.ready.timeout_s",
    )?;
    if let Some(r) = &raw.server.retries {
        within(ctx, r, ranges::RETRIES, "server.retries")?;
    }
    let words = template::split_words(raw.server.command.get_ref())
        .map_err(|e| ctx.err(raw.server.command.span(), format!("server.command: {e}")))?;
    if words.is_empty() {
        return Err(ctx.err(raw.server.command.span(), "server.command is empty"));
    }
    Ok(port)
}

/// The plan's own log patterns: a regex and the failure kind it means.
fn patterns(ctx: &Ctx, raw: &RawPlan) -> Result<Vec<(String, FailureKind)>, PlanError> {
    let mut patterns = Vec::new();
    for p in &raw.patterns {
        let kind = FailureKind::parse(p.kind.get_ref()).ok_or_else(|| {
            ctx.err(
                p.kind.span(),
                format!("unknown failure kind `{}`", p.kind.get_ref()),
            )
        })?;
        if let Err(e) = regex::Regex::new(p.regex.get_ref()) {
            return Err(ctx.err(p.regex.span(), format!("invalid regex: {e}")));
        }
        patterns.push((p.regex.get_ref().clone(), kind));
    }
    Ok(patterns)
}

/// What the phases expanded to so far.
#[derive(Default)]
struct Expanded {
    phases: Vec<Phase>,
    phase_ids: HashSet<String>,
    configs: Vec<Config>,
    /// Where each config id was produced, for a duplicate's error.
    config_spans: HashMap<String, Range<usize>>,
    cells: Vec<Cell>,
    /// The prepare steps as each config (in `configs`' order) fills them.
    steps: Vec<Vec<super::prepare::Filled>>,
}

/// One phase: its configs (added to `out` with their cells) and what its
/// `exclude` entries took out.
fn expand_phase(
    ctx: &Ctx,
    raw: &RawPlan,
    phase: &RawPhase,
    workloads: &[Workload],
    port: Port,
    out: &mut Expanded,
) -> Result<Phase, PlanError> {
    let pid = phase.id.get_ref().clone();
    if !valid_id(&pid) {
        return Err(ctx.err(
            phase.id.span(),
            "phase id must use letters, digits, '-', '_' or '.'",
        ));
    }
    if !out.phase_ids.insert(pid.clone()) {
        return Err(ctx.err(phase.id.span(), format!("duplicate phase id `{pid}`")));
    }
    let phase_workloads = phase_workloads(ctx, phase, workloads)?;
    size_fits(ctx, phase, &phase_workloads, out.cells.len())?;
    let (combos, excluded) = combos(ctx, phase)?;
    let excluded = excluded_configs(ctx, raw, phase, excluded, port);
    if combos.is_empty() {
        return Err(ctx.err(
            phase.id.span(),
            format!("phase `{pid}` has no configs left after include/exclude"),
        ));
    }
    let mut phase_configs = Vec::new();
    let mut baseline_found = false;
    for (combo, span) in &combos {
        let (mut config, steps) = build_config(ctx, raw, phase, combo, span.clone(), port)?;
        if let Some(prev) = out.config_spans.get(&config.id) {
            let (l, c) = line_col(ctx.source, prev.start);
            return Err(ctx.err(
                span.clone(),
                format!(
                    "duplicate config id `{}` (also produced at line {l}, col {c}); add an axis to `config_id` or change the matrix",
                    config.id
                ),
            ));
        }
        out.config_spans.insert(config.id.clone(), span.clone());
        config.baseline = match &phase.baseline {
            Some(b) => matches(b.get_ref(), combo),
            None => phase_configs.is_empty(),
        };
        baseline_found |= config.baseline;
        add_cells(&mut out.cells, &config, &phase_workloads);
        phase_configs.push(config.id.clone());
        out.configs.push(config);
        out.steps.push(steps);
    }
    if let (Some(b), false) = (&phase.baseline, baseline_found) {
        return Err(ctx.err(b.span(), "no config of this phase matches `baseline`"));
    }
    let pack = phase.pack.unwrap_or(raw.pack);
    if let (true, Port::Fixed(p)) = (pack && phase_configs.len() > 1, port) {
        return Err(ctx.err(
            raw.server.port.span(),
            format!(
                "phase `{pid}` runs its configs side by side (pack), so each needs its own port, but port = {p} is fixed: set port = \"auto\""
            ),
        ));
    }
    Ok(Phase {
        id: pid,
        configs: phase_configs,
        excluded,
        pack,
    })
}

/// The phase's size, known before anything is built: a plan too big to run
/// says so at once, with its numbers, instead of filling memory.
fn size_fits(
    ctx: &Ctx,
    phase: &RawPhase,
    workloads: &[&Workload],
    cells_so_far: usize,
) -> Result<(), PlanError> {
    let per_config: u128 = workloads
        .iter()
        .map(|w| (w.contexts.len() * w.concurrency.len()) as u128)
        .sum();
    let bound = combos_bound(phase);
    let so_far = cells_so_far as u128;
    let total = so_far.saturating_add(bound.saturating_mul(per_config));
    if total > u128::from(MAX_CELLS) {
        return Err(ctx.err(
            phase.id.span(),
            format!(
                "phase `{}` would expand to up to {} configs × {per_config} cells each = {} cells{}; \
                 a plan may have at most {} cells: split it, or take values out of its axes",
                phase.id.get_ref(),
                thousands(bound),
                thousands(bound.saturating_mul(per_config)),
                if so_far > 0 { format!(" (after {} in earlier phases)", thousands(so_far)) } else { String::new() },
                thousands(u128::from(MAX_CELLS)),
            ),
        ));
    }
    Ok(())
}

/// The configs `exclude` took out, for `check` to list: the id each would
/// have had (its axes when the id cannot be made), where the `exclude` is,
/// and the comment above it.
fn excluded_configs(
    ctx: &Ctx,
    raw: &RawPlan,
    phase: &RawPhase,
    excluded: Combos,
    port: Port,
) -> Vec<Excluded> {
    excluded
        .into_iter()
        .map(|(combo, span)| {
            let config = build_config(ctx, raw, phase, &combo, span.clone(), port)
                .map(|(c, _)| c.id)
                .unwrap_or_else(|_| {
                    combo
                        .iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                });
            let (line, _) = line_col(ctx.source, span.start);
            Excluded {
                config,
                line,
                why: comment_above(ctx.source, line),
            }
        })
        .collect()
}

/// The `# …` comment lines just above line `line` (1-based) of the source,
/// skipping the `[[phases.exclude]]` header the entry's keys follow.
fn comment_above(source: &str, line: usize) -> Option<String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut i = line.saturating_sub(1).min(lines.len());
    // The span starts at the first key; the header is above it.
    while i > 0 && lines[i - 1].trim().starts_with("[[") {
        i -= 1;
    }
    let mut comment: Vec<&str> = Vec::new();
    while i > 0 {
        let Some(text) = lines[i - 1].trim().strip_prefix('#') else {
            break;
        };
        comment.push(text.trim());
        i -= 1;
    }
    comment.reverse();
    let text = comment.join(" ").trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// A config's cells: each of its phase's workloads × context × concurrency.
fn add_cells(cells: &mut Vec<Cell>, config: &Config, workloads: &[&Workload]) {
    for w in workloads {
        for &ctx_tokens in &w.contexts {
            for &conc in &w.concurrency {
                cells.push(Cell {
                    id: format!("{}/{}-ctx{}-c{}", config.id, w.id, ctx_tokens, conc),
                    config: config.id.clone(),
                    phase: config.phase.clone(),
                    workload: w.id.clone(),
                    context_tokens: ctx_tokens,
                    concurrency: conc,
                });
            }
        }
    }
}
