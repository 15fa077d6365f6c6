//! One cell, the same wherever it runs (a lane of a sweep, `sweeptop
//! loadtest`): prepare its prompts at the context target → warm up → measure
//! → read the server's own figures → validate ([`detect::validate`]) → its
//! outcome, each repetition a whole measurement and the median one kept.
//!
//! What differs between the two is behind [`Host`]: where notices and raw
//! request records go, what may cut a measurement short (the server's death,
//! a skip, the cell timeout), what the server's log says, the GPUs. A fix to
//! measuring made here lands in both.

mod host;
mod session;
mod spec;

use std::sync::Arc;

use crate::detect::{self, ServerHealth};
use crate::load::prom::ServerFigures;
use crate::load::{self, CellLoad, CellRun, Target};
use crate::model::{Failure, FailureKind, FailureSource, Level, Metrics, RequestRecord, Spread};
use crate::plan::ShortRequests;
pub(crate) use host::{About, GpuFigures, Host};
pub(crate) use session::Session;
pub(crate) use spec::CellSpec;

/// One repetition's measurement.
pub(crate) struct Measurement {
    pub metrics: Metrics,
    /// What its numbers must be read with, most important first.
    pub warnings: Vec<Failure>,
    pub run: CellRun,
}

/// How a cell ended.
pub(crate) enum Judged<S> {
    /// Every repetition measured and valid: the median one (GPU figures
    /// included), and, when repeated, every repetition and their spread.
    Ok {
        best: Measurement,
        repetitions: Vec<Metrics>,
        spread: Option<Spread>,
        prompt_tokens: u64,
    },
    /// Nothing sent: the cell cannot run as asked.
    NotRun(Failure),
    /// Measured, and not a measurement: why, and what was measured.
    Failed {
        failure: Failure,
        cause: Cause,
        measurement: Measurement,
        prompt_tokens: u64,
    },
    /// The host cut the measurement short.
    Stopped(S),
}

/// Why a measured cell failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The server died or logged a fatal error.
    ServerDied,
    /// Its requests stopped streaming.
    Stalled,
    /// Its requests failed, or returned nothing, or fell short.
    Invalid,
}

/// Run one cell on a ready server.
pub(crate) async fn run<H: Host>(
    host: &mut H,
    session: &mut Session,
    spec: &CellSpec<'_>,
) -> Judged<H::Stop> {
    let (prompts, prompt_tokens) = match session.prompts(host, spec).await {
        Ok(p) => p,
        Err(f) => return Judged::NotRun(f),
    };
    let load = spec.load(prompts, session.tags(spec.workload.cache));
    let pool = match load::Pool::new(&session.target.base) {
        Ok(p) => Arc::new(p),
        Err(e) => {
            return Judged::NotRun(Failure::new(
                FailureKind::ConnectionError,
                FailureSource::Client,
                e.to_string(),
            ))
        }
    };
    host.measuring();
    let repeats = spec.workload.repeats.max(1);
    // Each repetition is a whole measurement (from a cold cache when the
    // workload is cold); the first that fails fails the cell.
    let mut kept: Vec<Measurement> = Vec::new();
    for repetition in 0..repeats {
        match measure(host, session, spec, &pool, &load, repetition).await {
            Ok(Ok(m)) => kept.push(m),
            Ok(Err((failure, cause, measurement))) => {
                host.measured(&[measurement.run.window_ms()]);
                return Judged::Failed {
                    failure,
                    cause,
                    measurement,
                    prompt_tokens,
                };
            }
            Err(stop) => {
                host.measured(&[]);
                return Judged::Stopped(stop);
            }
        }
    }
    // The GPUs over the measured requests only, as output tok/s: not the
    // prompts' preparation, the warm-up or the cache flush.
    let windows: Vec<(u64, u64)> = kept.iter().map(|m| m.run.window_ms()).collect();
    let gpu = host.measured(&windows);
    let all: Vec<Metrics> = kept.iter().map(|m| m.metrics.clone()).collect();
    let mut best = kept.swap_remove(Spread::median_index(&all));
    if let Some((mem, util)) = gpu {
        (best.metrics.gpu_mem_peak_mib, best.metrics.gpu_util_mean) = (mem, util);
    }
    let (repetitions, spread) = if repeats > 1 {
        let spread = Spread::of(&all);
        let max = spec.limits.max_spread_pct;
        if let Some(s) = spread.filter(|s| s.spread_pct > max) {
            best.warnings.push(Failure::new(
                FailureKind::Noisy,
                FailureSource::Client,
                format!(
                    "{} repetitions spread {:.1} % (output tok/s {:.1} to {:.1}, median {:.1}); limits.max_spread_pct = {}",
                    s.n, s.spread_pct, s.min, s.max, s.median, max
                ),
            ));
        }
        (all, spread)
    } else {
        (Vec::new(), None)
    };
    Judged::Ok {
        best,
        repetitions,
        spread,
        prompt_tokens,
    }
}

/// A measurement the validator refused: why, and what it measured.
type Refused = (Failure, Cause, Measurement);

/// One repetition: warm-up and measured requests (their raw records to the
/// host), the server's own figures, and the verdict.
async fn measure<H: Host>(
    host: &mut H,
    session: &mut Session,
    spec: &CellSpec<'_>,
    pool: &Arc<load::Pool>,
    load: &CellLoad,
    repetition: u32,
) -> Result<Result<Measurement, Refused>, H::Stop> {
    if spec.cold() {
        session.flush_cache(host).await;
    }
    // Acceptance lengths logged before this repetition are not its own.
    host.logged_acceptance();
    let mut records = host.records(repetition);
    // The running requests borrow the sink: the block ends both before the
    // records are finished.
    let run = {
        let mut sink = |r: &RequestRecord| {
            if let Some(w) = records.as_mut() {
                w.write(r);
            }
        };
        let target = Target {
            cache_prompt: (spec.cold() && session.per_request_cache).then_some(false),
            ..session.target.clone()
        };
        let requests = load::run_cell(
            pool,
            &target,
            load,
            &session.seq,
            &mut sink,
            Some(&session.http),
        );
        host.watch(requests).await?
    };
    if let Some(w) = records.take() {
        host.records_done(w).await;
    }
    let lingered = pool.take_lingering(std::time::Duration::from_secs(1)).await;
    if lingered > 0 {
        host.notice(
            Level::Warn,
            About::Server,
            format!(
                "the server kept {lingered} stream(s) open after [DONE]: each request's time ends at [DONE] and the client closed them"
            ),
        );
    }
    let mut metrics = run.stats.metrics(run.wall_ns);
    let counted = session.figures(host, &run);
    if let Some(f) = &counted {
        f.fill(&mut metrics);
    }
    let logged = host.logged_acceptance();
    metrics.accept_len = acceptance_length(host, logged, &run, counted.as_ref());
    let health = ServerHealth { died: host.died() };
    let checks = spec.checks(
        session.context_limit,
        session.server_context,
        session.prompt_target(spec).ok(),
    );
    let measured = measured(&run, &metrics);
    match detect::validate(&measured, &health, &checks) {
        Ok(mut warnings) => {
            if spec.limits.short_requests == ShortRequests::Ignore {
                warnings.retain(|w| w.kind != FailureKind::ShortOutput);
            }
            Ok(Ok(Measurement {
                metrics,
                warnings,
                run,
            }))
        }
        Err(failure) => {
            let warnings = detect::warnings(&measured, &checks);
            let cause = if health.died.is_some() {
                Cause::ServerDied
            } else if run.stalled_for.is_some() {
                Cause::Stalled
            } else {
                Cause::Invalid
            };
            Ok(Err((
                failure,
                cause,
                Measurement {
                    metrics,
                    warnings,
                    run,
                },
            )))
        }
    }
}

/// What the validator is handed of a repetition: its metrics and what the
/// client saw go wrong (errors, short answers, a stall, a starved read,
/// usage that disagreed with the stream).
fn measured<'a>(run: &'a CellRun, metrics: &'a Metrics) -> detect::Measured<'a> {
    detect::Measured {
        metrics,
        errors: &run.stats.errors,
        short_examples: &run.stats.short_examples,
        stall: run.stalled_for.map(|idle| detect::Stall {
            idle,
            in_flight: run.in_flight,
        }),
        longest: run.stats.longest,
        starved: run
            .stats
            .starved_example
            .map(|(tokens, span_ns)| detect::Starved {
                requests: run.stats.starved,
                ok_requests: run.stats.ok(),
                tokens,
                span_ns,
            }),
        usage_mismatch: run.stats.usage_example.map(|(said, streamed, max_tokens)| {
            detect::UsageMismatch {
                requests: run.stats.usage_mismatch,
                said,
                streamed,
                max_tokens,
            }
        }),
    }
}

/// Speculative decoding's acceptance length over the measurement: from the
/// server's counters (vLLM: exact over the measured requests) when it exports
/// them, else the mean of its log lines during it, else its gauge (SGLang).
/// A value no decoder could measure is left out, with a notice.
fn acceptance_length(
    host: &mut impl Host,
    logged: Vec<f64>,
    run: &CellRun,
    counted: Option<&ServerFigures>,
) -> Option<f64> {
    use load::prom::{plausible_accept_len, MAX_ACCEPT_LEN};
    let (logged, impossible): (Vec<f64>, Vec<f64>) =
        logged.into_iter().partition(|v| plausible_accept_len(*v));
    let gauge = run
        .server
        .as_ref()
        .and_then(|r| load::prom::sglang_accept_gauge(&r.after));
    let impossible: Vec<String> = impossible
        .into_iter()
        .chain(gauge.filter(|g| !plausible_accept_len(*g)))
        .map(|v| v.to_string())
        .collect();
    if !impossible.is_empty() {
        host.notice(
            Level::Warn,
            About::Cell,
            format!(
                "the server reported impossible acceptance lengths ({}; 1 to {MAX_ACCEPT_LEN} can be): not counted",
                impossible.join(", ")
            ),
        );
    }
    let from_log = (!logged.is_empty()).then(|| logged.iter().sum::<f64>() / logged.len() as f64);
    counted
        .and_then(|f| f.accept_len)
        .or(from_log)
        .or(gauge.filter(|g| plausible_accept_len(*g)))
}
