//! `sweeptop loadtest URL`: one cell against a server that is already running,
//! measured by the same cell pipeline as a sweep's cells (a cold cell: the
//! prefix cache flushed first where the server allows), with the same metric
//! names and warnings.

use std::future::Future;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::{user, Context, Result};
use crate::engine::cell::{self, About, CellSpec, GpuFigures, Host, Judged, Measurement, Session};
use crate::load::{self, CellRun, Target};
use crate::model::text::display;
use crate::model::{Failure, Level};
use crate::plan::{
    Api, Cache, ContextLimit, ForeignGpu, Limits, Overflow, ServerKind, ShortRequests, Workload,
};
use crate::store::{RequestsWriter, StoreError, Written};
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
    /// Wait up to this many seconds for the server to be ready (its
    /// /v1/models answering 200) before measuring; without it a server that
    /// is not ready is an error at once.
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub wait_ready: Option<f64>,
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

/// The prompt a lone cell is made of.
const PROMPT: &str = "builtin:code";

/// What the flags ask of the one cell: a cold workload of the built-in
/// prompt, sent whatever the context (a lone cell fails on nothing but a
/// dead server or no tokens; its warnings are printed).
fn workload(args: &LoadtestArgs) -> Workload {
    Workload {
        id: "loadtest".into(),
        prompt: PROMPT.into(),
        contexts: vec![args.prompt_tokens],
        concurrency: vec![args.concurrency.max(1)],
        requests: args.requests,
        max_tokens: args.max_tokens,
        warmup: args.warmup,
        repeats: 1,
        rate: args.rate,
        duration_s: args.duration,
        overflow: Overflow::Send,
        cache: Cache::Cold,
        prompt_at: (0, 0),
    }
}

fn limits(args: &LoadtestArgs) -> Limits {
    Limits {
        context: ContextLimit::Server,
        context_margin: 0,
        request_timeout_s: args.request_timeout,
        stall_timeout_s: args.request_timeout,
        cell_timeout_s: crate::plan::MAX_SECONDS,
        max_error_rate: 1.0,
        short_requests: ShortRequests::Flag,
        max_ttft_gap_ms: crate::plan::DEFAULT_MAX_TTFT_GAP_MS,
        max_cold_cache_hit_pct: crate::plan::DEFAULT_MAX_COLD_CACHE_HIT_PCT,
        max_spread_pct: crate::plan::DEFAULT_MAX_SPREAD_PCT,
        foreign_gpu: ForeignGpu::Warn,
        log_max_mb: crate::plan::DEFAULT_LOG_MAX_MB,
    }
}

/// A lone cell's side of the pipeline: warnings as they come on stderr,
/// notes printed with the figures, the raw records to `--records`.
struct Lone {
    records: Option<RequestsWriter>,
    finished: Option<std::result::Result<Written, StoreError>>,
    notes: Vec<String>,
}

impl Host for Lone {
    type Stop = std::convert::Infallible;

    fn notice(&mut self, level: Level, _about: About, message: String) {
        match level {
            Level::Info => self.notes.push(message),
            _ => eprintln!("warning: {}", display(&message)),
        }
    }

    fn records(&mut self, _repetition: u32) -> Option<RequestsWriter> {
        self.records.take()
    }

    async fn records_done(&mut self, writer: RequestsWriter) {
        self.finished = Some(writer.finish(std::time::Duration::from_secs(60)).await);
    }

    async fn watch<F: Future<Output = CellRun>>(
        &mut self,
        requests: F,
    ) -> std::result::Result<CellRun, Self::Stop> {
        Ok(requests.await)
    }

    fn died(&mut self) -> Option<Failure> {
        None
    }

    fn logged_acceptance(&mut self) -> Vec<f64> {
        Vec::new()
    }

    fn measuring(&mut self) {}

    fn measured(&mut self, _windows: &[(u64, u64)]) -> Option<GpuFigures> {
        None
    }
}

pub fn loadtest(args: LoadtestArgs) -> Result<u8> {
    let base = args.url.trim_end_matches('/').to_string();
    // A URL the client cannot use is refused before anything is sent.
    load::Pool::new(&base).map_err(user)?;
    let rt = super::runtime(2)?;
    rt.block_on(async move {
        let probe = load::http_client();
        // A server that cannot be measured is the measurement's failure
        // (exit 1, as when every request fails), said in one line.
        if let Err(why) = wait_ready(&probe, &base, args.wait_ready).await {
            eprintln!("error: {}", display(&why.to_string()));
            return Ok(1);
        }
        let preset = ServerKind::Openai.preset();
        let about = load::about(&probe, &base, preset).await;
        for why in &about.refused {
            eprintln!("warning: {why}");
        }
        if let Some(note) = about.slots_note() {
            eprintln!("note: {note}");
        }
        let model = args
            .model
            .clone()
            .or(about.model.clone())
            .unwrap_or_else(|| "default".into());
        let target = Target {
            cache_prompt: None,
            base,
            api: if args.chat {
                Api::Chat
            } else {
                Api::Completions
            },
            model,
        };
        let mut session = Session::new(
            target.clone(),
            about.context,
            probe,
            Arc::new(AtomicU64::new(0)),
            preset.flush,
            args.tokenizer.clone(),
        )
        .knowing(&about)
        .tokenizer_named_by("--tokenizer");
        let records = match &args.records {
            Some(p) => Some(
                RequestsWriter::create(p.clone()).map_err(|e| user(format!("--records: {e}")))?,
            ),
            None => None,
        };
        let mut lone = Lone {
            records,
            finished: None,
            notes: Vec::new(),
        };
        let (workload, limits) = (workload(&args), limits(&args));
        let spec = CellSpec {
            context_tokens: args.prompt_tokens,
            concurrency: args.concurrency.max(1),
            workload: &workload,
            limits: &limits,
        };
        let (measurement, measured) = match cell::run(&mut lone, &mut session, &spec).await {
            Judged::Ok {
                best,
                prompt_tokens,
                ..
            } => (best, prompt_tokens),
            Judged::Failed {
                measurement,
                prompt_tokens,
                ..
            } => (measurement, prompt_tokens),
            Judged::NotRun(f) => return Err(user(f.message)),
            Judged::Stopped(never) => match never {},
        };
        if let Some(done) = lone.finished.take() {
            let w = done.context(|| "cannot finish the request records".into())?;
            if w.left_out > 0 {
                eprintln!(
                    "warning: {} request record(s) left out: the disk did not keep up",
                    w.left_out
                );
            }
            eprintln!("request records: {}", w.path.display());
        }
        report(
            &args,
            &target,
            about.context,
            measured,
            &measurement,
            &lone.notes,
        )
    })
}

/// A server that was not ready in time: what it answered, and what to do.
#[derive(Debug, thiserror::Error)]
#[error("{base} {why}; {hint}")]
struct NotReady {
    base: String,
    why: String,
    hint: String,
}

/// How often a server that is not ready is asked again.
const READY_POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// Whether the server is ready: its `/v1/models` answering 200. Not ready
/// is one error line (what it answered, or why it could not be reached)
/// after `wait` seconds (none: at once), never a table of zeros.
async fn wait_ready(
    client: &reqwest::Client,
    base: &str,
    wait: Option<f64>,
) -> std::result::Result<(), NotReady> {
    use std::time::{Duration, Instant};
    let start = Instant::now();
    let limit = Duration::from_secs_f64(wait.unwrap_or(0.0));
    let url = format!("{base}/v1/models");
    let mut said_waiting = false;
    loop {
        let why = match tokio::time::timeout(Duration::from_secs(5), client.get(&url).send()).await
        {
            Ok(Ok(r)) if r.status().is_success() => {
                if said_waiting {
                    eprintln!("ready after {:.1} s", start.elapsed().as_secs_f64());
                }
                return Ok(());
            }
            Ok(Ok(mut r)) => {
                let status = r.status();
                // The first piece of the body says why (`Loading model`).
                let first = tokio::time::timeout(Duration::from_secs(2), r.chunk()).await;
                let body = match first {
                    Ok(Ok(Some(b))) => String::from_utf8_lossy(&b).into_owned(),
                    _ => String::new(),
                };
                let said: String = display(body.trim()).chars().take(200).collect();
                let said = if said.is_empty() {
                    String::new()
                } else {
                    format!(" ({said})")
                };
                format!("is not ready: /v1/models answered {status}{said}")
            }
            Ok(Err(e)) => format!("cannot be reached: {}", root_cause(&e)),
            Err(_) => "did not answer /v1/models within 5 s".to_string(),
        };
        if start.elapsed() >= limit {
            let hint = match wait {
                Some(w) => format!("waited {w} s"),
                None => "start it, or wait for it with --wait-ready SECONDS".into(),
            };
            return Err(NotReady {
                base: base.to_string(),
                why,
                hint,
            });
        }
        if !said_waiting {
            eprintln!(
                "waiting up to {:.0} s for {base} to be ready ({why})",
                limit.as_secs_f64()
            );
            said_waiting = true;
        }
        tokio::time::sleep(READY_POLL).await;
    }
}

/// The innermost of an error's causes (`Connection refused (os error
/// 111)`), which says more than reqwest's own `error sending request`.
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Print the cell's figures (JSON with `--json`); exit 1 when a request
/// failed or no token came.
fn report(
    args: &LoadtestArgs,
    target: &Target,
    limit: Option<u64>,
    measured: u64,
    measurement: &Measurement,
    notes: &[String],
) -> Result<u8> {
    let Measurement {
        metrics, warnings, ..
    } = measurement;
    // Each distinct error once, with how many requests it ended.
    let mut errors: Vec<(String, usize)> = Vec::new();
    for e in &measurement.run.stats.errors {
        let message = crate::detect::request_failure(e).message;
        match errors.iter_mut().find(|(m, _)| *m == message) {
            Some((_, n)) => *n += 1,
            None => errors.push((message, 1)),
        }
    }
    errors.truncate(5);
    let error_lines: Vec<String> = errors
        .iter()
        .map(|(m, n)| match n {
            1 => m.clone(),
            n => format!("{m} (×{n})"),
        })
        .collect();
    let none_answered = metrics.requests > 0 && metrics.failed_requests >= metrics.requests;
    if args.json {
        let mut v = serde_json::to_value(metrics)?;
        v["prompt_tokens_target"] = args.prompt_tokens.into();
        v["prompt_tokens_measured"] = measured.into();
        v["context_limit"] = limit.into();
        v["errors"] = error_lines.clone().into();
        v["ttft_gap_ms"] = metrics.ttft_gap_ms().into();
        v["warnings"] = serde_json::to_value(warnings)?;
        v["notes"] = notes.to_vec().into();
        v["timing_clock"] = serde_json::to_value(crate::model::Clock::in_use())?;
        super::print(&format!("{}\n", crate::model::text::to_json_pretty(&v)?))?;
    } else {
        let clock = match crate::model::Clock::in_use() {
            crate::model::Clock::Wire => "chunks timed on the kernel's receive clock",
            crate::model::Clock::Read => "chunks timed when read",
        };
        let mut text = format!(
            "{}{} model {}\nprompt target {} tokens, measured {measured}; {clock}\n",
            target.url(),
            if args.chat { " (chat)" } else { "" },
            target.model,
            args.prompt_tokens
        );
        // What a lone cell cannot measure (GPU figures, acceptance
        // length without speculative decoding) is left out; the client −
        // server TTFT gap is one of the lines when the server gave its TTFT.
        // Without one answered request there is nothing to show but why.
        if !none_answered {
            for (name, value) in metric_lines(metrics, false) {
                text.push_str(&format!("{name:<20} {value}\n"));
            }
        }
        for w in warnings {
            text.push_str(&format!("warning: {}\n", display(&w.message)));
        }
        for n in notes {
            text.push_str(&format!("note: {}\n", display(n)));
        }
        for e in &error_lines {
            text.push_str(&format!("error: {}\n", display(e)));
        }
        if none_answered {
            text.push_str(&format!(
                "error: all {} requests failed: no figures\n",
                metrics.requests
            ));
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
}
