//! The plan file: schema, validation with `file:line:col` errors, and expansion into
//! configs and cells with stable ids. Reads the plan file and nothing else.

mod describe;
mod devices;
#[cfg(test)]
mod fuzz;
mod prompts;
mod schema;
pub mod shard;
pub mod template;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::Serialize;
use toml::Spanned;

pub mod presets;
pub use presets::{Preset, ServerKind};
pub use schema::{Api, Cache, ForeignGpu, Overflow, ShortRequests};
use schema::{Axes, RawPlan};

use crate::model::FailureKind;
pub use describe::{describe, missing_path_hint, missing_requires};
pub use devices::parse_visible_devices;
pub use prompts::{builtin_prompt, BUILTIN_PROMPTS};
pub use shard::Shard;

/// The bundled demo plan (`sweeptop demo`: runs against the simulated server).
pub const DEMO_PLAN: &str = include_str!("../../sample_runs/demo.toml");
/// Where the demo plan lives in the repository, for its error messages.
pub const DEMO_PATH: &str = "sample_runs/demo.toml";

/// The longest time any plan setting may name (about 115 days): larger values
/// would overflow time arithmetic.
pub const MAX_SECONDS: f64 = 1e7;

/// The largest plan file read (a plan is a page of text; this stops
/// `check /dev/zero` from reading until memory runs out).
pub const MAX_PLAN_BYTES: u64 = 4 << 20;

/// The longest plan name: it names the run directory
/// (`runs/<name>-<YYYYMMDD-HHMMSS>`), which must fit a file name.
pub const MAX_NAME_CHARS: usize = 100;

/// The ranges of the plan's numbers, checked when it is read (the README's
/// plan reference lists them).
pub mod ranges {
    /// Context targets and the `limits.context` in tokens.
    pub const TOKENS: (u64, u64) = (1, 100_000_000);
    /// Requests in flight.
    pub const CONCURRENCY: (u32, u32) = (1, 65_536);
    /// Measured requests per cell.
    pub const REQUESTS: (u32, u32) = (1, 10_000_000);
    /// Tokens asked of each request.
    pub const MAX_TOKENS: (u32, u32) = (1, 1_048_576);
    /// Unmeasured requests first.
    pub const WARMUP: (u32, u32) = (0, 1_000_000);
    pub const REPEATS: (u32, u32) = (1, 100);
    /// Open-loop arrivals per second.
    pub const RATE: f64 = 1e6;
    /// Tokens kept free below the context limit.
    pub const CONTEXT_MARGIN: (u64, u64) = (0, 1_000_000);
    /// Relaunches of a crashed config.
    pub const RETRIES: (u32, u32) = (0, 100);
}

/// The most cells a plan may expand to. A bigger one is almost surely a
/// mistake (a million cells of a few seconds each is a month of GPU time), and
/// would only fill memory before anyone noticed.
pub const MAX_CELLS: u64 = 1_000_000;

/// A plan error with the place in the file it is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            // Not about a place in the file (it could not be read).
            write!(f, "{}: {}", self.file, self.message)
        } else {
            write!(
                f,
                "{}:{}:{}: {}",
                self.file, self.line, self.col, self.message
            )
        }
    }
}

impl std::error::Error for PlanError {}

/// How far the client's mean TTFT may be from the server's own before a cell
/// is flagged `clock_gap`, unless the plan says otherwise.
pub const DEFAULT_MAX_TTFT_GAP_MS: f64 = 25.0;
/// The % of a cold cell's prompt tokens that may be found cached before it is
/// flagged `cache_hit`, unless the plan says otherwise.
pub const DEFAULT_MAX_COLD_CACHE_HIT_PCT: f64 = 10.0;
/// The most repetitions of a cell may spread (% of the median) before it is
/// flagged `noisy`, unless the plan says otherwise.
pub const DEFAULT_MAX_SPREAD_PCT: f64 = 5.0;

/// Context limit: fixed, or read from the server once it is up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextLimit {
    Tokens(u64),
    Server,
}

#[derive(Debug, Clone, Serialize)]
pub struct Limits {
    pub context: ContextLimit,
    pub context_margin: u64,
    pub request_timeout_s: f64,
    pub stall_timeout_s: f64,
    pub cell_timeout_s: f64,
    pub max_error_rate: f64,
    pub short_requests: ShortRequests,
    pub max_ttft_gap_ms: f64,
    pub max_cold_cache_hit_pct: f64,
    pub max_spread_pct: f64,
    pub foreign_gpu: ForeignGpu,
}

#[derive(Debug, Clone, Serialize)]
pub struct Ready {
    pub path: String,
    pub log_line: Option<String>,
    pub timeout_s: f64,
    pub generate: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Port {
    Fixed(u16),
    Auto,
}

#[derive(Debug, Clone, Serialize)]
pub struct Workload {
    pub id: String,
    pub prompt: String,
    pub contexts: Vec<u64>,
    pub concurrency: Vec<u32>,
    pub requests: u32,
    pub max_tokens: u32,
    pub warmup: u32,
    /// Measurements of each cell (1: once).
    pub repeats: u32,
    pub rate: Option<f64>,
    pub duration_s: Option<f64>,
    pub overflow: Overflow,
    pub cache: Cache,
    /// Where `prompt` is in the plan file (line, column), for its errors.
    #[serde(skip)]
    pub prompt_at: (usize, usize),
}

/// One server launch: a point of a phase's matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Config {
    pub id: String,
    pub phase: String,
    pub axes: IndexMap<String, String>,
    /// argv with the runtime placeholders (`{port}`, `{host}`, `{run_dir}`,
    /// `{sweeptop}`) still to fill; with `shell`, one word: the command as
    /// written, for `sh -c`.
    pub argv: Vec<String>,
    pub shell: bool,
    pub env: IndexMap<String, String>,
    pub requires: Vec<String>,
    pub host: String,
    pub port: Port,
    pub ready: Ready,
    pub stop_grace_s: f64,
    pub kind: ServerKind,
    pub api: Api,
    pub model: Option<String>,
    pub retries: u32,
    /// A local tokenizer.json for measuring prompts (when the server has no /tokenize).
    pub tokenizer: Option<String>,
    pub baseline: bool,
    /// GPUs the config uses: `server.gpus` as a list, else
    /// `CUDA_VISIBLE_DEVICES` in its environment.
    pub gpus: Option<Vec<u32>>,
    /// `server.gpus = "auto:N"`: this many free GPUs, picked at launch.
    pub gpu_count: Option<u32>,
}

impl Config {
    /// How many GPUs the config occupies, when it says (a list or a count).
    pub fn gpus_wanted(&self) -> Option<usize> {
        match (&self.gpus, self.gpu_count) {
            (Some(g), _) => Some(g.len()),
            (None, Some(n)) => Some(n as usize),
            (None, None) => None,
        }
    }
}

/// One measurement: a config × workload × context × concurrency.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    pub id: String,
    pub config: String,
    pub phase: String,
    pub workload: String,
    pub context_tokens: u64,
    pub concurrency: u32,
}

#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub id: String,
    pub configs: Vec<String>,
    /// Configs the phase's `exclude` entries take out, for `check` to list.
    pub excluded: Vec<Excluded>,
    /// Its configs may run side by side on GPUs they do not share.
    pub pack: bool,
}

/// A config a phase's `[[phases.exclude]]` took out of its matrix.
#[derive(Debug, Clone, Serialize)]
pub struct Excluded {
    /// The id it would have had (its axes when the id cannot be made).
    pub config: String,
    /// Where the `exclude` entry is (1-based line of the plan file).
    pub line: usize,
    /// The comment just above the entry (`# budget 12 crashes …`), if any.
    pub why: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    pub name: String,
    pub description: Option<String>,
    #[serde(skip)]
    pub path: PathBuf,
    #[serde(skip)]
    pub source: String,
    pub limits: Limits,
    pub workloads: Vec<Workload>,
    pub phases: Vec<Phase>,
    pub configs: Vec<Config>,
    pub cells: Vec<Cell>,
    #[serde(skip)]
    pub patterns: Vec<(String, FailureKind)>,
}

impl Plan {
    pub fn load(path: &Path) -> Result<Plan, PlanError> {
        use std::io::Read;
        let fail = |message: String| PlanError {
            file: path.display().to_string(),
            line: 0,
            col: 0,
            message,
        };
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_PLAN_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| fail(format!("cannot read plan: {e}")))?;
        if bytes.len() as u64 > MAX_PLAN_BYTES {
            return Err(fail(format!(
                "cannot read plan: it is larger than {} MiB, and a plan is a small text file",
                MAX_PLAN_BYTES >> 20
            )));
        }
        let source = String::from_utf8(bytes).map_err(|e| {
            fail(format!(
                "cannot read plan: not UTF-8 text (at byte {})",
                e.utf8_error().valid_up_to()
            ))
        })?;
        Plan::parse(path, &source)
    }

    pub fn parse(path: &Path, source: &str) -> Result<Plan, PlanError> {
        let ctx = Ctx {
            file: path.display().to_string(),
            source,
        };
        let raw: RawPlan = toml::from_str(source).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            ctx.err(span, e.message().trim().to_string())
        })?;
        let mut plan = expand(&ctx, raw)?;
        plan.path = path.to_path_buf();
        plan.source = source.to_string();
        Ok(plan)
    }

    /// The files the plan needs on this machine, checked before anything
    /// runs: its prompt files exist and can be read. (`parse` does not look:
    /// a recorded run's plan is read on machines that lack them.)
    pub fn check_files(&self) -> Result<(), PlanError> {
        for w in &self.workloads {
            let Some(("file" | "jsonl", path)) = w.prompt.split_once(':') else {
                continue;
            };
            let problem = match std::fs::File::open(path).and_then(|f| f.metadata()) {
                Ok(m) if m.is_file() => continue,
                Ok(_) => "not a regular file".to_string(),
                Err(e) => e.to_string(),
            };
            let (line, col) = w.prompt_at;
            return Err(PlanError {
                file: self.path.display().to_string(),
                line,
                col,
                message: format!("prompt file `{path}` of workload `{}`: {problem}", w.id),
            });
        }
        Ok(())
    }

    pub fn config(&self, id: &str) -> Option<&Config> {
        self.configs.iter().find(|c| c.id == id)
    }

    pub fn workload(&self, id: &str) -> Option<&Workload> {
        self.workloads.iter().find(|w| w.id == id)
    }

    pub fn cells_of<'a>(&'a self, config: &'a str) -> impl Iterator<Item = &'a Cell> + 'a {
        self.cells.iter().filter(move |c| c.config == config)
    }
}

struct Ctx<'a> {
    file: String,
    source: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: Range<usize>, message: impl Into<String>) -> PlanError {
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
fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(source.len());
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn expand(ctx: &Ctx, raw: RawPlan) -> Result<Plan, PlanError> {
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

    let limits = limits(ctx, &raw)?;
    let workloads = workloads(ctx, &raw)?;

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

    if raw.phases.get_ref().is_empty() {
        return Err(ctx.err(raw.phases.span(), "a plan needs at least one phase"));
    }

    let mut configs: Vec<Config> = Vec::new();
    let mut config_spans: HashMap<String, Range<usize>> = HashMap::new();
    let mut phases = Vec::new();
    let mut cells = Vec::new();
    let mut phase_ids = HashSet::new();
    for phase in raw.phases.get_ref() {
        let pid = phase.id.get_ref().clone();
        if !valid_id(&pid) {
            return Err(ctx.err(
                phase.id.span(),
                "phase id must use letters, digits, '-', '_' or '.'",
            ));
        }
        if !phase_ids.insert(pid.clone()) {
            return Err(ctx.err(phase.id.span(), format!("duplicate phase id `{pid}`")));
        }
        let phase_workloads = phase_workloads(ctx, phase, &workloads)?;
        // The size is known before anything is built: a plan too big to run
        // says so at once, with its numbers, instead of filling memory.
        let per_config: u128 = phase_workloads
            .iter()
            .map(|w| (w.contexts.len() * w.concurrency.len()) as u128)
            .sum();
        let bound = combos_bound(phase);
        let so_far = cells.len() as u128;
        let total = so_far.saturating_add(bound.saturating_mul(per_config));
        if total > u128::from(MAX_CELLS) {
            return Err(ctx.err(
                phase.id.span(),
                format!(
                    "phase `{pid}` would expand to up to {} configs × {per_config} cells each = {} cells{}; \
                     a plan may have at most {} cells: split it, or take values out of its axes",
                    crate::model::thousands(bound),
                    crate::model::thousands(bound.saturating_mul(per_config)),
                    if so_far > 0 { format!(" (after {} in earlier phases)", crate::model::thousands(so_far)) } else { String::new() },
                    crate::model::thousands(u128::from(MAX_CELLS)),
                ),
            ));
        }
        let (combos, excluded) = combos(ctx, phase)?;
        let excluded = excluded
            .into_iter()
            .map(|(combo, span)| {
                let config = build_config(
                    ctx,
                    &raw,
                    phase,
                    &combo,
                    span.clone(),
                    phase.config_id.as_ref().or(raw.config_id.as_ref()),
                    port,
                )
                .map(|c| c.id)
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
            .collect();
        if combos.is_empty() {
            return Err(ctx.err(
                phase.id.span(),
                format!("phase `{pid}` has no configs left after include/exclude"),
            ));
        }
        let id_template = phase.config_id.as_ref().or(raw.config_id.as_ref());
        let mut phase_configs = Vec::new();
        let mut baseline_found = false;
        for (combo, span) in &combos {
            let config = build_config(ctx, &raw, phase, combo, span.clone(), id_template, port)?;
            if let Some(prev) = config_spans.get(&config.id) {
                let (l, c) = line_col(ctx.source, prev.start);
                return Err(ctx.err(
                    span.clone(),
                    format!(
                        "duplicate config id `{}` (also produced at line {l}, col {c}); add an axis to `config_id` or change the matrix",
                        config.id
                    ),
                ));
            }
            config_spans.insert(config.id.clone(), span.clone());
            let mut config = config;
            config.baseline = match &phase.baseline {
                Some(b) => matches(b.get_ref(), combo),
                None => phase_configs.is_empty(),
            };
            baseline_found |= config.baseline;
            for w in &phase_workloads {
                for &ctx_tokens in &w.contexts {
                    for &conc in &w.concurrency {
                        cells.push(Cell {
                            id: format!("{}/{}-ctx{}-c{}", config.id, w.id, ctx_tokens, conc),
                            config: config.id.clone(),
                            phase: pid.clone(),
                            workload: w.id.clone(),
                            context_tokens: ctx_tokens,
                            concurrency: conc,
                        });
                    }
                }
            }
            phase_configs.push(config.id.clone());
            configs.push(config);
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
        phases.push(Phase {
            id: pid,
            configs: phase_configs,
            excluded,
            pack,
        });
    }

    Ok(Plan {
        name,
        description: raw.description.clone(),
        path: PathBuf::new(),
        source: String::new(),
        limits,
        workloads,
        phases,
        configs,
        cells,
        patterns,
    })
}

fn limits(ctx: &Ctx, raw: &RawPlan) -> Result<Limits, PlanError> {
    let l = &raw.limits;
    let context = match &l.context {
        None => ContextLimit::Server,
        Some(v) => match v.get_ref() {
            toml::Value::Integer(n) if *n > 0 => ContextLimit::Tokens(*n as u64),
            toml::Value::String(s) if s == "server" => ContextLimit::Server,
            _ => {
                return Err(ctx.err(
                    v.span(),
                    "limits.context must be a positive number of tokens or \"server\"",
                ))
            }
        },
    };
    if let ContextLimit::Tokens(n) = context {
        if let Some(v) = &l.context {
            if n > ranges::TOKENS.1 {
                return Err(ctx.err(
                    v.span(),
                    format!("limits.context must be at most {} tokens", ranges::TOKENS.1),
                ));
            }
        }
    }
    let max_error_rate = match &l.max_error_rate {
        None => 0.0,
        Some(v) if (0.0..=1.0).contains(v.get_ref()) => *v.get_ref(),
        Some(v) => {
            return Err(ctx.err(v.span(), "limits.max_error_rate must be from 0 to 1"));
        }
    };
    let max_ttft_gap_ms = match &l.max_ttft_gap_ms {
        None => DEFAULT_MAX_TTFT_GAP_MS,
        Some(v) if v.get_ref().is_finite() && *v.get_ref() > 0.0 => *v.get_ref(),
        Some(v) => {
            return Err(ctx.err(
                v.span(),
                "limits.max_ttft_gap_ms must be a number of milliseconds above 0",
            ));
        }
    };
    let max_cold_cache_hit_pct = match &l.max_cold_cache_hit_pct {
        None => DEFAULT_MAX_COLD_CACHE_HIT_PCT,
        Some(v) if (0.0..=100.0).contains(v.get_ref()) => *v.get_ref(),
        Some(v) => {
            return Err(ctx.err(
                v.span(),
                "limits.max_cold_cache_hit_pct must be from 0 to 100",
            ));
        }
    };
    let max_spread_pct = match &l.max_spread_pct {
        None => DEFAULT_MAX_SPREAD_PCT,
        Some(v) if v.get_ref().is_finite() && *v.get_ref() >= 0.0 => *v.get_ref(),
        Some(v) => {
            return Err(ctx.err(
                v.span(),
                "limits.max_spread_pct must be a percentage of 0 or more",
            ));
        }
    };
    let context_margin = match &l.context_margin {
        None => 16,
        Some(v) => within(ctx, v, ranges::CONTEXT_MARGIN, "limits.context_margin")?,
    };
    Ok(Limits {
        context,
        context_margin,
        request_timeout_s: seconds(
            ctx,
            l.request_timeout_s.as_ref(),
            600.0,
            "limits.request_timeout_s",
        )?,
        stall_timeout_s: seconds(
            ctx,
            l.stall_timeout_s.as_ref(),
            120.0,
            "limits.stall_timeout_s",
        )?,
        cell_timeout_s: seconds(
            ctx,
            l.cell_timeout_s.as_ref(),
            3600.0,
            "limits.cell_timeout_s",
        )?,
        max_error_rate,
        short_requests: l.short_requests,
        max_ttft_gap_ms,
        max_cold_cache_hit_pct,
        max_spread_pct,
        foreign_gpu: l.foreign_gpu,
    })
}

/// A number of seconds above 0 and at most [`MAX_SECONDS`] (NaN and infinity
/// are neither), or `default` when not given; an error points at the value.
fn seconds(
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
fn within<T: PartialOrd + Copy + fmt::Display>(
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

fn workloads(ctx: &Ctx, raw: &RawPlan) -> Result<Vec<Workload>, PlanError> {
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

type Combo = IndexMap<String, String>;

/// The workloads a phase runs: its own list, or all of them.
fn phase_workloads<'w>(
    ctx: &Ctx,
    phase: &schema::RawPhase,
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

/// Configs a phase's matrix and includes name at most (before duplicates and
/// excludes are taken out), counted without building them.
fn combos_bound(phase: &schema::RawPhase) -> u128 {
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
/// with the span that produced it.
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

/// Kept combos and the combos `exclude` took out, each with its span (for an
/// excluded one, the span of the `exclude` entry).
type Combos = Vec<(Combo, Range<usize>)>;

fn combos(ctx: &Ctx, phase: &schema::RawPhase) -> Result<(Combos, Combos), PlanError> {
    let mut out: Combos = Vec::new();
    let mut excluded: Combos = Vec::new();
    let mut seen: HashSet<Vec<(String, String)>> = HashSet::new();
    let mut add = |axes: &Axes,
                   span: Range<usize>,
                   out: &mut Vec<(Combo, Range<usize>)>|
     -> Result<(), PlanError> {
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
    };
    if !phase.matrix.is_empty() || phase.include.is_empty() {
        // A phase without axes is one config.
        add(&phase.matrix, phase.id.span(), &mut out)?;
    }
    for inc in &phase.include {
        if inc.get_ref().is_empty() {
            return Err(ctx.err(inc.span(), "empty include entry"));
        }
        add(inc.get_ref(), inc.span(), &mut out)?;
    }
    let known: HashSet<&str> = phase
        .matrix
        .keys()
        .chain(phase.include.iter().flat_map(|i| i.get_ref().keys()))
        .map(|k| k.as_str())
        .collect();
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
    // A `set` rule whose `when` names no axis of the phase would never apply.
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
    Ok((out, excluded))
}

fn valid_axis(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Whether a combo matches a filter (every named axis has one of the listed values).
fn matches(filter: &Axes, combo: &Combo) -> bool {
    filter.iter().all(|(axis, values)| {
        combo
            .get(axis)
            .is_some_and(|v| values.get_ref().0.iter().any(|w| w == v))
    })
}

fn build_config(
    ctx: &Ctx,
    raw: &RawPlan,
    phase: &schema::RawPhase,
    combo: &Combo,
    span: Range<usize>,
    id_template: Option<&Spanned<String>>,
    port: Port,
) -> Result<Config, PlanError> {
    let pid = phase.id.get_ref();
    // Variables: plan vars, then phase vars, then `set` rules matching this combo.
    let mut vars: IndexMap<String, (String, Range<usize>)> = IndexMap::new();
    for (k, v) in raw.vars.iter().chain(phase.vars.iter()) {
        vars.insert(k.clone(), (v.get_ref().clone(), v.span()));
    }
    for rule in &phase.set {
        if matches(rule.when.get_ref(), combo) {
            for (k, v) in &rule.vars {
                vars.insert(k.clone(), (v.get_ref().clone(), v.span()));
            }
        }
    }

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
    let id = if id.is_empty() { pid.clone() } else { id };
    if !valid_id(&id) {
        return Err(ctx.err(
            id_template.map(|t| t.span()).unwrap_or(span),
            format!("config id `{id}` may use only letters, digits, '-', '_' or '.'"),
        ));
    }

    // Resolve a template against builtins, axes and (recursively) vars.
    let resolve = |text: &str, at: Range<usize>| -> Result<String, PlanError> {
        fn go(
            text: &str,
            depth: usize,
            combo: &Combo,
            vars: &IndexMap<String, (String, Range<usize>)>,
            id: &str,
            pid: &str,
            picked_gpus: bool,
        ) -> Result<String, String> {
            if depth > 8 {
                return Err("(variables refer to each other in a loop)".into());
            }
            let out = template::fill(text, &|name| {
                if template::RUNTIME.contains(&name) {
                    return Some(format!("{{{name}}}"));
                }
                // `{gpus}` is the plan's own when it defines one, else (with
                // `server.gpus`) the GPUs given at launch.
                if name == "gpus"
                    && picked_gpus
                    && combo.get(name).is_none()
                    && !vars.contains_key(name)
                {
                    return Some("{gpus}".to_string());
                }
                match name {
                    "config" => return Some(id.to_string()),
                    "phase" => return Some(pid.to_string()),
                    _ => {}
                }
                if let Some(v) = combo.get(name) {
                    return Some(v.clone());
                }
                if let Some((v, _)) = vars.get(name) {
                    return Some(v.clone());
                }
                None
            })
            .map_err(|e| e.to_string())?;
            if out != text && out.contains('{') {
                // Vars may contain placeholders themselves.
                return go(&out, depth + 1, combo, vars, id, pid, picked_gpus);
            }
            Ok(out)
        }
        go(text, 0, combo, &vars, &id, pid, raw.server.gpus.is_some()).map_err(|name| {
            if name.starts_with('{') {
                return ctx.err(
                    at.clone(),
                    format!("unclosed `{{` in `{name}`: close it with `}}`, or write `{{{{` for a literal brace"),
                );
            }
            let axes: Vec<String> = combo.iter().map(|(k, v)| format!("{k}={v}")).collect();
            ctx.err(
                at,
                format!(
                    "unresolved placeholder `{{{name}}}` for config `{id}` ({}); define it in [vars], a matrix axis, or a `set` rule",
                    if axes.is_empty() { "no axes".to_string() } else { axes.join(", ") }
                ),
            )
        })
    };

    let cmd_span = raw.server.command.span();
    let mut argv = Vec::new();
    let words = template::split_words(raw.server.command.get_ref())
        .map_err(|e| ctx.err(cmd_span.clone(), e.to_string()))?;
    if raw.server.shell {
        // The shell reads the command as written (its quotes, pipes and `;`),
        // with the placeholders filled in: one word, run by `sh -c`.
        let filled = resolve(raw.server.command.get_ref(), cmd_span.clone())?;
        if !filled.trim().is_empty() {
            argv.push(filled);
        }
    } else {
        for w in &words {
            let filled = resolve(w, cmd_span.clone())?;
            // A word that was only a placeholder and came out empty is dropped, so an
            // optional `{extra_args}` can be empty. A filled value with spaces is
            // split into words as well, so `{spec_args}` can carry several flags.
            if w.trim().starts_with('{')
                && w.trim().ends_with('}')
                && template::placeholders(w).len() == 1
            {
                let parts = template::split_words(&filled)
                    .map_err(|e| ctx.err(cmd_span.clone(), e.to_string()))?;
                argv.extend(parts);
            } else {
                argv.push(filled);
            }
        }
    }
    if argv.is_empty() {
        return Err(ctx.err(
            cmd_span,
            format!("server.command is empty for config `{id}`"),
        ));
    }
    let mut env = IndexMap::new();
    for (k, v) in &raw.server.env {
        env.insert(k.clone(), resolve(v.get_ref(), v.span())?);
    }
    let preset = raw.server.kind.preset();
    for (k, v) in preset.env {
        if !env.contains_key(*k) {
            env.insert(k.to_string(), v.to_string());
        }
    }
    let mut requires = Vec::new();
    for r in &raw.server.requires {
        requires.push(resolve(r.get_ref(), r.span())?);
    }
    // An empty value (a variable set to "") means none.
    let tokenizer = match &raw.server.tokenizer {
        Some(t) => Some(resolve(t.get_ref(), t.span())?).filter(|p| !p.is_empty()),
        None => None,
    };
    let (gpus, gpu_count) = match &raw.server.gpus {
        Some(g) => {
            let text = resolve(g.get_ref(), g.span())?;
            let text = text.trim();
            let wanted = if let Some(n) = text.strip_prefix("auto:") {
                match n.trim().parse::<u32>() {
                    Ok(n) if (1..=64).contains(&n) => (None, Some(n)),
                    _ => {
                        return Err(ctx.err(
                            g.span(),
                            format!("server.gpus `{text}` for config `{id}`: after `auto:` a count of GPUs from 1 to 64"),
                        ))
                    }
                }
            } else {
                match parse_visible_devices(text) {
                    Some(list) => (Some(list), None),
                    None => {
                        return Err(ctx.err(
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
                    return Err(ctx.err(
                        g.span(),
                        format!("config `{id}` sets both server.gpus and CUDA_VISIBLE_DEVICES = \"{v}\": keep one (the variable is set from server.gpus)"),
                    ))
                }
            }
            wanted
        }
        None => (
            env.get("CUDA_VISIBLE_DEVICES")
                .and_then(|v| parse_visible_devices(v)),
            None,
        ),
    };
    Ok(Config {
        id,
        phase: pid.clone(),
        axes: combo.clone(),
        argv,
        shell: raw.server.shell,
        env,
        requires,
        host: raw.server.host.clone(),
        port,
        ready: Ready {
            path: raw.server.ready.path.clone(),
            log_line: raw
                .server
                .ready
                .log_line
                .clone()
                .or(preset.ready_log_line.map(str::to_string)),
            timeout_s: *raw.server.ready.timeout_s.get_ref(),
            generate: raw.server.ready.generate,
        },
        stop_grace_s: *raw.server.stop_grace_s.get_ref(),
        kind: raw.server.kind,
        api: raw.server.api,
        model: raw.server.model.clone(),
        retries: raw.server.retries.as_ref().map_or(0, |r| *r.get_ref()),
        tokenizer,
        baseline: false,
        gpus,
        gpu_count,
    })
}

#[cfg(test)]
mod tests;
