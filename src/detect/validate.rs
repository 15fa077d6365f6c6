//! The one place that decides whether a cell is `ok`: only with real tokens from
//! a server that stayed alive, and requests that succeeded.

use std::time::Duration;

use super::{classify_http, classify_stream_error};
use crate::model::{
    thousands, ContextNumbers, Failure, FailureKind, FailureSource, Metrics, RequestError,
};

/// What the engine knows about the server during the cell.
pub struct ServerHealth {
    /// The server died (or logged a fatal error) during the cell.
    pub died: Option<Failure>,
}

/// What a cell's requests came to: its metrics, and what they leave out.
pub struct Measured<'a> {
    pub metrics: &'a Metrics,
    /// The failed requests' errors (the first few, and the first of each kind).
    pub errors: &'a [RequestError],
    /// Tokens returned by the first few short requests.
    pub short_examples: &'a [u64],
    /// Requests were in flight and no token arrived for a stall timeout.
    pub stall: Option<Stall>,
    /// Requests whose `usage` disagreed with their stream.
    pub usage_mismatch: Option<UsageMismatch>,
    /// The successful request with the most prompt + output tokens: its
    /// (prompt, output) as the server counted them.
    pub longest: Option<(u64, u64)>,
    /// Requests whose chunks arrived faster than a stream can be produced.
    pub starved: Option<Starved>,
}

/// Requests a busy client read in bursts ([`crate::load::metrics::collapsed`]):
/// how many, and the first one's tokens and first-to-last chunk time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Starved {
    pub requests: u64,
    pub ok_requests: u64,
    pub tokens: u64,
    pub span_ns: u64,
}

/// Requests whose `usage.completion_tokens` could not be true (over their
/// `max_tokens`, or under the chunks that carried text), and the first one's
/// numbers: their streamed count was used instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageMismatch {
    pub requests: u64,
    pub said: u64,
    pub streamed: u64,
    pub max_tokens: u32,
}

/// A cell whose requests stopped streaming.
#[derive(Debug, Clone, Copy)]
pub struct Stall {
    /// How long nothing arrived.
    pub idle: Duration,
    /// Requests in flight when the cell was given up.
    pub in_flight: u64,
}

/// What a cell's figures are judged against (the plan's limits, and what it
/// asked of each request).
#[derive(Debug, Clone, Copy)]
pub struct Checks {
    /// `max_tokens` of every request.
    pub max_tokens: u32,
    pub max_error_rate: f64,
    /// Short outputs fail the cell (else they are its first warning).
    pub fail_short: bool,
    pub context_limit: Option<u64>,
    /// The server's own context for one request, when it says: no prompt,
    /// nor prompt and output together, can be over it and be true.
    pub server_context: Option<u64>,
    /// The client's and the server's mean TTFT may differ by this much.
    pub max_ttft_gap_ms: f64,
    /// A cold cell may find this % of its prompt tokens cached; `None` for a
    /// warm cell (nothing to flag).
    pub max_cold_cache_hit_pct: Option<f64>,
    /// The prompt length the cell's prompts were fitted to, when it has one.
    pub prompt_target: Option<u64>,
}

/// How far the server's count of a prompt may be from its target: the
/// tags' and the fitting's token or two, and a tokenizer's rounding.
pub fn prompt_slack(target: u64) -> u64 {
    (target / 100).max(8)
}

/// Decide a cell's status. `Ok(warnings)` means the metrics may be recorded
/// as `ok`, with what they must be read with, most important first: short
/// outputs, a client TTFT far from the server's, cold prompts that hit the
/// cache.
pub fn validate(
    measured: &Measured,
    health: &ServerHealth,
    checks: &Checks,
) -> Result<Vec<Failure>, Failure> {
    let Checks {
        max_error_rate,
        fail_short,
        ..
    } = *checks;
    let metrics = measured.metrics;
    if let Some(f) = &health.died {
        return Err(f.clone());
    }
    if let Some(stall) = measured.stall {
        return Err(Failure::new(FailureKind::Stalled, FailureSource::Client, format!(
                "no token arrived for {:.1} s with {} request(s) in flight ({} requests finished before, {} of them ok)",
                stall.idle.as_secs_f64(),
                stall.in_flight,
                metrics.requests,
                metrics.requests - metrics.failed_requests
            )));
    }
    let total = metrics.requests.max(1);
    if metrics.failed_requests > 0 && metrics.failed_requests as f64 / total as f64 > max_error_rate
    {
        // A context overflow explains a cell better than whatever followed it.
        let failures: Vec<Failure> = measured.errors.iter().map(request_failure).collect();
        let mut chosen = failures
            .iter()
            .find(|f| f.kind == FailureKind::ContextOverflow)
            .or(failures.first())
            .cloned()
            .unwrap_or_else(|| {
                Failure::new(FailureKind::HttpError, FailureSource::Client, String::new())
            });
        chosen.message = format!(
            "{} of {} requests failed: {}",
            metrics.failed_requests, metrics.requests, chosen.message
        );
        return Err(chosen);
    }
    if let Some(over) = prompt_over_context(metrics, checks) {
        return Err(over);
    }
    let short = short_output(measured, checks);
    if let Some(short) = short.clone().filter(|_| fail_short) {
        return Err(short);
    }
    if !metrics.has_tokens() {
        return Err(zero_tokens(metrics.requests));
    }
    Ok(read_with(short, measured, checks))
}

/// What a cell's numbers must be read with, most important first: short
/// outputs, a client TTFT far from the server's, cold prompts that hit the
/// cache. [`validate`] returns these for an ok cell; a failed one has them
/// too (`loadtest` prints them whatever the verdict).
pub fn warnings(measured: &Measured, checks: &Checks) -> Vec<Failure> {
    read_with(short_output(measured, checks), measured, checks)
}

fn read_with(short: Option<Failure>, measured: &Measured, checks: &Checks) -> Vec<Failure> {
    let metrics = measured.metrics;
    measured
        .usage_mismatch
        .map(usage_mismatch)
        .into_iter()
        .chain(prompt_mismatch(metrics, checks))
        .chain(measured.starved.map(client_starved))
        .chain(context_shift(measured, checks))
        .chain(short)
        .chain(clock_gap(metrics, checks.max_ttft_gap_ms))
        .chain(
            checks
                .max_cold_cache_hit_pct
                .and_then(|max| cache_hit(metrics, max)),
        )
        // Last: the figures stand (they are on the receive clock); said
        // once, and not beside requests already left out as starved.
        .chain(late_reads(metrics).filter(|_| measured.starved.is_none()))
        .collect()
}

/// The client's mean TTFT against the server's own: a gap over `max_ms`
/// means something between them (the HTTP front end, the network, a busy
/// client) is part of the measurement.
pub fn clock_gap(metrics: &Metrics, max_ms: f64) -> Option<Failure> {
    let gap = metrics.ttft_gap_ms()?;
    let server = metrics.server_ttft_ms_mean?;
    (gap.abs() > max_ms).then(|| {
        let words = if gap > 0.0 {
            "the client, the network or the server's HTTP front end added it"
        } else {
            "the client measured less than the server: its histogram is not of these requests"
        };
        Failure::new(
            FailureKind::ClockGap,
            FailureSource::Client,
            format!(
                "mean TTFT {:.1} ms here, {server:.1} ms by the server's own clock: {gap:+.1} ms, over the {max_ms} ms allowed ({words})",
                metrics.ttft_ms_mean
            ),
        )
    })
}

/// A cold cell whose prompts the server found in its prefix cache: its TTFT
/// is not a cold prefill's.
pub fn cache_hit(metrics: &Metrics, max_pct: f64) -> Option<Failure> {
    let pct = metrics.prefix_cache_hit_pct?;
    (pct > max_pct).then(|| {
        Failure::new(
            FailureKind::CacheHit,
            FailureSource::Client,
            format!(
                "{pct:.1} % of the prompt tokens were found in the server's prefix cache, over the {max_pct} % a cold cell allows: TTFT is not a cold prefill's"
            ),
        )
    })
}

/// Successful requests that returned fewer tokens than they asked for: what
/// a cell's numbers must be read with (or its failure, when the plan says
/// so). The message gives how many and how short; when the server's context
/// is known and the longest prompt plus `max_tokens` exceeds it, that is
/// named as the reason and its numbers kept (vLLM, for one, lowers
/// `max_tokens` silently to what the context has left).
pub fn short_output(measured: &Measured, checks: &Checks) -> Option<Failure> {
    let metrics = measured.metrics;
    if metrics.short_requests == 0 {
        return None;
    }
    let ok = metrics.requests - metrics.failed_requests;
    let asked = checks.max_tokens;
    let tokens = match metrics.output_tokens_asked {
        Some(total) => format!(
            "{} of {} tokens",
            thousands(metrics.output_tokens),
            thousands(total)
        ),
        None => format!("{} tokens", thousands(metrics.output_tokens)),
    };
    let examples: Vec<String> = measured.short_examples.iter().map(u64::to_string).collect();
    let mut message =
        format!(
        "{} of {ok} requests returned fewer tokens than the {asked} asked ({}{}; {tokens} in all)",
        metrics.short_requests,
        examples.join(", "),
        if metrics.short_requests as usize > examples.len() { ", …" } else { "" },
    );
    let prompt = metrics.prompt_tokens_max;
    let context = match (checks.context_limit, prompt) {
        (Some(limit), Some(p)) if p + u64::from(asked) > limit => {
            message.push_str(&format!(
                ": prompt {} + {asked} asked > context {}",
                thousands(p),
                thousands(limit)
            ));
            Some(ContextNumbers {
                limit: Some(limit),
                prompt_tokens: Some(p),
                output_tokens: Some(u64::from(asked)),
                total_tokens: None,
            })
        }
        _ => None,
    };
    Some(
        Failure::new(FailureKind::ShortOutput, FailureSource::Client, message)
            .with_context(context),
    )
}

/// The server's token counts that disagreed with its stream, both numbers.
fn usage_mismatch(u: UsageMismatch) -> Failure {
    Failure::new(
        FailureKind::UsageMismatch,
        FailureSource::Http,
        format!(
            "{} request(s) said usage.completion_tokens {} where {} text chunks were streamed (max_tokens {}): the streamed count is used",
            u.requests,
            thousands(u.said),
            thousands(u.streamed),
            u.max_tokens
        ),
    )
}

/// Prompts the server counted off the cell's target by more than the slack.
fn prompt_mismatch(metrics: &Metrics, checks: &Checks) -> Option<Failure> {
    let target = checks.prompt_target?;
    let (min, max) = (metrics.prompt_tokens_min?, metrics.prompt_tokens_max?);
    let slack = prompt_slack(target);
    let off = min < target.saturating_sub(slack) || max > target.saturating_add(slack);
    off.then(|| {
        Failure::new(
            FailureKind::PromptMismatch,
            FailureSource::Http,
            format!(
                "the server counted prompts of {} to {} tokens for a target of {} (± {slack}): the cell's context is not what it says",
                thousands(min),
                thousands(max),
                thousands(target)
            ),
        )
    })
}

/// A prompt the server counted over its own context limit: whatever it
/// answered, that is not a measurement of the cell.
fn prompt_over_context(metrics: &Metrics, checks: &Checks) -> Option<Failure> {
    let (limit, max) = (checks.server_context?, metrics.prompt_tokens_max?);
    (max > limit).then(|| {
        Failure::new(
            FailureKind::PromptMismatch,
            FailureSource::Http,
            format!(
                "the server counted a prompt of {} tokens, over its context limit of {}{}: not a measurement of this cell",
                thousands(max),
                thousands(limit),
                checks
                    .prompt_target
                    .map(|t| format!(" (target {})", thousands(t)))
                    .unwrap_or_default()
            ),
        )
        .with_context(Some(ContextNumbers {
            limit: Some(limit),
            prompt_tokens: Some(max),
            output_tokens: None,
            total_tokens: None,
        }))
    })
}

/// Requests read in bursts: their decode rate, ITL and TPOT are left out of
/// the cell's figures, and said with the first one's numbers.
fn client_starved(s: Starved) -> Failure {
    let ms = s.span_ns as f64 / 1e6;
    let rate = if s.span_ns > 0 {
        format!(
            "{} tok/s",
            thousands((s.tokens.saturating_sub(1) as f64 / (s.span_ns as f64 / 1e9)) as u64)
        )
    } else {
        "all at once".to_string()
    };
    Failure::new(
        FailureKind::ClientStarved,
        FailureSource::Client,
        format!(
            "{} of {} requests arrived faster than a stream can be produced ({} tokens within {ms:.2} ms, {rate}): the client fell behind and read them in bursts, so their decode rate, ITL and TPOT are left out (their TTFT and E2E are upper bounds)",
            s.requests, s.ok_requests, s.tokens
        ),
    )
}

/// The most a chunk may wait between arriving and being read (p99) before
/// the client is said to be starved of CPU.
pub const LATE_READ_MS: f64 = 20.0;

/// A client that read its chunks late (the kernel's receive time against
/// the read): its figures are on the receive clock and stand, but it was
/// short of CPU, and what queued meanwhile came in one read.
fn late_reads(metrics: &Metrics) -> Option<Failure> {
    let lag = metrics.client_lag_ms_p99.filter(|l| *l > LATE_READ_MS)?;
    Some(Failure::new(
        FailureKind::ClientStarved,
        FailureSource::Client,
        format!(
            "the client read chunks up to {lag:.1} ms after they arrived (p99, over the {LATE_READ_MS} ms allowed; {} read(s) held several chunks): it was short of CPU. The figures are on the kernel's receive clock and stand; a first token that came in such a read makes its TTFT an upper bound",
            metrics.coalesced_reads.unwrap_or(0)
        ),
    ))
}

/// A request that held more prompt and output tokens than the server's
/// context for one request: only a server that dropped old tokens to go on
/// (llama.cpp's `--context-shift`) can return it, and what it timed is not
/// the request asked.
fn context_shift(measured: &Measured, checks: &Checks) -> Option<Failure> {
    let (limit, (prompt, output)) = (checks.server_context?, measured.longest?);
    let total = prompt.saturating_add(output);
    (total > limit).then(|| {
        Failure::new(
            FailureKind::ContextShift,
            FailureSource::Client,
            format!(
                "a request held {} prompt + {} output = {} tokens, over the server's context of {} a request: it dropped old tokens to go on (a context shift), so its decode is not the one asked",
                thousands(prompt),
                thousands(output),
                thousands(total),
                thousands(limit)
            ),
        )
        .with_context(Some(ContextNumbers {
            limit: Some(limit),
            prompt_tokens: Some(prompt),
            output_tokens: Some(output),
            total_tokens: Some(total),
        }))
    })
}

/// Requests that completed without a token: never a measurement.
pub fn zero_tokens(requests: u64) -> Failure {
    Failure::new(
        FailureKind::ZeroTokens,
        FailureSource::Client,
        format!("{requests} requests completed but the server returned no tokens"),
    )
}

/// The failure one request met.
pub fn request_failure(e: &RequestError) -> Failure {
    let client = |kind, message: String| Failure::new(kind, FailureSource::Client, message);
    match e {
        RequestError::Http { status, body } => classify_http(*status, body),
        RequestError::InStream { body } => match serde_json::from_str::<serde_json::Value>(body) {
            Ok(v) => classify_stream_error(&v),
            Err(_) => classify_http(200, body),
        },
        RequestError::Connection { message } => {
            client(FailureKind::ConnectionError, message.clone())
        }
        RequestError::Timeout => client(FailureKind::RequestTimeout, "request timed out".into()),
        RequestError::Truncated => client(
            FailureKind::ConnectionError,
            "the stream ended without [DONE]".into(),
        ),
        RequestError::Malformed { message } => client(FailureKind::HttpError, message.clone()),
        RequestError::Overlong {
            streamed,
            max_tokens,
        } => client(
            FailureKind::UsageMismatch,
            format!(
                "the server streamed {} text chunks for a request of max_tokens {max_tokens}: read no further",
                thousands(*streamed)
            ),
        ),
    }
}

/// Whether a request error may be the server going away (worth waiting a
/// moment for its exit status or log before judging the cell): a cut stream,
/// an error inside a stream (vLLM's "EngineCore encountered an issue"), a 5xx.
pub fn looks_like_server_gone(e: &RequestError) -> bool {
    match e {
        RequestError::Connection { .. }
        | RequestError::Truncated
        | RequestError::InStream { .. } => true,
        RequestError::Http { status, .. } => *status >= 500,
        RequestError::Timeout | RequestError::Malformed { .. } | RequestError::Overlong { .. } => {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{CellRun, CellStats};
    use crate::model::RequestRecord;

    /// The validator's view of a run.
    fn measured<'a>(run: &'a CellRun, metrics: &'a Metrics) -> Measured<'a> {
        Measured {
            metrics,
            errors: &run.stats.errors,
            short_examples: &run.stats.short_examples,
            stall: None,
            usage_mismatch: None,
            longest: run.stats.longest,
            starved: None,
        }
    }

    /// The checks with `context_limit`, for requests of 8 tokens.
    fn checks(context_limit: Option<u64>) -> Checks {
        Checks {
            max_tokens: 8,
            max_error_rate: 0.0,
            fail_short: false,
            context_limit,
            server_context: context_limit,
            max_ttft_gap_ms: 25.0,
            max_cold_cache_hit_pct: Some(10.0),
            prompt_target: None,
        }
    }

    fn rec(tokens: u64, max: u32, error: Option<RequestError>) -> RequestRecord {
        let chunks = (0..tokens).map(|i| ((10 + i) * 1_000_000, 4)).collect();
        RequestRecord {
            id: None,
            start_ns: 0,
            chunks,
            end_ns: (11 + tokens) * 1_000_000,
            prompt_tokens: Some(10),
            completion_tokens: if error.is_some() { None } else { Some(tokens) },
            max_tokens: max,
            finish_reason: Some("length".into()),
            error,
            server: None,
            read_lag_us: Vec::new(),
        }
    }

    fn judge(
        records: Vec<RequestRecord>,
        died: Option<Failure>,
        rate: f64,
        fail_short: bool,
    ) -> Result<Vec<Failure>, Failure> {
        let run = run_of(&records);
        let m = run.stats.metrics(run.wall_ns);
        let checks = Checks {
            max_error_rate: rate,
            fail_short,
            ..checks(Some(20))
        };
        validate(&measured(&run, &m), &ServerHealth { died }, &checks)
    }

    /// A cell of one second that measured `records`.
    fn run_of(records: &[RequestRecord]) -> CellRun {
        let mut stats = CellStats::new();
        records.iter().for_each(|r| stats.add(r));
        CellRun {
            stats,
            wall_ns: 1_000_000_000,
            started_ms: 0,
            stalled_for: None,
            in_flight: 0,
            server: None,
        }
    }

    #[test]
    fn ok_needs_tokens_from_a_live_server() {
        assert!(judge(vec![rec(8, 8, None)], None, 0.0, false).is_ok());
        let zero = judge(vec![rec(0, 8, None)], None, 0.0, false).unwrap_err();
        assert_eq!(zero.kind, FailureKind::ZeroTokens);
        let crash = Failure::new(
            FailureKind::CudaIllegalInstruction,
            FailureSource::ServerLog,
            "CUDA error: an illegal instruction was encountered",
        );
        // Tokens arrived, but the server died during the cell: not a measurement.
        let died = judge(vec![rec(8, 8, None)], Some(crash), 0.0, false).unwrap_err();
        assert_eq!(died.kind, FailureKind::CudaIllegalInstruction);
    }

    #[test]
    fn any_failed_request_fails_the_cell_by_default_and_overflow_explains_best() {
        let body = r#"{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 33012 tokens (32756 in the messages, 256 in the completion).","type":"BadRequestError","param":null,"code":400}"#;
        let records = vec![
            rec(8, 8, None),
            rec(0, 8, Some(RequestError::Timeout)),
            rec(
                0,
                8,
                Some(RequestError::Http {
                    status: 400,
                    body: body.into(),
                }),
            ),
            rec(8, 8, None),
        ];
        let f = judge(records.clone(), None, 0.0, false).unwrap_err();
        assert_eq!(f.kind, FailureKind::ContextOverflow);
        assert!(
            f.message.starts_with("2 of 4 requests failed"),
            "{}",
            f.message
        );
        assert_eq!(f.context.and_then(|c| c.limit), Some(32768));
        // A tolerant plan accepts it.
        assert!(judge(records, None, 0.5, false).is_ok());
    }

    /// The cell's prompts as the server counted them: off their target by
    /// more than the slack is a warning with target, min and max; over the
    /// server's own context limit is never an ok cell.
    #[test]
    fn prompts_off_target_are_flagged_and_over_the_context_fail() {
        let with_prompts = |p: &[u64]| -> Vec<RequestRecord> {
            p.iter()
                .map(|&n| RequestRecord {
                    prompt_tokens: Some(n),
                    ..rec(8, 8, None)
                })
                .collect()
        };
        let judge_at = |records: Vec<RequestRecord>, target: u64, limit: u64| {
            let run = run_of(&records);
            let m = run.stats.metrics(run.wall_ns);
            let c = Checks {
                prompt_target: Some(target),
                ..checks(Some(limit))
            };
            validate(&measured(&run, &m), &ServerHealth { died: None }, &c)
        };
        // On target, within the slack (8 tokens under 800): nothing to say.
        assert_eq!(
            judge_at(with_prompts(&[128, 130]), 128, 100_000),
            Ok(vec![])
        );
        // /tokenize answering half: prompts twice the target.
        let w = judge_at(with_prompts(&[244, 250]), 128, 100_000).unwrap();
        assert_eq!(w[0].kind, FailureKind::PromptMismatch);
        assert_eq!(
            w[0].message,
            "the server counted prompts of 244 to 250 tokens for a target of 128 (± 8): the cell's context is not what it says"
        );
        // /tokenize answering 1: prompts over the server's own limit.
        let f = judge_at(with_prompts(&[1_805_926]), 8192, 100_000).unwrap_err();
        assert_eq!(f.kind, FailureKind::PromptMismatch);
        assert!(
            f.message
                .contains("1,805,926 tokens, over its context limit of 100,000 (target 8,192)"),
            "{}",
            f.message
        );
        assert_eq!(f.context.and_then(|c| c.prompt_tokens), Some(1_805_926));
        assert_eq!(prompt_slack(128), 8);
        assert_eq!(prompt_slack(32_768), 327);
    }

    /// Chunks read long after the kernel received them: a warning with the
    /// lag and the reads that held several chunks.
    #[test]
    fn chunks_read_late_are_a_client_starved_warning_with_both_figures() {
        let run = run_of(&[rec(8, 8, None)]);
        let mut m = run.stats.metrics(run.wall_ns);
        m.client_lag_ms_p99 = Some(LATE_READ_MS - 1.0);
        m.coalesced_reads = Some(0);
        assert!(late_reads(&m).is_none(), "within the allowance");
        m.client_lag_ms_p99 = Some(48.0);
        m.coalesced_reads = Some(3);
        let w = warnings(&measured(&run, &m), &checks(None));
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].kind, FailureKind::ClientStarved);
        assert!(
            w[0].message.contains("48.0 ms after they arrived")
                && w[0].message.contains("3 read(s) held several chunks"),
            "{}",
            w[0].message
        );
        m.client_lag_ms_p99 = None;
        assert!(late_reads(&m).is_none(), "the read clock says nothing");
    }

    /// Requests read in bursts: a warning that says how many and the first
    /// one's numbers, after the usage and prompt checks.
    #[test]
    fn requests_read_in_bursts_are_a_client_starved_warning() {
        let run = run_of(&[rec(8, 8, None)]);
        let m = run.stats.metrics(run.wall_ns);
        let measured = Measured {
            starved: Some(Starved {
                requests: 3,
                ok_requests: 16,
                tokens: 16,
                span_ns: 60_000,
            }),
            ..measured(&run, &m)
        };
        let w = validate(&measured, &ServerHealth { died: None }, &checks(None)).unwrap();
        assert_eq!(w[0].kind, FailureKind::ClientStarved);
        assert!(
            w[0].message.starts_with("3 of 16 requests arrived faster than a stream can be produced (16 tokens within 0.06 ms, 250,000 tok/s)"),
            "{}",
            w[0].message
        );
    }

    /// A request longer than the server's context for one request can only
    /// come from a server that dropped old tokens (llama.cpp's context
    /// shift): a warning with the numbers, from the server's own context,
    /// never from a lower limit the plan set.
    #[test]
    fn a_request_past_the_servers_context_is_a_context_shift() {
        let run = run_of(&[rec(8, 8, None), rec(8, 8, None)]);
        let m = run.stats.metrics(run.wall_ns);
        // prompt 10 + 8 output = 18 tokens.
        let mut c = checks(Some(16));
        let w = validate(&measured(&run, &m), &ServerHealth { died: None }, &c).unwrap();
        assert_eq!(w[0].kind, FailureKind::ContextShift, "{w:?}");
        assert!(
            w[0].message
                .contains("10 prompt + 8 output = 18 tokens, over the server's context of 16"),
            "{}",
            w[0].message
        );
        c.server_context = Some(18);
        assert!(
            validate(&measured(&run, &m), &ServerHealth { died: None }, &c)
                .unwrap()
                .is_empty()
        );
        (c.context_limit, c.server_context) = (Some(16), None);
        assert!(
            validate(&measured(&run, &m), &ServerHealth { died: None }, &c)
                .unwrap()
                .is_empty()
        );
    }

    /// Usage that disagreed with the stream is said with both numbers.
    #[test]
    fn a_usage_mismatch_is_a_warning_with_both_numbers() {
        let r = RequestRecord {
            completion_tokens: Some(16_000),
            ..rec(8, 8, None)
        };
        let run = run_of(&[r]);
        let m = run.stats.metrics(run.wall_ns);
        let (said, streamed, max_tokens) = run.stats.usage_example.unwrap();
        let measured = Measured {
            usage_mismatch: Some(UsageMismatch {
                requests: run.stats.usage_mismatch,
                said,
                streamed,
                max_tokens,
            }),
            ..measured(&run, &m)
        };
        let w = validate(&measured, &ServerHealth { died: None }, &checks(Some(100))).unwrap();
        assert_eq!(w[0].kind, FailureKind::UsageMismatch);
        assert_eq!(
            w[0].message,
            "1 request(s) said usage.completion_tokens 16,000 where 8 text chunks were streamed (max_tokens 8): the streamed count is used"
        );
        assert_eq!(m.output_tokens, 8);
        // A request that streamed far past its max_tokens failed.
        let f = request_failure(&RequestError::Overlong {
            streamed: 27,
            max_tokens: 8,
        });
        assert_eq!(f.kind, FailureKind::UsageMismatch);
    }

    #[test]
    fn short_requests_are_a_warning_or_fail_as_the_plan_says() {
        let records = vec![rec(8, 8, None), rec(5, 8, None)];
        assert!(judge(records.clone(), None, 0.0, false).is_ok());
        let f = judge(records.clone(), None, 0.0, true).unwrap_err();
        assert_eq!(f.kind, FailureKind::ShortOutput);
        assert_eq!(
            f.message,
            "1 of 2 requests returned fewer tokens than the 8 asked (5; 13 of 16 tokens in all)"
        );
        // With the context known (20) and prompt 10 + 8 asked inside it, no reason is guessed.
        assert_eq!(f.context, None);
        // Prompt 14 + 8 > 20: the context is the reason, with its numbers.
        let long: Vec<RequestRecord> = records
            .into_iter()
            .map(|r| RequestRecord {
                prompt_tokens: Some(14),
                ..r
            })
            .collect();
        let run = run_of(&long);
        let m = run.stats.metrics(run.wall_ns);
        let w = short_output(&measured(&run, &m), &checks(Some(20))).unwrap();
        assert!(
            w.message.ends_with(": prompt 14 + 8 asked > context 20"),
            "{}",
            w.message
        );
        let n = w.context.unwrap();
        assert_eq!(
            (n.limit, n.prompt_tokens, n.output_tokens),
            (Some(20), Some(14), Some(8))
        );
        // Nothing short, nothing to say.
        let run = run_of(&[rec(8, 8, None)]);
        let m = run.stats.metrics(run.wall_ns);
        assert!(short_output(&measured(&run, &m), &checks(Some(20))).is_none());
    }

    #[test]
    fn the_server_clock_and_cache_add_warnings_after_short_outputs() {
        let records = vec![rec(8, 8, None), rec(5, 8, None)];
        let run = run_of(&records);
        let mut m = run.stats.metrics(run.wall_ns);
        let mut checks = checks(None);
        let kinds = |m: &Metrics, c: &Checks| -> Vec<FailureKind> {
            validate(&measured(&run, m), &ServerHealth { died: None }, c)
                .unwrap()
                .iter()
                .map(|f| f.kind)
                .collect()
        };
        // No server-side figures: nothing to compare.
        assert_eq!(kinds(&m, &checks), [FailureKind::ShortOutput]);
        // Within the allowed gap, no cache hits.
        (m.server_ttft_ms_mean, m.prefix_cache_hit_pct) = (Some(m.ttft_ms_mean - 5.0), Some(0.0));
        assert_eq!(kinds(&m, &checks), [FailureKind::ShortOutput]);
        // 40 ms the server did not see, and half the prompts cached.
        (m.server_ttft_ms_mean, m.prefix_cache_hit_pct) = (Some(m.ttft_ms_mean - 40.0), Some(50.0));
        assert_eq!(
            kinds(&m, &checks),
            [
                FailureKind::ShortOutput,
                FailureKind::ClockGap,
                FailureKind::CacheHit
            ]
        );
        let gap = clock_gap(&m, 25.0).unwrap();
        assert!(
            gap.message.contains("+40.0 ms, over the 25 ms allowed"),
            "{}",
            gap.message
        );
        // A warm cell is meant to hit the cache.
        checks.max_cold_cache_hit_pct = None;
        assert_eq!(
            kinds(&m, &checks),
            [FailureKind::ShortOutput, FailureKind::ClockGap]
        );
        // A client faster than the server is as suspect.
        m.server_ttft_ms_mean = Some(m.ttft_ms_mean + 30.0);
        let gap = clock_gap(&m, 25.0).unwrap();
        assert!(gap.message.contains("-30.0 ms"), "{}", gap.message);
    }
}
