//! The plan's `[[workloads]]`, checked, and the ones each phase runs.

use std::collections::HashSet;

use super::located::{line_col, seconds, valid_id, within, Ctx};
use super::schema::{RawPhase, RawPlan};
use super::{builtin_prompt, ranges, PlanError, Workload, BUILTIN_PROMPTS};

pub(super) fn workloads(ctx: &Ctx, raw: &RawPlan) -> Result<Vec<Workload>, PlanError> {
    if raw.workloads.get_ref().is_empty() {
        return Err(ctx.err(raw.workloads.span(), "a plan needs at least one workload"));
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for w in raw.workloads.get_ref() {
        let id = w.id.get_ref().clone();
        if !valid_id(&id) {
            return Err(ctx.err(
                w.id.span(),
                "workload id must use letters, digits, '-', '_' or '.'",
            ));
        }
        if !seen.insert(id.clone()) {
            return Err(ctx.err(w.id.span(), format!("duplicate workload id `{id}`")));
        }
        if w.contexts.get_ref().is_empty() {
            return Err(ctx.err(w.contexts.span(), "`contexts` is empty"));
        }
        let (lo, hi) = ranges::TOKENS;
        if w.contexts.get_ref().iter().any(|c| !(lo..=hi).contains(c)) {
            return Err(ctx.err(
                w.contexts.span(),
                format!("context targets must be from {lo} to {hi} tokens"),
            ));
        }
        if w.concurrency.get_ref().is_empty() {
            return Err(ctx.err(w.concurrency.span(), "`concurrency` is empty"));
        }
        let (lo, hi) = ranges::CONCURRENCY;
        if w.concurrency
            .get_ref()
            .iter()
            .any(|c| !(lo..=hi).contains(c))
        {
            return Err(ctx.err(
                w.concurrency.span(),
                format!("concurrency levels must be from {lo} to {hi}"),
            ));
        }
        let dup = |v: &[u64]| v.iter().collect::<HashSet<_>>().len() != v.len();
        if dup(w.contexts.get_ref()) {
            return Err(ctx.err(w.contexts.span(), "duplicate value in `contexts`"));
        }
        let conc: Vec<u64> = w.concurrency.get_ref().iter().map(|&c| c as u64).collect();
        if dup(&conc) {
            return Err(ctx.err(w.concurrency.span(), "duplicate value in `concurrency`"));
        }
        let requests = within(ctx, &w.requests, ranges::REQUESTS, "requests")?;
        let max_tokens = within(ctx, &w.max_tokens, ranges::MAX_TOKENS, "max_tokens")?;
        let warmup = match &w.warmup {
            None => 0,
            Some(v) => within(ctx, v, ranges::WARMUP, "warmup")?,
        };
        let repeats = match &w.repeats {
            None => 1,
            Some(v) => within(ctx, v, ranges::REPEATS, "repeats")?,
        };
        if let Some(v) = &w.rate {
            if !(*v.get_ref() > 0.0 && *v.get_ref() <= ranges::RATE) {
                return Err(ctx.err(
                    v.span(),
                    format!(
                        "rate must be more than 0 and at most {} requests/s",
                        ranges::RATE
                    ),
                ));
            }
        }
        if w.duration_s.is_some() {
            seconds(ctx, w.duration_s.as_ref(), 0.0, "duration_s")?;
        }
        let p = w.prompt.get_ref();
        let ok = match p.split_once(':') {
            Some(("builtin", name)) => builtin_prompt(name).is_some(),
            Some(("file" | "jsonl", path)) => !path.is_empty(),
            _ => false,
        };
        if !ok {
            return Err(ctx.err(
                w.prompt.span(),
                format!(
                    "prompt must be `builtin:NAME` (one of {}), `file:PATH` or `jsonl:PATH`",
                    BUILTIN_PROMPTS.join(", ")
                ),
            ));
        }
        out.push(Workload {
            id,
            prompt: p.clone(),
            contexts: w.contexts.get_ref().clone(),
            concurrency: w.concurrency.get_ref().clone(),
            requests,
            max_tokens,
            warmup,
            repeats,
            rate: w.rate.as_ref().map(|r| *r.get_ref()),
            duration_s: w.duration_s.as_ref().map(|r| *r.get_ref()),
            overflow: w.overflow,
            cache: w.cache,
            prompt_at: line_col(ctx.source, w.prompt.span().start),
        });
    }
    Ok(out)
}

/// The workloads a phase runs: its own list, or all of them.
pub(super) fn phase_workloads<'w>(
    ctx: &Ctx,
    phase: &RawPhase,
    workloads: &'w [Workload],
) -> Result<Vec<&'w Workload>, PlanError> {
    match &phase.workloads {
        None => Ok(workloads.iter().collect()),
        Some(ids) => ids
            .iter()
            .map(|id| {
                workloads
                    .iter()
                    .find(|w| &w.id == id.get_ref())
                    .ok_or_else(|| {
                        ctx.err(id.span(), format!("unknown workload `{}`", id.get_ref()))
                    })
            })
            .collect(),
    }
}
