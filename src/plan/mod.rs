//! The plan file: schema, validation with `file:line:col` errors, and expansion into
//! configs and cells with stable ids. Reads the plan file and nothing else.
//!
//! This file holds what a plan is (its types, limits and `Plan`'s methods);
//! the work is in one file per step: `schema` (the file as written),
//! `located` (errors that name `file:line:col`), `limits` and `workloads`
//! (their tables checked), `combos` (a phase's matrix), `config` and
//! `resolve` (one config built and its templates filled), `expand` (the whole
//! plan into configs × cells) and `describe` (what `sweeptop check` prints);
//! beside them `template` (placeholders and shell words), `presets` (what a
//! server kind fills in) and `shard` (a plan split across machines).

mod combos;
mod config;
mod describe;
mod devices;
mod expand;
#[cfg(test)]
mod fuzz;
mod limits;
mod located;
pub mod prepare;
pub mod presets;
mod prompts;
mod resolve;
mod schema;
pub mod shard;
pub mod template;
mod workloads;

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde::Serialize;

pub use describe::{describe, missing_path_hint, missing_requires};
pub use devices::parse_visible_devices;
pub use prepare::{Expect, Step};
pub use presets::{Preset, ServerKind};
pub use prompts::{builtin_prompt, BUILTIN_PROMPTS};
pub use schema::{Api, Cache, ForeignGpu, Overflow, ShortRequests};
pub use shard::{Shard, ShardError};

use crate::model::FailureKind;
use located::Ctx;
use schema::RawPlan;

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
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}: {message}", place(*.line, *.col))]
pub struct PlanError {
    pub file: String,
    /// 0 when the error is not about a place in the file (it could not be read).
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// `:line:col`, or nothing for an error about the whole file.
fn place(line: usize, col: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}:{col}")
    }
}

/// How far the client's mean TTFT may be from the server's own before a cell
/// is flagged `clock_gap`, unless the plan says otherwise.
pub const DEFAULT_MAX_TTFT_GAP_MS: f64 = 25.0;
/// The % of a cold cell's prompt tokens that may be found cached before it is
/// flagged `cache_hit`, unless the plan says otherwise.
pub const DEFAULT_MAX_COLD_CACHE_HIT_PCT: f64 = 10.0;
/// The most repetitions of a cell may spread (% of the median) before it is
/// flagged `noisy`, unless the plan says otherwise.
pub const DEFAULT_MAX_SPREAD_PCT: f64 = 5.0;

/// A config's server log is cut beyond this many MiB unless the plan says.
pub const DEFAULT_LOG_MAX_MB: u64 = 512;

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
    /// A config's server log is cut beyond this many MiB (0: never).
    pub log_max_mb: u64,
}

impl Limits {
    /// [`Limits::log_max_mb`] in bytes (0: never cut).
    pub fn log_max_bytes(&self) -> u64 {
        self.log_max_mb.saturating_mul(1 << 20)
    }
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
    /// The prepare steps (keys) that must be done before it launches.
    pub prepare: Vec<String>,
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
    /// The prepare steps, each once (configs name theirs by key).
    pub prepare: Vec<Step>,
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
            ctx.err(
                span.clone(),
                located::toml_message(source, span, e.message()),
            )
        })?;
        let mut plan = expand::expand(&ctx, raw)?;
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

    pub fn step(&self, key: &str) -> Option<&Step> {
        self.prepare.iter().find(|s| s.key == key)
    }

    pub fn cells_of<'a>(&'a self, config: &'a str) -> impl Iterator<Item = &'a Cell> + 'a {
        self.cells.iter().filter(move |c| c.config == config)
    }
}

#[cfg(test)]
mod tests;
