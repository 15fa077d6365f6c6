//! One config built from a combo of a phase: its id, its variables, and the
//! `[server]` table filled for it (command, environment, required paths,
//! tokenizer, GPUs).

use std::ops::Range;

use indexmap::IndexMap;

use super::combos::{matches, Combo};
use super::located::{valid_id, Ctx};
use super::prepare::{fill_steps, Filled};
use super::resolve::Resolver;
use super::schema::{RawPhase, RawPlan, RawServer};
use super::{parse_visible_devices, template, Config, PlanError, Port, Ready};

/// The config a combo of `phase` names, and the prepare steps filled for
/// it; `span` is the plan text that produced the combo.
pub(super) fn build_config(
    ctx: &Ctx,
    raw: &RawPlan,
    phase: &RawPhase,
    combo: &Combo,
    span: Range<usize>,
    port: Port,
) -> Result<(Config, Vec<Filled>), PlanError> {
    let pid = phase.id.get_ref();
    let id = config_id(ctx, raw, phase, combo, span)?;
    let vars = vars(raw, phase, combo);
    let server = &raw.server;
    let r = Resolver {
        ctx,
        combo,
        vars: &vars,
        id: &id,
        phase: pid,
        picked_gpus: server.gpus.is_some(),
    };
    let argv = super::resolve::command_argv(&r, &server.command, server.shell, "server.command")?;
    let mut env = IndexMap::new();
    for (k, v) in &server.env {
        env.insert(k.clone(), r.resolve(v.get_ref(), v.span())?);
    }
    let preset = server.kind.preset();
    for (k, v) in preset.env {
        if !env.contains_key(*k) {
            env.insert(k.to_string(), v.to_string());
        }
    }
    let mut requires = Vec::new();
    for p in &server.requires {
        requires.push(r.resolve(p.get_ref(), p.span())?);
    }
    // An empty value (a variable set to "") means none.
    let tokenizer = match &server.tokenizer {
        Some(t) => Some(r.resolve(t.get_ref(), t.span())?).filter(|p| !p.is_empty()),
        None => None,
    };
    let (gpus, gpu_count) = gpus(&r, server, &mut env)?;
    let steps = fill_steps(&r, raw, phase, &requires)?;
    let config = Config {
        id,
        phase: pid.clone(),
        axes: combo.clone(),
        argv,
        shell: server.shell,
        env,
        requires,
        host: server.host.clone(),
        port,
        ready: Ready {
            path: server.ready.path.clone(),
            log_line: server
                .ready
                .log_line
                .clone()
                .or(preset.ready_log_line.map(str::to_string)),
            timeout_s: *server.ready.timeout_s.get_ref(),
            generate: server.ready.generate,
        },
        stop_grace_s: *server.stop_grace_s.get_ref(),
        kind: server.kind,
        api: server.api,
        model: server.model.clone(),
        retries: server.retries.as_ref().map_or(0, |n| *n.get_ref()),
        tokenizer,
        baseline: false,
        gpus,
        gpu_count,
        prepare: Vec::new(),
    };
    Ok((config, steps))
}

/// The config's id: the phase's (or plan's) `config_id` template filled
/// from the combo, segments it cannot fill dropped; without one, the axis
/// values joined (a number after its axis name); the phase id when empty.
fn config_id(
    ctx: &Ctx,
    raw: &RawPlan,
    phase: &RawPhase,
    combo: &Combo,
    span: Range<usize>,
) -> Result<String, PlanError> {
    let id_template = phase.config_id.as_ref().or(raw.config_id.as_ref());
    let id = match id_template {
        Some(t) => {
            let segs: Vec<String> = t
                .get_ref()
                .split('-')
                .filter_map(|seg| template::fill(seg, &|n| combo.get(n).cloned()).ok())
                .filter(|s| !s.is_empty())
                .collect();
            segs.join("-")
        }
        None => combo
            .iter()
            .map(|(axis, v)| {
                if v.parse::<f64>().is_ok() {
                    format!("{axis}{v}")
                } else {
                    v.clone()
                }
            })
            .collect::<Vec<_>>()
            .join("-"),
    };
    let id = if id.is_empty() {
        phase.id.get_ref().clone()
    } else {
        id
    };
    if !valid_id(&id) {
        return Err(ctx.err(
            id_template.map(|t| t.span()).unwrap_or(span),
            format!("config id `{id}` may use only letters, digits, '-', '_' or '.'"),
        ));
    }
    Ok(id)
}

/// The variables a config's templates see: plan vars, then phase vars, then
/// the `set` rules matching its combo (a later one wins).
fn vars(raw: &RawPlan, phase: &RawPhase, combo: &Combo) -> IndexMap<String, String> {
    let mut vars = IndexMap::new();
    for (k, v) in raw.vars.iter().chain(phase.vars.iter()) {
        vars.insert(k.clone(), v.get_ref().clone());
    }
    for rule in &phase.set {
        if matches(rule.when.get_ref(), combo) {
            for (k, v) in &rule.vars {
                vars.insert(k.clone(), v.get_ref().clone());
            }
        }
    }
    vars
}

/// The config's GPUs from `server.gpus` (a list, or a count picked at
/// launch, which then fills `CUDA_VISIBLE_DEVICES`), else from the
/// `CUDA_VISIBLE_DEVICES` it sets itself.
fn gpus(
    r: &Resolver,
    server: &RawServer,
    env: &mut IndexMap<String, String>,
) -> Result<(Option<Vec<u32>>, Option<u32>), PlanError> {
    let id = r.id;
    let Some(g) = &server.gpus else {
        let listed = env
            .get("CUDA_VISIBLE_DEVICES")
            .and_then(|v| parse_visible_devices(v));
        return Ok((listed, None));
    };
    let text = r.resolve(g.get_ref(), g.span())?;
    let text = text.trim();
    let wanted = if let Some(n) = text.strip_prefix("auto:") {
        match n.trim().parse::<u32>() {
            Ok(n) if (1..=64).contains(&n) => (None, Some(n)),
            _ => {
                return Err(r.ctx.err(
                    g.span(),
                    format!("server.gpus `{text}` for config `{id}`: after `auto:` a count of GPUs from 1 to 64"),
                ))
            }
        }
    } else {
        match parse_visible_devices(text) {
            Some(list) => (Some(list), None),
            None => {
                return Err(r.ctx.err(
                    g.span(),
                    format!("server.gpus `{text}` for config `{id}`: a list of GPU numbers (\"0,1\") or \"auto:N\""),
                ))
            }
        }
    };
    match env.get("CUDA_VISIBLE_DEVICES") {
        // The server learns its GPUs from the variable; `{gpus}` fills it at launch.
        None => {
            env.insert("CUDA_VISIBLE_DEVICES".into(), "{gpus}".into());
        }
        Some(v) if v.contains("{gpus}") => {}
        Some(v) => {
            return Err(r.ctx.err(
                g.span(),
                format!("config `{id}` sets both server.gpus and CUDA_VISIBLE_DEVICES = \"{v}\": keep one (the variable is set from server.gpus)"),
            ))
        }
    }
    Ok(wanted)
}
