//! The plan's `[[prepare]]` steps: what puts in place the files configs need
//! (a model copied into `/dev/shm`, which a reboot empties). A step is filled
//! for each config like the server's command (its axes and variables), and a
//! config needs it when the config's phase names it, or when one of the
//! config's `requires` paths lies within what the step `creates`; a step no
//! phase names and no `requires` path falls within is needed by every
//! config. Configs that fill a step the same share it: it runs once.

use std::collections::HashSet;

use indexmap::IndexMap;
use serde::Serialize;

use super::located::{seconds, valid_id, Ctx};
use super::resolve::{command_argv, Resolver};
use super::schema::{RawPhase, RawPlan, RawStep};
use super::PlanError;

/// How long a step may run unless it says (a 50 GB download on a slow link
/// takes a while; a step that never ends must still end).
pub const DEFAULT_STEP_TIMEOUT_S: f64 = 4.0 * 3600.0;

/// The most bytes a step may say it creates (a petabyte: a larger number is
/// a typo).
pub const MAX_EXPECT_BYTES: u64 = 1_000_000_000_000_000;

/// Where a step's whole size comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    /// Not said: the step is done when `creates` exists (and verifies).
    Unknown,
    Bytes(u64),
    /// Read when the step runs: a source directory (its files summed) or
    /// `hf:ORG/NAME` (the local Hugging Face snapshot of that model).
    From(String),
}

/// One prepare step, filled for the configs that share it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    /// The step's key: its id, or `id@path` when configs fill it differently.
    pub key: String,
    /// The id as written.
    pub id: String,
    pub argv: Vec<String>,
    pub shell: bool,
    pub env: IndexMap<String, String>,
    pub creates: Vec<String>,
    pub expect: Expect,
    /// (file, SHA-256 hex): files relative to the first `creates` path.
    pub sha256: Vec<(String, String)>,
    /// A `creates` directory's `config.json` must hash as this run recorded it.
    pub verify_recorded: bool,
    pub timeout_s: f64,
}

impl Step {
    /// Whether anything but existence proves the step whole.
    pub fn checks_whole(&self) -> bool {
        self.expect != Expect::Unknown || !self.sha256.is_empty() || self.verify_recorded
    }
}

/// A step as one config fills it, and whether that config needs it.
#[derive(Debug, Clone)]
pub(super) struct Filled {
    /// Its index among the plan's `[[prepare]]` entries.
    pub index: usize,
    pub step: Step,
    /// Named by the config's phase, or a `requires` path of the config lies
    /// within what it creates.
    pub linked: bool,
}

/// The steps checked as written (ids, commands, sizes), before any config.
pub(super) fn check_steps(ctx: &Ctx, raw: &RawPlan) -> Result<(), PlanError> {
    let mut ids = HashSet::new();
    for s in &raw.prepare {
        let id = s.id.get_ref();
        if !valid_id(id) {
            return Err(ctx.err(
                s.id.span(),
                "prepare step id must use letters, digits, '-', '_' or '.'",
            ));
        }
        if !ids.insert(id.clone()) {
            return Err(ctx.err(s.id.span(), format!("duplicate prepare step id `{id}`")));
        }
        if s.command.get_ref().trim().is_empty() {
            return Err(ctx.err(
                s.command.span(),
                format!("prepare step `{id}`: command is empty"),
            ));
        }
        if s.creates.get_ref().is_empty() {
            return Err(ctx.err(
                s.creates.span(),
                format!(
                    "prepare step `{id}`: creates is empty; name what the step puts in place \
                     (it proves the step done)"
                ),
            ));
        }
        for c in s.creates.get_ref() {
            if c.get_ref().trim().is_empty() {
                return Err(ctx.err(
                    c.span(),
                    format!("prepare step `{id}`: an empty path in creates"),
                ));
            }
        }
        match (&s.expect_bytes, &s.expect_from) {
            (Some(b), Some(_)) => {
                return Err(ctx.err(
                    b.span(),
                    format!("prepare step `{id}`: give expect_bytes or expect_from, not both"),
                ))
            }
            (Some(b), None) if *b.get_ref() == 0 || *b.get_ref() > MAX_EXPECT_BYTES => {
                return Err(ctx.err(
                    b.span(),
                    format!(
                        "prepare step `{id}`: expect_bytes must be from 1 to {MAX_EXPECT_BYTES}"
                    ),
                ))
            }
            (None, Some(f)) if f.get_ref().trim().is_empty() || f.get_ref() == "hf:" => {
                return Err(ctx.err(
                    f.span(),
                    format!(
                        "prepare step `{id}`: expect_from names a source directory or `hf:ORG/NAME`"
                    ),
                ))
            }
            _ => {}
        }
        if let Some(v) = &s.verify {
            for (file, hash) in &v.sha256 {
                let h = hash.get_ref();
                if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(ctx.err(
                        hash.span(),
                        format!(
                            "prepare step `{id}`: the sha256 of `{file}` must be 64 hex digits"
                        ),
                    ));
                }
            }
        }
        seconds(ctx, s.timeout_s.as_ref(), 0.0, "prepare.timeout_s")?;
    }
    for phase in raw.phases.get_ref() {
        for name in &phase.prepare {
            if !ids.contains(name.get_ref()) {
                let known = raw.prepare.iter().map(|s| s.id.get_ref().as_str());
                let hint = super::located::nearest(name.get_ref(), known)
                    .map(|n| format!("; did you mean `{n}`?"))
                    .unwrap_or_default();
                return Err(ctx.err(
                    name.span(),
                    format!("no prepare step `{}`{hint}", name.get_ref()),
                ));
            }
        }
    }
    Ok(())
}

/// Every step filled for one config, each said needed or not.
pub(super) fn fill_steps(
    r: &Resolver,
    raw: &RawPlan,
    phase: &RawPhase,
    requires: &[String],
) -> Result<Vec<Filled>, PlanError> {
    let mut out = Vec::with_capacity(raw.prepare.len());
    for (index, s) in raw.prepare.iter().enumerate() {
        let step = fill(r, s)?;
        let named = phase.prepare.iter().any(|n| n.get_ref() == &step.id);
        let within = requires
            .iter()
            .any(|req| step.creates.iter().any(|c| path_within(req, c)));
        out.push(Filled {
            index,
            step,
            linked: named || within,
        });
    }
    Ok(out)
}

fn fill(r: &Resolver, s: &RawStep) -> Result<Step, PlanError> {
    let id = s.id.get_ref().clone();
    let argv = command_argv(
        r,
        &s.command,
        s.shell,
        &format!("prepare step `{id}`: command"),
    )?;
    let mut env = IndexMap::new();
    for (k, v) in &s.env {
        env.insert(k.clone(), r.resolve(v.get_ref(), v.span())?);
    }
    let mut creates = Vec::new();
    for c in s.creates.get_ref() {
        let filled = r.resolve(c.get_ref(), c.span())?;
        if filled.trim().is_empty() {
            return Err(r.ctx.err(
                c.span(),
                format!("prepare step `{id}`: a creates path is empty once filled"),
            ));
        }
        creates.push(filled);
    }
    let expect = match (&s.expect_bytes, &s.expect_from) {
        (Some(b), _) => Expect::Bytes(*b.get_ref()),
        (None, Some(f)) => Expect::From(r.resolve(f.get_ref(), f.span())?),
        (None, None) => Expect::Unknown,
    };
    let (sha256, verify_recorded) = match &s.verify {
        Some(v) => (
            v.sha256
                .iter()
                .map(|(f, h)| (f.clone(), h.get_ref().to_ascii_lowercase()))
                .collect(),
            v.recorded,
        ),
        None => (Vec::new(), false),
    };
    Ok(Step {
        key: id.clone(),
        id,
        argv,
        shell: s.shell,
        env,
        creates,
        expect,
        sha256,
        verify_recorded,
        timeout_s: s
            .timeout_s
            .as_ref()
            .map_or(DEFAULT_STEP_TIMEOUT_S, |t| *t.get_ref()),
    })
}

/// Whether `path` is `root` or lies under it (by their words: `/a/b` is
/// within `/a`, `/ab` is not; a trailing `/` does not count).
pub fn path_within(path: &str, root: &str) -> bool {
    let path = path.trim_end_matches('/');
    let root = root.trim_end_matches('/');
    if root.is_empty() {
        return path.starts_with('/');
    }
    path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The plan's steps, each once, and the keys each config needs (in the
/// plan's order of steps). `filled[i]` is config `i`'s steps.
pub(super) fn assign(
    ctx: &Ctx,
    raw: &RawPlan,
    filled: Vec<Vec<Filled>>,
) -> Result<(Vec<Step>, Vec<Vec<String>>), PlanError> {
    let steps_written = raw.prepare.len();
    // A step linked to no config at all is every config's.
    let mut linked_anywhere = vec![false; steps_written];
    for f in filled.iter().flatten() {
        linked_anywhere[f.index] |= f.linked;
    }
    // The distinct fillings of each step, in the order configs use them.
    let mut distinct: Vec<Vec<Step>> = vec![Vec::new(); steps_written];
    let mut needs: Vec<Vec<(usize, usize)>> = Vec::with_capacity(filled.len());
    for config in &filled {
        let mut mine = Vec::new();
        for f in config {
            if !f.linked && linked_anywhere[f.index] {
                continue;
            }
            let list = &mut distinct[f.index];
            let at = match list.iter().position(|s| same_work(s, &f.step)) {
                Some(i) => i,
                None => {
                    list.push(f.step.clone());
                    list.len() - 1
                }
            };
            mine.push((f.index, at));
        }
        needs.push(mine);
    }
    // Two different steps (or fillings of one) that write one place would
    // take each other's work for their own: refused.
    let all: Vec<(usize, &Step)> = distinct
        .iter()
        .enumerate()
        .flat_map(|(i, list)| list.iter().map(move |s| (i, s)))
        .collect();
    for (n, (i, a)) in all.iter().enumerate() {
        for (j, b) in &all[..n] {
            let shared = a.creates.iter().find(|p| {
                b.creates
                    .iter()
                    .any(|q| path_within(p, q) || path_within(q, p))
            });
            if let Some(path) = shared {
                let what = if i == j {
                    format!("configs fill prepare step `{}` differently", a.id)
                } else {
                    format!("prepare steps `{}` and `{}` differ", b.id, a.id)
                };
                return Err(ctx.err(
                    raw.prepare[*i].creates.span(),
                    format!(
                        "{what} but both write {path}: give each its own target \
                         (e.g. a path with the axis in it, /dev/shm/{{model}})"
                    ),
                ));
            }
        }
    }
    // A step filled one way keeps its id as its key; several ways, each is
    // told apart by where it puts things.
    for list in &mut distinct {
        if list.len() > 1 {
            for s in list.iter_mut() {
                s.key = format!("{}@{}", s.id, s.creates[0]);
            }
        }
    }
    let keys = needs
        .iter()
        .map(|mine| {
            mine.iter()
                .map(|&(i, at)| distinct[i][at].key.clone())
                .collect()
        })
        .collect();
    Ok((distinct.into_iter().flatten().collect(), keys))
}

/// Two fillings of a step do the same work.
fn same_work(a: &Step, b: &Step) -> bool {
    a.argv == b.argv
        && a.shell == b.shell
        && a.env == b.env
        && a.creates == b.creates
        && a.expect == b.expect
        && a.sha256 == b.sha256
        && a.verify_recorded == b.verify_recorded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_within_by_their_words() {
        assert!(path_within("/dev/shm/qwen", "/dev/shm/qwen"));
        assert!(path_within("/dev/shm/qwen/config.json", "/dev/shm/qwen/"));
        assert!(!path_within("/dev/shm/qwen2", "/dev/shm/qwen"));
        assert!(!path_within("/dev/shm", "/dev/shm/qwen"));
    }
}
