//! What `sweeptop check` prints about a plan: the expanded matrix (phases,
//! configs with their cells, GPUs and commands, what `exclude` took out, the
//! workloads), and the required paths this machine lacks.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;

use indexmap::IndexMap;

use super::{template, Cache, Config, Overflow, Phase, Plan, Workload};

/// The expanded matrix as printed by `sweeptop check`.
pub fn describe(plan: &Plan) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "plan `{}`: {} phases, {} configs, {} cells",
        plan.name,
        plan.phases.len(),
        plan.configs.len(),
        plan.cells.len()
    );
    // What `server.kind` fills in (every config shares the [server] table).
    if let Some(c) = plan.configs.first() {
        server_kind(&mut s, c);
    }
    let per_config: BTreeMap<&str, usize> = plan.cells.iter().fold(BTreeMap::new(), |mut m, c| {
        *m.entry(c.config.as_str()).or_default() += 1;
        m
    });
    let configs: HashMap<&str, &Config> = plan.configs.iter().map(|c| (c.id.as_str(), c)).collect();
    for phase in &plan.phases {
        phase_lines(&mut s, phase, &configs, &per_config);
    }
    let _ = writeln!(s, "\nworkloads");
    for w in &plan.workloads {
        workload_line(&mut s, w);
    }
    if !plan.prepare.is_empty() {
        let _ = writeln!(
            s,
            "\nprepare steps (run before the first config needing them)"
        );
        for step in &plan.prepare {
            step_lines(&mut s, plan, step);
        }
    }
    s
}

/// A prepare step: what it runs, what it creates and whether that is there
/// now, how it is known whole, and the configs that need it.
fn step_lines(s: &mut String, plan: &Plan, step: &super::Step) {
    let configs: Vec<&str> = plan
        .configs
        .iter()
        .filter(|c| c.prepare.contains(&step.key))
        .map(|c| c.id.as_str())
        .collect();
    let who = match configs.len() {
        0 => "no config".to_string(),
        1..=3 => configs.join(", "),
        n if n == plan.configs.len() => format!("every config ({n})"),
        n => format!("{n} configs: {} …", configs[..2].join(", ")),
    };
    let there = if step
        .creates
        .iter()
        .all(|c| std::path::Path::new(c).exists())
    {
        "there now: checked, run only if not whole"
    } else {
        "missing now: it will run"
    };
    let _ = writeln!(s, "  {}  for {who}", step.key);
    let _ = writeln!(
        s,
        "    $ {}",
        template::command_line(&step.argv, step.shell)
    );
    let _ = writeln!(s, "    creates {} ({there})", step.creates.join(", "));
    let whole = match &step.expect {
        super::Expect::Bytes(b) => format!("{b} bytes"),
        super::Expect::From(f) => format!("the size of {f}"),
        super::Expect::Unknown => String::new(),
    };
    let mut checks = Vec::new();
    if !whole.is_empty() {
        checks.push(format!("holds {whole}"));
    }
    if !step.sha256.is_empty() {
        checks.push(format!("{} file(s) hash as listed", step.sha256.len()));
    }
    if step.verify_recorded {
        checks.push("config.json hashes as this run recorded".into());
    }
    let checks = if checks.is_empty() {
        "exists (no expect_bytes, expect_from or verify: a half-done copy would pass)".to_string()
    } else {
        checks.join(", ")
    };
    let _ = writeln!(
        s,
        "    whole when it {checks}; timeout {} s",
        step.timeout_s
    );
}

/// The line on what the config's server kind (its preset) fills in.
fn server_kind(s: &mut String, c: &Config) {
    let p = c.kind.preset();
    let list = |v: &[&str]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let paths = |v: &[(&str, &str)]| {
        let mut p: Vec<&str> = v.iter().map(|(path, _)| *path).collect();
        p.dedup();
        list(&p)
    };
    let env: Vec<String> = p.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let env: Vec<&str> = env.iter().map(String::as_str).collect();
    let _ = writeln!(
        s,
        "server kind {}: ready on {}{}; context from /v1/models{}; version from {}; cache flush {}; env {}; acceptance from {}",
        c.kind.as_str(),
        c.ready.path,
        c.ready.log_line.as_deref().map(|l| format!(" + log line \"{l}\"")).unwrap_or_default(),
        if p.context.is_empty() {
            String::new()
        } else {
            format!(", {}", paths(p.context))
        },
        paths(p.version),
        list(p.flush),
        list(&env),
        p.acceptance
    );
    if !p.slots.is_empty() {
        let _ = writeln!(
            s,
            "  its context is one slot's: --ctx-size shared by --parallel slots (2048 over 4 = 512 tokens a request); prompts are planned against one slot's, read from {} when ready",
            paths(p.context)
        );
    }
}

/// A phase: its configs (cells, GPUs, command) and those `exclude` took out.
fn phase_lines(
    s: &mut String,
    phase: &Phase,
    configs: &HashMap<&str, &Config>,
    per_config: &BTreeMap<&str, usize>,
) {
    let _ = writeln!(
        s,
        "\nphase {}{}",
        phase.id,
        if phase.pack && phase.configs.len() > 1 {
            " (configs side by side on GPUs they do not share)"
        } else {
            ""
        }
    );
    for cid in &phase.configs {
        if let Some(c) = configs.get(cid.as_str()) {
            let _ = writeln!(
                s,
                "  {:<28} {:>3} cells  {}{}",
                c.id,
                per_config.get(c.id.as_str()).copied().unwrap_or(0),
                gpus(c),
                if c.baseline { "  (baseline)" } else { "" }
            );
            let _ = writeln!(s, "      $ {}", template::command_line(&c.argv, c.shell));
        }
    }
    for x in &phase.excluded {
        let _ = writeln!(
            s,
            "  {:<28} excluded by the `exclude` at line {}{}",
            x.config,
            x.line,
            x.why
                .as_deref()
                .map(|w| format!(": {w}"))
                .unwrap_or_default()
        );
    }
}

/// The GPUs a config runs on, in words.
fn gpus(c: &Config) -> String {
    match &c.gpus {
        Some(g) if g.len() == 1 => format!("GPU {}", g[0]),
        Some(g) => format!(
            "GPUs {}",
            g.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
        ),
        None => match c.gpu_count {
            Some(1) => "1 free GPU (picked at launch)".to_string(),
            Some(n) => format!("{n} free GPUs (picked at launch)"),
            None => "GPUs: all visible".to_string(),
        },
    }
}

fn workload_line(s: &mut String, w: &Workload) {
    let list = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(", ");
    let overflow = match w.overflow {
        Overflow::Clamp => "clamp (shorten the prompt to fit)",
        Overflow::Fail => "fail (record the cell failed)",
        Overflow::Send => "send (let the server reject it)",
    };
    let _ = writeln!(
        s,
        "  {:<12} prompt {}  contexts {}  concurrency {}  {} requests x {} tokens{}  cache {}  overflow {overflow}",
        w.id,
        w.prompt,
        list(&mut w.contexts.iter().map(u64::to_string)),
        list(&mut w.concurrency.iter().map(u32::to_string)),
        w.requests,
        w.max_tokens,
        if w.repeats > 1 {
            format!("  measured {} times (median)", w.repeats)
        } else {
            String::new()
        },
        match w.cache {
            Cache::Cold => "cold",
            Cache::Warm => "warm",
        },
    );
}

/// Paths the plan's configs `require` that do not exist on this machine,
/// each with the configs that need it and a hint: what a launch would fail
/// on, said before the sweep starts.
pub fn missing_requires(plan: &Plan) -> Vec<String> {
    let mut need: IndexMap<&str, Vec<&str>> = IndexMap::new();
    for c in &plan.configs {
        for r in &c.requires {
            need.entry(r.as_str()).or_default().push(c.id.as_str());
        }
    }
    // A path a prepare step puts in place is not missing: it will be made.
    let made = |path: &str| {
        plan.prepare.iter().any(|s| {
            s.creates
                .iter()
                .any(|c| super::prepare::path_within(path, c))
        })
    };
    need.into_iter()
        .filter(|(path, _)| !made(path) && !std::path::Path::new(path).exists())
        .map(|(path, configs)| {
            let who = match configs.len() {
                1..=3 => configs.join(", "),
                n => format!("{n} configs: {} …", configs[..2].join(", ")),
            };
            format!(
                "required path {path} does not exist on this machine{} (needed by {who})",
                missing_path_hint(path),
            )
        })
        .collect()
}

/// What to do about a missing required path, when we know.
pub fn missing_path_hint(path: &str) -> &'static str {
    if path.starts_with("/dev/shm") {
        ": files in /dev/shm vanish on reboot, copy the model back"
    } else {
        ""
    }
}
