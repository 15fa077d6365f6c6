//! The plan file as written (serde types). Spans are kept on everything a validation
//! error may need to point at, so every error names `file:line:col`.

use indexmap::IndexMap;
use serde::Deserialize;
use toml::Spanned;

pub type Axes = IndexMap<String, Spanned<AxisValues>>;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPlan {
    pub name: Spanned<String>,
    #[serde(default)]
    pub description: Option<String>,
    /// Free variables usable as `{name}` in templates; may refer to axes.
    #[serde(default)]
    pub vars: IndexMap<String, Spanned<String>>,
    pub server: RawServer,
    #[serde(default)]
    pub limits: RawLimits,
    pub workloads: Spanned<Vec<RawWorkload>>,
    pub phases: Spanned<Vec<RawPhase>>,
    /// Template for config ids, e.g. `tp{tp}-{method}-b{budget}`: `-`-separated
    /// segments whose placeholders are not set for a config are dropped.
    #[serde(default)]
    pub config_id: Option<Spanned<String>>,
    /// Extra log patterns: regex → failure kind.
    #[serde(default)]
    pub patterns: Vec<RawPattern>,
    /// Run the configs of each phase side by side whenever their GPUs do not
    /// overlap (a phase's own `pack` overrides it).
    #[serde(default)]
    pub pack: bool,
    /// Steps that put in place what configs need (a model copied into
    /// `/dev/shm` after a reboot), run before the first config needing them.
    #[serde(default)]
    pub prepare: Vec<RawStep>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStep {
    pub id: Spanned<String>,
    /// Split into words like `server.command` (or run by `sh -c` with `shell`).
    pub command: Spanned<String>,
    #[serde(default)]
    pub shell: bool,
    /// What proves the step done: paths that exist (and verify) afterwards.
    pub creates: Spanned<Vec<Spanned<String>>>,
    /// The size `creates` has when whole (bytes).
    #[serde(default)]
    pub expect_bytes: Option<Spanned<u64>>,
    /// Where that size is read when the step runs: a source directory (its
    /// files summed) or `hf:ORG/NAME` (the local Hugging Face snapshot).
    #[serde(default)]
    pub expect_from: Option<Spanned<String>>,
    #[serde(default)]
    pub verify: Option<RawVerify>,
    #[serde(default)]
    pub timeout_s: Option<Spanned<f64>>,
    #[serde(default)]
    pub env: IndexMap<String, Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawVerify {
    /// File (relative to the first `creates` path, or absolute) → SHA-256 in hex.
    #[serde(default)]
    pub sha256: IndexMap<String, Spanned<String>>,
    /// The `config.json` of a `creates` directory must hash as this run
    /// recorded it when its servers loaded it before (a resume).
    #[serde(default)]
    pub recorded: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPattern {
    pub regex: Spanned<String>,
    pub kind: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    /// Which server this is (`vllm`, `sglang`, `llamacpp`, `tgi`, or
    /// `openai` for any other): fills its readiness line, the environment
    /// sweeptop needs, and where its version, context and cache flush are.
    #[serde(default)]
    pub kind: super::presets::ServerKind,
    /// Command template, split into argv like a shell would (quotes respected),
    /// then each word filled; run through `sh -c` only when `shell = true`.
    pub command: Spanned<String>,
    #[serde(default)]
    pub shell: bool,
    #[serde(default)]
    pub env: IndexMap<String, Spanned<String>>,
    #[serde(default = "default_host")]
    pub host: String,
    /// A port number, or "auto" for a free port per launch.
    pub port: Spanned<toml::Value>,
    #[serde(default)]
    pub ready: RawReady,
    #[serde(default = "default_grace")]
    pub stop_grace_s: Spanned<f64>,
    /// Paths that must exist before a config launches (templates).
    #[serde(default)]
    pub requires: Vec<Spanned<String>>,
    /// `completions` or `chat`.
    #[serde(default)]
    pub api: Api,
    /// The `model` field of requests; default: the first model the server lists.
    #[serde(default)]
    pub model: Option<String>,
    /// A local `tokenizer.json` to measure prompts with when the server has no
    /// `/tokenize` endpoint (template).
    #[serde(default)]
    pub tokenizer: Option<Spanned<String>>,
    /// Times a config whose server crashed is relaunched before its cells are marked.
    #[serde(default)]
    pub retries: Option<Spanned<u32>>,
    /// The GPUs a config runs on (template): a list (`"0,1"`), or a count
    /// (`"auto:{tp}"`) of free GPUs picked at launch, given to the server as
    /// `CUDA_VISIBLE_DEVICES` and `{gpus}`.
    #[serde(default)]
    pub gpus: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    #[default]
    Completions,
    Chat,
}

fn default_host() -> String {
    "127.0.0.1".into()
}
fn default_grace() -> Spanned<f64> {
    Spanned::new(0..0, 15.0)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawReady {
    #[serde(default = "default_health")]
    pub path: String,
    #[serde(default)]
    pub log_line: Option<String>,
    #[serde(default = "default_ready_timeout")]
    pub timeout_s: Spanned<f64>,
    /// Also require one tiny generation to succeed before the server counts as ready.
    #[serde(default)]
    pub generate: bool,
}

impl Default for RawReady {
    fn default() -> Self {
        RawReady {
            path: default_health(),
            log_line: None,
            timeout_s: default_ready_timeout(),
            generate: false,
        }
    }
}

fn default_health() -> String {
    "/health".into()
}
fn default_ready_timeout() -> Spanned<f64> {
    Spanned::new(0..0, 900.0)
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Context limit in tokens, or "server" to ask the server.
    #[serde(default)]
    pub context: Option<Spanned<toml::Value>>,
    #[serde(default)]
    pub context_margin: Option<Spanned<u64>>,
    #[serde(default)]
    pub request_timeout_s: Option<Spanned<f64>>,
    #[serde(default)]
    pub stall_timeout_s: Option<Spanned<f64>>,
    #[serde(default)]
    pub cell_timeout_s: Option<Spanned<f64>>,
    /// Fraction of failed requests a cell tolerates (default 0).
    #[serde(default)]
    pub max_error_rate: Option<Spanned<f64>>,
    /// Requests that returned fewer tokens than asked (vLLM silently lowers
    /// max_tokens near the context limit): "flag" the ok cell (default: a
    /// `short_output` warning shown wherever its values are), "fail" it, or
    /// "ignore" them (only the `short_requests` count says so).
    #[serde(default)]
    pub short_requests: ShortRequests,
    /// The most the client's mean TTFT may differ from the server's own (its
    /// histogram) before the cell is flagged `clock_gap` (default 25 ms).
    #[serde(default)]
    pub max_ttft_gap_ms: Option<Spanned<f64>>,
    /// The most prompt tokens a cold cell may find in the prefix cache, in %,
    /// before it is flagged `cache_hit` (default 10: a chat template's fixed
    /// system prompt may be cached).
    #[serde(default)]
    pub max_cold_cache_hit_pct: Option<Spanned<f64>>,
    /// The most a cell's repetitions (`repeats`) may spread, (max − min) /
    /// median of output tok/s in %, before it is flagged `noisy` (default 5).
    #[serde(default)]
    pub max_spread_pct: Option<Spanned<f64>>,
    /// Other processes holding memory on a config's GPUs before launch: "fail"
    /// the config (default) or "warn" and launch anyway.
    #[serde(default)]
    pub foreign_gpu: ForeignGpu,
    /// A config's server log is cut beyond this many MiB, keeping its head
    /// and its newest lines (default 512; 0: never cut).
    #[serde(default)]
    pub log_max_mb: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ForeignGpu {
    #[default]
    Fail,
    Warn,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShortRequests {
    #[default]
    Flag,
    Fail,
    /// The explicit opt-out (`"count"`, the old default, reads as this).
    #[serde(alias = "count")]
    Ignore,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawWorkload {
    pub id: Spanned<String>,
    /// `builtin:NAME`, `file:PATH` (text) or `jsonl:PATH`.
    #[serde(default = "default_prompt")]
    pub prompt: Spanned<String>,
    pub contexts: Spanned<Vec<u64>>,
    pub concurrency: Spanned<Vec<u32>>,
    #[serde(default = "default_requests")]
    pub requests: Spanned<u32>,
    #[serde(default = "default_max_tokens")]
    pub max_tokens: Spanned<u32>,
    #[serde(default)]
    pub warmup: Option<Spanned<u32>>,
    /// Measure each cell this many times (default 1): every repetition is
    /// recorded, the cell stands for the median, its spread says the noise.
    #[serde(default)]
    pub repeats: Option<Spanned<u32>>,
    /// Open loop: Poisson arrivals at this many requests/s (concurrency caps
    /// the requests in flight). Without it: closed loop at each concurrency.
    #[serde(default)]
    pub rate: Option<Spanned<f64>>,
    /// Stop a cell after this many seconds even if requests remain.
    #[serde(default)]
    pub duration_s: Option<Spanned<f64>>,
    /// What to do with a prompt that would not fit: clamp (default), fail, send.
    #[serde(default)]
    pub overflow: Overflow,
    /// The prefix cache the cell's prompts meet: "cold" (default: each
    /// prompt starts with its own prefix, the cache is flushed before the
    /// cell where the server allows it, and a cell that hits it anyway is
    /// flagged) or "warm" (the prompts share their text and end with their
    /// own suffix: a shared-prefix workload, nothing flushed or flagged).
    #[serde(default)]
    pub cache: Cache,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cache {
    #[default]
    Cold,
    Warm,
}

fn default_prompt() -> Spanned<String> {
    Spanned::new(0..0, "builtin:code".into())
}
fn default_requests() -> Spanned<u32> {
    Spanned::new(0..0, 8)
}
fn default_max_tokens() -> Spanned<u32> {
    Spanned::new(0..0, 256)
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Overflow {
    #[default]
    Clamp,
    Fail,
    Send,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPhase {
    pub id: Spanned<String>,
    #[serde(default)]
    pub matrix: Axes,
    #[serde(default)]
    pub include: Vec<Spanned<Axes>>,
    #[serde(default)]
    pub exclude: Vec<Spanned<Axes>>,
    #[serde(default)]
    pub set: Vec<RawSet>,
    #[serde(default)]
    pub vars: IndexMap<String, Spanned<String>>,
    /// Workload ids this phase runs (default: all).
    #[serde(default)]
    pub workloads: Option<Vec<Spanned<String>>>,
    /// Which config is the phase's baseline for speedups: axis → value(s).
    #[serde(default)]
    pub baseline: Option<Spanned<Axes>>,
    #[serde(default)]
    pub config_id: Option<Spanned<String>>,
    /// Run this phase's configs side by side on GPUs they do not share
    /// (default: the plan's `pack`).
    #[serde(default)]
    pub pack: Option<bool>,
    /// Prepare steps (ids) every config of this phase needs.
    #[serde(default)]
    pub prepare: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSet {
    pub when: Spanned<Axes>,
    pub vars: IndexMap<String, Spanned<String>>,
}

/// One or several values of an axis (a scalar is a one-element list).
#[derive(Debug, Clone)]
pub struct AxisValues(pub Vec<String>);

impl<'de> Deserialize<'de> for AxisValues {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = toml::Value::deserialize(d)?;
        let scalar = |v: &toml::Value| -> Result<String, D::Error> {
            match v {
                toml::Value::String(s) => Ok(s.clone()),
                toml::Value::Integer(i) => Ok(i.to_string()),
                toml::Value::Float(f) => Ok(f.to_string()),
                toml::Value::Boolean(b) => Ok(b.to_string()),
                other => Err(serde::de::Error::custom(format!(
                    "axis values must be strings, numbers or booleans, found {}",
                    other.type_str()
                ))),
            }
        };
        match &v {
            toml::Value::Array(items) => Ok(AxisValues(
                items.iter().map(scalar).collect::<Result<_, _>>()?,
            )),
            other => Ok(AxisValues(vec![scalar(other)?])),
        }
    }
}
