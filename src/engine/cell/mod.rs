//! Running one cell against a ready server: its prompts at the context target
//! (clamped, refused or sent as the plan says when they would not fit), the
//! requests with their raw records streamed to disk, the server's death, a
//! fatal log line, the cell timeout and the user's skips watched all along,
//! then the figures gathered (GPU, acceptance length) and judged by
//! [`detect::validate`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::commands::Between;
use super::launch::{Live, Prompts};
use super::outcome::{self, CellEnd};
use super::server::Server;
use super::Lane;
use crate::detect::{self, ServerHealth};
use crate::load::{self, CellLoad};
use crate::model::{
    ContextNumbers, Event, Failure, FailureKind, FailureSource, Level, Metrics, RequestRecord,
    Spread, Timestamp,
};
use crate::plan::{Cache, Cell, Config, Overflow, Plan, ShortRequests};

impl Lane {
    /// Run one cell on a live server and say how it ended.
    pub(super) async fn run_cell(
        &mut self,
        config: &Config,
        cell: &Cell,
        live: &mut Live,
    ) -> CellEnd {
        let started_at = Timestamp::now();
        self.cell_started(&cell.id, &config.id);
        self.emit(Event::CellStarted {
            at: started_at,
            cell: cell.id.clone(),
            config: config.id.clone(),
        });
        let failed = |f: Failure| outcome::failed(cell, started_at, f);
        // A server that died between cells cannot run this one.
        if live.server.exited().is_some() {
            live.server.drain_logs(Duration::from_secs(2)).await;
        }
        if let Some(f) = death_failure(&live.server) {
            return CellEnd::ServerDied(failed(f.clone()), f);
        }
        let (prompts, _measured) = match self.prompts_for(cell, live).await {
            Ok(p) => p,
            Err(f) => return CellEnd::Done(failed(f)),
        };
        let Some(load) = self.cell_load(cell, prompts, &live.tags) else {
            return CellEnd::Done(outcome::skipped(cell, started_at));
        };
        let pool = match load::Pool::new(&live.target.base) {
            Ok(p) => Arc::new(p),
            Err(e) => {
                return CellEnd::Done(failed(Failure::new(
                    FailureKind::ConnectionError,
                    FailureSource::Client,
                    e.to_string(),
                )))
            }
        };
        let active = self.gpus.clone();
        let pgid = live.server.pgid;
        if let Some(g) = self.gpu() {
            g.begin_cell(&cell.id, pgid, &active);
        }
        let cold = self
            .plan
            .workload(&cell.workload)
            .is_none_or(|w| w.cache == Cache::Cold);
        let repeats = self
            .plan
            .workload(&cell.workload)
            .map_or(1, |w| w.repeats.max(1));
        let limits = &self.plan.limits;
        let checks = detect::Checks {
            max_error_rate: limits.max_error_rate,
            fail_short: limits.short_requests == ShortRequests::Fail,
            context_limit: live.context_limit,
            max_ttft_gap_ms: limits.max_ttft_gap_ms,
            max_cold_cache_hit_pct: cold.then_some(limits.max_cold_cache_hit_pct),
        };
        let ignore_short = limits.short_requests == ShortRequests::Ignore;
        let max_spread_pct = limits.max_spread_pct;
        // Each repetition is a whole measurement (from a cold cache when the
        // workload is cold); the first that fails fails the cell.
        let mut kept: Vec<(Metrics, Vec<Failure>)> = Vec::new();
        for rep in 0..repeats {
            if cold {
                let paths = config.kind.preset().flush;
                self.flush_cache(&cell.config, paths, live).await;
            }
            if let Ok(mut l) = live.server.log.lock() {
                l.accept.clear();
            }
            let run = match self
                .measure(cell, rep, started_at, &pool, &load, live)
                .await
            {
                Ok(run) => run,
                Err(end) => {
                    if let Some(g) = self.gpu() {
                        g.end_cell(&cell.id, pgid);
                    }
                    return end;
                }
            };
            let mut metrics = run.stats.metrics(run.wall_ns);
            let counted = self.server_figures(cell, &run, live);
            if let Some(f) = &counted {
                f.fill(&mut metrics);
            }
            metrics.accept_len = acceptance_length(live, &run, counted.as_ref());
            let health = ServerHealth {
                died: death_failure(&live.server),
            };
            match detect::validate(&run, &metrics, &health, &checks) {
                Ok(mut warnings) => {
                    if ignore_short {
                        warnings.retain(|w| w.kind != FailureKind::ShortOutput);
                    }
                    kept.push((metrics, warnings));
                }
                Err(f) => {
                    if let Some(g) = self.gpu() {
                        g.end_cell(&cell.id, pgid);
                    }
                    return if health.died.is_some() {
                        CellEnd::ServerDied(failed(f.clone()), f)
                    } else if run.stalled_for.is_some() {
                        CellEnd::Stalled(failed(stall_evidence(f, &live.server)))
                    } else {
                        CellEnd::Done(failed(f))
                    };
                }
            }
        }
        let gpu = self.gpu().map(|g| g.end_cell(&cell.id, pgid));
        let all: Vec<Metrics> = kept.iter().map(|(m, _)| m.clone()).collect();
        let (mut metrics, mut warnings) = kept.swap_remove(Spread::median_index(&all));
        if let Some((mem, util)) = gpu {
            (metrics.gpu_mem_peak_mib, metrics.gpu_util_mean) = (mem, util);
        }
        let mut record = outcome::ok(cell, started_at, metrics);
        if repeats > 1 {
            let spread = Spread::of(&all);
            if let Some(s) = spread.filter(|s| s.spread_pct > max_spread_pct) {
                warnings.push(Failure::new(
                    FailureKind::Noisy,
                    FailureSource::Client,
                    format!(
                        "{} repetitions spread {:.1} % (output tok/s {:.1} to {:.1}, median {:.1}); limits.max_spread_pct = {}",
                        s.n, s.spread_pct, s.min, s.max, s.median, max_spread_pct
                    ),
                ));
            }
            record.repetitions = all;
            record.spread = spread;
        }
        record.warnings = warnings;
        CellEnd::Done(record)
    }

    /// What the cell sends, from its workload and the plan's limits.
    fn cell_load(
        &self,
        cell: &Cell,
        prompts: Arc<Vec<String>>,
        tags: &load::tags::Tags,
    ) -> Option<CellLoad> {
        let w = self.plan.workload(&cell.workload)?;
        let limits = &self.plan.limits;
        Some(CellLoad {
            arrival: match w.rate {
                Some(rate) => load::Arrival::Poisson { rate, capped: true },
                None => load::Arrival::Closed,
            },
            duration: w.duration_s.map(Duration::from_secs_f64),
            concurrency: cell.concurrency,
            requests: w.requests,
            warmup: w.warmup,
            max_tokens: w.max_tokens,
            prompts,
            tags: tags.at(tag_place(w.cache)),
            request_timeout: Duration::from_secs_f64(limits.request_timeout_s),
            stall_timeout: Duration::from_secs_f64(limits.stall_timeout_s),
        })
    }

    /// Send the cell's requests, their raw records streamed to
    /// `requests/<cell>.jsonl`, while watching the server's exit, fatal log
    /// lines, the cell timeout and the user's commands. `Err` is how the cell
    /// ended early.
    async fn measure(
        &mut self,
        cell: &Cell,
        repetition: u32,
        started_at: Timestamp,
        pool: &Arc<load::Pool>,
        load: &CellLoad,
        live: &mut Live,
    ) -> Result<load::CellRun, CellEnd> {
        let failed = |f: Failure| outcome::failed(cell, started_at, f);
        let mut exit = live.server.exit.clone();
        let mut fatal = live.server.fatal.clone();
        let cell_timeout_s = self.plan.limits.cell_timeout_s;
        let cell_deadline = tokio::time::sleep(Duration::from_secs_f64(cell_timeout_s));
        tokio::pin!(cell_deadline);
        let seq = self.seq.clone();
        // Each repetition keeps its own raw records: `<cell>.jsonl`, then
        // `<cell>.rep2.jsonl`, `<cell>.rep3.jsonl`…
        let name = match repetition {
            0 => cell.id.clone(),
            k => format!("{}.rep{}", cell.id, k + 1),
        };
        let writer = self.book().run.requests_writer(&name);
        let mut requests = match writer {
            Ok(w) => Some(w),
            Err(e) => {
                self.notice(
                    Level::Warn,
                    format!("{}: raw request records not kept: {e}", cell.id),
                );
                None
            }
        };
        // The running requests borrow the sink: the block ends both before the file is finished.
        let run = {
            let mut sink = |r: &RequestRecord| {
                if let Some(w) = requests.as_mut() {
                    w.write(r);
                }
            };
            let side = self.http.clone();
            let run_fut = load::run_cell(pool, &live.target, load, &seq, &mut sink, Some(&side));
            tokio::pin!(run_fut);
            loop {
                tokio::select! {
                    run = &mut run_fut => break run,
                    _ = exit.changed() => {
                        live.server.drain_logs(Duration::from_secs(2)).await;
                        let f = death_failure(&live.server).unwrap_or_else(unknown_death);
                        return Err(CellEnd::ServerDied(failed(f.clone()), f));
                    }
                    _ = fatal.changed() => {
                        // A fatal line: give the process a moment to exit so the
                        // failure carries its exit status and all the evidence.
                        let _ = tokio::time::timeout(Duration::from_secs(3), exit.changed()).await;
                        live.server.drain_logs(Duration::from_millis(500)).await;
                        if let Some(f) = death_failure(&live.server) {
                            return Err(CellEnd::ServerDied(failed(f.clone()), f));
                        }
                    }
                    _ = &mut cell_deadline => {
                        let f = Failure::new(
                            FailureKind::RequestTimeout,
                            FailureSource::Client,
                            format!("the cell did not finish within cell_timeout_s = {cell_timeout_s}"),
                        );
                        return Err(CellEnd::Stalled(failed(stall_evidence(f, &live.server))));
                    }
                    changed = self.steer.changed() => {
                        if changed.is_err() {
                            continue;
                        }
                        match self.interrupted_by(&cell.config) {
                            Some(Between::Quit) => return Err(CellEnd::Quit),
                            Some(Between::SkipCell) => return Err(CellEnd::Skipped(outcome::skipped(cell, started_at))),
                            Some(Between::SkipConfig) => return Err(CellEnd::SkipConfig(outcome::skipped(cell, started_at))),
                            Some(Between::Continue) | None => {}
                        }
                    }
                }
            }
        };
        // Requests cut off mid-stream usually mean the server is going down:
        // wait briefly for its exit or its last words before judging.
        if run.stats.errors.iter().any(detect::looks_like_server_gone) {
            let settle = Duration::from_secs(3);
            tokio::select! {
                _ = exit.changed() => {}
                _ = fatal.changed() => {
                    // The cause is logged; give the process a moment to exit too.
                    let _ = tokio::time::timeout(settle, exit.changed()).await;
                }
                _ = tokio::time::sleep(settle) => {}
            }
            if live.server.exited().is_some() {
                live.server.drain_logs(Duration::from_secs(2)).await;
            }
        }
        if let Some(Err(e)) = requests.take().map(|w| w.finish()) {
            self.notice(
                Level::Warn,
                format!("{}: raw request records not kept: {e}", cell.id),
            );
        }
        Ok(run)
    }

    /// Empty the server's prefix cache before a cold cell, by the first
    /// endpoint that works (found at the server's first cold cell); a
    /// server with none gets one notice and its cells rely on each prompt's
    /// own prefix.
    async fn flush_cache(&mut self, config: &str, paths: &'static [&'static str], live: &mut Live) {
        let base = live.target.base.clone();
        match live.flush {
            Some(None) => {}
            Some(Some(path)) => {
                if let Err(e) = load::prom::flush_cache(&self.http, &base, path).await {
                    self.notice(
                        Level::Warn,
                        format!("{config}: prefix cache not flushed: {e}"),
                    );
                }
            }
            None => {
                let mut found = None;
                for &path in paths {
                    if load::prom::flush_cache(&self.http, &base, path)
                        .await
                        .is_ok()
                    {
                        found = Some(path);
                        break;
                    }
                }
                live.flush = Some(found);
                if found.is_none() {
                    self.notice(
                        Level::Info,
                        format!("{config}: the server's prefix cache cannot be flushed between cells (vLLM serves POST /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1, which server.kind = \"vllm\" sets; SGLang serves /flush_cache): cold cells rely on each prompt's own tag, and the cache hit rate shows whether it held"),
                    );
                }
            }
        }
    }

    /// The server's own figures over the measured requests, when its
    /// `/metrics` has them and they are of this cell's requests alone; a
    /// notice says why not (once per server for a missing page).
    fn server_figures(
        &mut self,
        cell: &Cell,
        run: &load::CellRun,
        live: &mut Live,
    ) -> Option<load::prom::ServerFigures> {
        let Some(readings) = &run.server else {
            if !live.said_no_metrics {
                live.said_no_metrics = true;
                self.notice(
                    Level::Info,
                    format!("{}: the server has no /metrics page: no server-side figures (TTFT by its own clock, prefix cache hits)", cell.config),
                );
            }
            return None;
        };
        if !readings.after.knows_latency() && !live.said_no_metrics {
            live.said_no_metrics = true;
            self.notice(
                Level::Info,
                format!("{}: the server's /metrics has no latency histogram sweeptop knows (vLLM's or SGLang's): no server-side TTFT", cell.config),
            );
        }
        match run.server_figures()? {
            Ok(f) => Some(f),
            Err(why) => {
                self.notice(Level::Warn, format!("{}: {why}", cell.id));
                None
            }
        }
    }

    /// The prompts for a cell at its context target, or the failure that stops
    /// it before anything is sent.
    async fn prompts_for(&mut self, cell: &Cell, live: &mut Live) -> Result<Prompts, Failure> {
        let plan = self.plan.clone();
        let preflight = |message: String| {
            Failure::new(
                FailureKind::StartupFailed,
                FailureSource::Preflight,
                message,
            )
        };
        let w = plan
            .workload(&cell.workload)
            .ok_or_else(|| preflight(format!("unknown workload {}", cell.workload)))?;
        let margin = plan.limits.context_margin;
        let mut target = cell.context_tokens;
        if let Some(limit) = live.context_limit {
            let budget = limit.saturating_sub(w.max_tokens as u64 + margin);
            if target > budget {
                match w.overflow {
                    Overflow::Clamp => target = budget,
                    Overflow::Send => {}
                    Overflow::Fail => {
                        let numbers = ContextNumbers {
                            limit: Some(limit),
                            prompt_tokens: Some(cell.context_tokens),
                            output_tokens: Some(w.max_tokens as u64),
                            total_tokens: Some(cell.context_tokens + w.max_tokens as u64),
                        };
                        return Err(Failure::new(
                            FailureKind::ContextOverflow,
                            FailureSource::Preflight,
                            format!(
                                "prompt {} + max_tokens {} + margin {margin} exceeds the context limit {limit}; not sent",
                                cell.context_tokens, w.max_tokens
                            ),
                        )
                        .with_context(Some(numbers)));
                    }
                }
            }
            if target == 0 {
                return Err(Failure::new(
                    FailureKind::ContextOverflow,
                    FailureSource::Preflight,
                    format!(
                        "max_tokens {} + margin {margin} leave no room for a prompt in {limit} tokens",
                        w.max_tokens
                    ),
                ));
            }
        }
        let key = (w.id.clone(), target);
        if let Some(p) = live.prompts.get(&key) {
            return Ok(p.clone());
        }
        let sources = load::prompt::load_source(&w.prompt).map_err(|e| preflight(e.to_string()))?;
        if live.measure.is_none() {
            let local = config_tokenizer(&plan, &cell.config);
            let (m, notice) =
                load::tokenizer::Measure::choose(&self.http, &live.target, local.as_deref()).await;
            if let Some(n) = notice {
                self.notice(Level::Warn, format!("{}: {n}", cell.config));
            }
            let (tags, notice) = load::tags::Tags::calibrate(&m).await;
            if let Some(n) = notice {
                self.notice(Level::Warn, format!("{}: {n}", cell.config));
            }
            live.tags = tags;
            live.measure = Some(m);
        }
        let tags = live.tags.at(tag_place(w.cache));
        let mut bodies = Vec::new();
        let mut measured = 0;
        for src in sources.iter().take(64) {
            let measure = live
                .measure
                .clone()
                .unwrap_or(load::tokenizer::Measure::Estimate);
            let (text, n, error) = measure.fit(src, target, &tags).await;
            if let Some(e) = error {
                // Stop asking a tokenizer that failed once.
                self.notice(
                    Level::Warn,
                    format!(
                        "{}: {e}; prompt lengths are estimated from here on",
                        cell.config
                    ),
                );
                live.measure = Some(load::tokenizer::Measure::Estimate);
            }
            measured = measured.max(n);
            bodies.push(text);
        }
        let v = (Arc::new(bodies), measured);
        live.prompts.insert(key, v.clone());
        Ok(v)
    }
}

/// Where a workload's requests carry their tags: first for a cold cache,
/// last for a warm one.
fn tag_place(cache: Cache) -> load::tags::Place {
    match cache {
        Cache::Cold => load::tags::Place::Start,
        Cache::Warm => load::tags::Place::End,
    }
}

/// Speculative decoding's acceptance length over the cell: from the server's
/// counters (vLLM: exact over the measured requests) when it exports them,
/// else the mean of its log lines during the cell, else its gauge (SGLang).
fn acceptance_length(
    live: &mut Live,
    run: &load::CellRun,
    counted: Option<&load::prom::ServerFigures>,
) -> Option<f64> {
    let logged = live
        .server
        .log
        .lock()
        .map(|mut l| std::mem::take(&mut l.accept))
        .unwrap_or_default();
    let from_log = (!logged.is_empty()).then(|| logged.iter().sum::<f64>() / logged.len() as f64);
    counted.and_then(|f| f.accept_len).or(from_log).or_else(|| {
        run.server
            .as_ref()
            .and_then(|r| load::prom::sglang_accept_gauge(&r.after))
    })
}

/// Why the server is gone or broken, from its log first, else its exit.
fn death_failure(server: &Server) -> Option<Failure> {
    let exit = server.exited();
    let (logged, tail) = server
        .log
        .lock()
        .map(|l| (l.watch.failure(), l.watch.tail(detect::TAIL_KEEP)))
        .unwrap_or((None, Vec::new()));
    match (logged, exit) {
        (Some(mut f), Some(info)) => {
            f.message = format!("{} ({})", f.message, info.describe());
            Some(f)
        }
        (Some(f), None) => Some(f),
        (None, Some(info)) => Some(detect::exit_failure(
            info.code,
            info.signal,
            "server exited while the cell ran",
            &info.describe(),
            &tail,
        )),
        (None, None) => None,
    }
}

fn unknown_death() -> Failure {
    Failure::new(
        FailureKind::ServerExited,
        FailureSource::Exit,
        "server exited",
    )
}

/// The local tokenizer a config's plan names, if any.
fn config_tokenizer(plan: &Plan, config: &str) -> Option<PathBuf> {
    plan.config(config)
        .and_then(|c| c.tokenizer.as_ref())
        .map(PathBuf::from)
}

/// Lines of the server's log kept as a stall's evidence.
const STALL_EVIDENCE_LINES: usize = 20;

/// A stalled cell's evidence: what the server said last (the message already
/// says how many requests were in flight and for how long).
fn stall_evidence(failure: Failure, server: &Server) -> Failure {
    let mut evidence = vec![format!(
        "last {STALL_EVIDENCE_LINES} lines of the server log before the stall:"
    )];
    let tail = server.tail(STALL_EVIDENCE_LINES);
    if tail.is_empty() {
        evidence.push("(the server printed nothing)".into());
    }
    evidence.extend(tail);
    failure.with_evidence(evidence)
}
