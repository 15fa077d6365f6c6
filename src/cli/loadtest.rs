//! `sweeptop loadtest URL`: one cell against a server that is already running,
//! measured as a sweep measures its cells, with the same metric names.

use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use super::{user, Context, Result};
use crate::load::{self, Arrival, CellLoad, Target};
use crate::model::text::display;
use crate::model::RequestRecord;
use crate::plan::Api;
use crate::view::text::metric_lines;

#[derive(clap::Args, Debug, Clone)]
pub struct LoadtestArgs {
    /// Base URL of the server, e.g. http://127.0.0.1:30000
    pub url: String,
    /// The `model` field (default: the first model the server lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Requests in flight (closed loop), or the cap with --rate; 1 to 65536.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub concurrency: u32,
    /// Open loop: Poisson arrivals at this many requests/s (above 0, at most
    /// 1000000).
    #[arg(long, value_parser = rate)]
    pub rate: Option<f64>,
    /// Measured requests, 1 to 10000000.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub requests: u32,
    /// Stop after this many seconds even if requests remain.
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub duration: Option<f64>,
    /// Tokens asked of each request, 1 to 1048576.
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=1_048_576))]
    pub max_tokens: u32,
    /// Prompt length in tokens (measured with the server's /tokenize), 1 to
    /// 10000000.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub prompt_tokens: u64,
    /// Requests sent first and not measured, 0 to 1000000.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    pub warmup: u32,
    /// A tokenizer.json to measure the prompt with if the server has no /tokenize.
    #[arg(long, value_name = "PATH")]
    pub tokenizer: Option<PathBuf>,
    /// Use /v1/chat/completions instead of /v1/completions.
    #[arg(long)]
    pub chat: bool,
    /// The metrics, prompt lengths, notices and warnings as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Also write every request's raw timeline here (JSON lines, gzipped to
    /// PATH.gz when over 1 MiB), as a sweep does under `requests/`.
    #[arg(long, value_name = "PATH")]
    pub records: Option<PathBuf>,
    /// Seconds one request may take (above 0).
    #[arg(long, default_value_t = 600.0, value_parser = seconds)]
    pub request_timeout: f64,
}

/// A number above 0.
fn positive(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(x),
        _ => Err(format!("`{s}` is not a number above 0")),
    }
}

/// Requests per second: above 0 and at most a million.
fn rate(s: &str) -> std::result::Result<f64, String> {
    positive(s)
        .ok()
        .filter(|x| *x <= 1e6)
        .ok_or_else(|| format!("`{s}` is not a rate above 0 and at most 1000000 requests/s"))
}

/// Seconds: above 0 and at most the longest time a plan may name.
fn seconds(s: &str) -> std::result::Result<f64, String> {
    let max = crate::plan::MAX_SECONDS;
    positive(s)
        .ok()
        .filter(|x| *x <= max)
        .ok_or_else(|| format!("`{s}` is not a number of seconds above 0 and at most {max}"))
}

pub fn loadtest(args: LoadtestArgs) -> Result<u8> {
    let base = args.url.trim_end_matches('/').to_string();
    // A URL the client cannot use is refused before anything is sent.
    let pool = Arc::new(load::Pool::new(&base).map_err(|e| user(e.to_string()))?);
    let rt = super::runtime(2)?;
    rt.block_on(async move {
        let probe = load::http_client();
        let about = load::about(&probe, &base, crate::plan::ServerKind::Openai.preset()).await;
        let (listed, limit) = (about.model, about.context);
        let model = args
            .model
            .clone()
            .or(listed)
            .unwrap_or_else(|| "default".into());
        let target = Target {
            base,
            api: if args.chat {
                Api::Chat
            } else {
                Api::Completions
            },
            model,
        };
        let instruction = crate::plan::builtin_prompt("code").unwrap_or_default();
        let (measure, notice) =
            load::tokenizer::Measure::choose(&probe, &target, args.tokenizer.as_deref()).await;
        if let Some(n) = notice {
            eprintln!("warning: {n}");
        }
        let (tags, notice) = load::tags::Tags::calibrate(&measure).await;
        if let Some(n) = notice {
            eprintln!("warning: {n}");
        }
        let (body, measured, error) = measure.fit(instruction, args.prompt_tokens, &tags).await;
        if let Some(e) = error {
            eprintln!("warning: {e}; the prompt length is estimated");
        }
        let cell = CellLoad {
            arrival: match args.rate {
                Some(rate) => Arrival::Poisson { rate, capped: true },
                None => Arrival::Closed,
            },
            concurrency: args.concurrency.max(1),
            requests: args.requests,
            duration: args.duration.map(Duration::from_secs_f64),
            warmup: args.warmup,
            max_tokens: args.max_tokens,
            prompts: Arc::new(vec![body]),
            tags,
            request_timeout: Duration::from_secs_f64(args.request_timeout),
            stall_timeout: Duration::from_secs_f64(args.request_timeout),
        };
        let seq = AtomicU64::new(0);
        let mut writer = match &args.records {
            Some(p) => Some(
                crate::store::RequestsWriter::create(p.clone())
                    .map_err(|e| user(format!("--records: {e}")))?,
            ),
            None => None,
        };
        let mut sink = |r: &RequestRecord| {
            if let Some(w) = writer.as_mut() {
                w.write(r);
            }
        };
        let run = load::run_cell(&pool, &target, &cell, &seq, &mut sink, Some(&probe)).await;
        if let Some(w) = writer.take() {
            let p = w
                .finish()
                .context(|| "cannot finish the request records".into())?;
            eprintln!("request records: {}", p.display());
        }
        let mut metrics = run.stats.metrics(run.wall_ns);
        let mut notes = Vec::new();
        match run.server_figures() {
            Some(Ok(f)) => f.fill(&mut metrics),
            Some(Err(why)) => notes.push(why),
            None => notes.push("the server has no /metrics page: no server-side figures".into()),
        }
        let errors: Vec<String> = run
            .stats
            .errors
            .iter()
            .map(|e| crate::detect::request_failure(e).message)
            .take(5)
            .collect();
        // A plan's defaults: a lone cell is cold, with nothing to fail on.
        let checks = crate::detect::Checks {
            max_error_rate: 1.0,
            fail_short: false,
            context_limit: limit,
            max_ttft_gap_ms: crate::plan::DEFAULT_MAX_TTFT_GAP_MS,
            max_cold_cache_hit_pct: Some(crate::plan::DEFAULT_MAX_COLD_CACHE_HIT_PCT),
        };
        let warnings = crate::detect::warnings(&run, &metrics, &checks);
        if args.json {
            let mut v = serde_json::to_value(&metrics)?;
            v["prompt_tokens_target"] = args.prompt_tokens.into();
            v["prompt_tokens_measured"] = measured.into();
            v["context_limit"] = limit.into();
            v["errors"] = errors.into();
            v["ttft_gap_ms"] = metrics.ttft_gap_ms().into();
            v["warnings"] = serde_json::to_value(&warnings)?;
            v["notes"] = notes.clone().into();
            super::print(&format!("{}\n", crate::model::text::to_json_pretty(&v)?))?;
        } else {
            let mut text = format!(
                "{}{} model {}\nprompt target {} tokens, measured {measured}\n",
                target.url(),
                if args.chat { " (chat)" } else { "" },
                target.model,
                args.prompt_tokens
            );
            // What a lone cell cannot measure (GPU figures, acceptance
            // length without speculative decoding) is left out.
            for (name, value) in metric_lines(&metrics, false) {
                text.push_str(&format!("{name:<20} {value}\n"));
            }
            if let Some(gap) = metrics.ttft_gap_ms() {
                text.push_str(&format!("{:<20} {gap:+.2} ms\n", "TTFT client-server"));
            }
            for w in &warnings {
                text.push_str(&format!("warning: {}\n", display(&w.message)));
            }
            for n in &notes {
                text.push_str(&format!("note: {}\n", display(n)));
            }
            for e in &errors {
                text.push_str(&format!("error: {}\n", display(&e.to_string())));
            }
            super::print(&text)?;
        }
        Ok(
            if metrics.failed_requests == 0 && metrics.output_tokens > 0 {
                0
            } else {
                1
            },
        )
    })
}
