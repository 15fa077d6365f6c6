//! A ready server as its cells see it, and what is learnt about it from one
//! cell to the next: how its prompts are measured (its tokenizer, the request
//! tags that cost the same with it), the prompts already fitted to a context
//! target, how its prefix cache is flushed, and whether its `/metrics` page
//! was found wanting (said once).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use super::host::{About, Host};
use super::spec::CellSpec;
use crate::load::client::JsonText;
use crate::load::prom::ServerFigures;
use crate::load::tags::{Place, Tags};
use crate::load::tokenizer::{CountBooks, Measure};
use crate::load::{self, CellRun, Target};
use crate::model::{ContextNumbers, Failure, FailureKind, FailureSource, Level};
use crate::plan::{Cache, Overflow};

/// A cell's prompt bodies and their measured token count.
pub(crate) type Prompts = (Arc<Vec<JsonText>>, u64);

/// The most prompt bodies of a source a cell cycles through.
const MAX_BODIES: usize = 64;

pub(crate) struct Session {
    pub target: Target,
    /// The context its prompts must fit (the plan's, else the server's own).
    pub context_limit: Option<u64>,
    /// The context for one request as the server itself says (what a
    /// prompt, or a prompt and its output, can never exceed and be true);
    /// the plan's limit may be lower.
    pub server_context: Option<u64>,
    /// It takes `cache_prompt` per request (llama.cpp): cold cells send
    /// `false`.
    pub per_request_cache: bool,
    /// For the server's side endpoints (tokenize, metrics, cache flush).
    pub(crate) http: reqwest::Client,
    /// Numbers the requests' tags, across every server of a run, so no two
    /// requests of the run send the same prompt.
    pub(crate) seq: Arc<AtomicU64>,
    /// What earlier servers of the sweep counted with their tokenizers.
    books: Option<Arc<CountBooks>>,
    /// The endpoints that may flush its prefix cache, tried in order.
    flush_paths: &'static [&'static str],
    /// A local `tokenizer.json` for a server without `/tokenize`.
    tokenizer: Option<PathBuf>,
    /// Where the user names one (`server.tokenizer`, `--tokenizer`), for hints.
    tokenizer_setting: &'static str,
    /// How its prompts are measured (chosen at its first cell).
    measure: Option<Measure>,
    /// The request tags that cost the same with its tokenizer (chosen with
    /// `measure`).
    tags: Tags,
    prompts: HashMap<(String, u64), Prompts>,
    /// How its prefix cache is flushed: unknown until its first cold cell,
    /// then the endpoint that worked, or none.
    flush: Option<Option<&'static str>>,
    /// Its `/metrics` was missing or unknown, and a notice said so.
    said_no_metrics: bool,
}

impl Session {
    pub fn new(
        target: Target,
        context_limit: Option<u64>,
        http: reqwest::Client,
        seq: Arc<AtomicU64>,
        flush_paths: &'static [&'static str],
        tokenizer: Option<PathBuf>,
    ) -> Session {
        Session {
            target,
            context_limit,
            server_context: context_limit,
            per_request_cache: false,
            http,
            seq,
            books: None,
            flush_paths,
            tokenizer,
            tokenizer_setting: "server.tokenizer",
            measure: None,
            tags: Tags::default(),
            prompts: HashMap::new(),
            flush: None,
            said_no_metrics: false,
        }
    }

    /// Prompt lengths counted by earlier servers of the sweep, for this one
    /// to read where it counts as they did.
    pub fn sharing_counts(mut self, books: Arc<CountBooks>) -> Session {
        self.books = Some(books);
        self
    }

    /// Where the user names a tokenizer, as hints say it.
    pub fn tokenizer_named_by(mut self, setting: &'static str) -> Session {
        self.tokenizer_setting = setting;
        self
    }

    /// What the server said of itself that its cells are judged with: its
    /// own context for one request, and whether it takes `cache_prompt`.
    pub fn knowing(mut self, about: &load::About) -> Session {
        self.server_context = about.context;
        self.per_request_cache = about.per_request_cache();
        self
    }

    /// The request tags for a workload's cache: first for a cold cache, last
    /// for a warm one.
    pub(super) fn tags(&self, cache: Cache) -> Tags {
        self.tags.at(match cache {
            Cache::Cold => Place::Start,
            Cache::Warm => Place::End,
        })
    }

    /// The prompts for a cell at its context target (clamped, refused or
    /// sent as the workload says when they would not fit), or the failure
    /// that stops it before anything is sent.
    pub(super) async fn prompts(
        &mut self,
        host: &mut impl Host,
        spec: &CellSpec<'_>,
    ) -> Result<Prompts, Failure> {
        let w = spec.workload;
        let target = self.prompt_target(spec)?;
        let key = (w.id.clone(), target);
        if let Some(p) = self.prompts.get(&key) {
            return Ok(p.clone());
        }
        let sources = load::prompt::load_source(&w.prompt).map_err(|e| {
            Failure::new(
                FailureKind::StartupFailed,
                FailureSource::Preflight,
                e.to_string(),
            )
        })?;
        if self.measure.is_none() {
            let (m, notice) = Measure::choose(
                &self.http,
                &self.target,
                self.tokenizer.as_deref(),
                self.tokenizer_setting,
                self.books.as_deref(),
            )
            .await;
            if let Some(n) = notice {
                host.notice(Level::Warn, About::Server, n);
            }
            let (tags, notice) = m.tags().await;
            if let Some(n) = notice {
                host.notice(Level::Warn, About::Server, n);
            }
            self.tags = tags;
            self.measure = Some(m);
        }
        let tags = self.tags(w.cache);
        let mut bodies = Vec::new();
        let mut measured = 0;
        for src in sources.iter().take(MAX_BODIES) {
            let measure = self.measure.clone().unwrap_or(Measure::Estimate);
            let (text, n, error) = measure.fit(src, target, &tags).await;
            if let Some(e) = error {
                // Stop asking a tokenizer that failed once.
                host.notice(
                    Level::Warn,
                    About::Server,
                    format!("{e}; prompt lengths are estimated from here on"),
                );
                self.measure = Some(Measure::Estimate);
            }
            measured = measured.max(n);
            bodies.push(JsonText::new(&text));
        }
        let v = (Arc::new(bodies), measured);
        self.prompts.insert(key, v.clone());
        Ok(v)
    }

    /// The prompt length a cell is sent with: its context target, or less
    /// where it must leave room for `max_tokens` and the margin and the
    /// workload clamps.
    pub(super) fn prompt_target(&self, spec: &CellSpec<'_>) -> Result<u64, Failure> {
        let (w, margin) = (spec.workload, spec.limits.context_margin);
        let mut target = spec.context_tokens;
        let Some(limit) = self.context_limit else {
            return Ok(target);
        };
        let budget = limit.saturating_sub(w.max_tokens as u64 + margin);
        if target > budget {
            match w.overflow {
                Overflow::Clamp => target = budget,
                Overflow::Send => {}
                Overflow::Fail => {
                    let numbers = ContextNumbers {
                        limit: Some(limit),
                        prompt_tokens: Some(spec.context_tokens),
                        output_tokens: Some(w.max_tokens as u64),
                        total_tokens: Some(spec.context_tokens + w.max_tokens as u64),
                    };
                    return Err(Failure::new(
                        FailureKind::ContextOverflow,
                        FailureSource::Preflight,
                        format!(
                            "prompt {} + max_tokens {} + margin {margin} exceeds the context limit {limit}; not sent",
                            spec.context_tokens, w.max_tokens
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
        Ok(target)
    }

    /// Empty the server's prefix cache before a cold measurement, by the
    /// first endpoint that works (found at its first cold cell); a server
    /// with none gets one notice and its cells rely on each prompt's own tag.
    pub(super) async fn flush_cache(&mut self, host: &mut impl Host) {
        let base = &self.target.base;
        match self.flush {
            Some(None) => {}
            Some(Some(path)) => {
                if let Err(e) = load::prom::flush_cache(&self.http, base, path).await {
                    host.notice(
                        Level::Warn,
                        About::Server,
                        format!("prefix cache not flushed: {e}"),
                    );
                }
            }
            None => {
                let mut found = None;
                for &path in self.flush_paths {
                    if load::prom::flush_cache(&self.http, base, path)
                        .await
                        .is_ok()
                    {
                        found = Some(path);
                        break;
                    }
                }
                self.flush = Some(found);
                if found.is_none() {
                    let how = if self.per_request_cache {
                        "the server has no cache flush endpoint; it takes cache_prompt per request (llama.cpp): cold cells send cache_prompt: false, and its own count of cached prompt tokens (timings.cache_n) shows whether that held"
                    } else {
                        "the server's prefix cache cannot be flushed between cells (vLLM serves POST /reset_prefix_cache only with VLLM_SERVER_DEV_MODE=1, which server.kind = \"vllm\" sets; SGLang serves /flush_cache): cold cells rely on each prompt's own tag, and the cache hit rate shows whether it held"
                    };
                    host.notice(Level::Info, About::Server, how.into());
                }
            }
        }
    }

    /// The server's own figures over the measured requests, when its
    /// `/metrics` has them and they are of these requests alone; a notice
    /// says why not (once per server for a missing page).
    pub(super) fn figures(&mut self, host: &mut impl Host, run: &CellRun) -> Option<ServerFigures> {
        let timed = run.stats.server_timings().is_some();
        if let Some(first) = &run.stats.timing_example {
            host.notice(
                Level::Warn,
                About::Cell,
                format!(
                    "{} of {} requests carried timings of their own that cannot be true ({first}): the server's figures leave them out",
                    run.stats.timing_mismatch,
                    run.stats.ok()
                ),
            );
        }
        // A server that times its requests itself has its own figures: a
        // cell with none (its requests refused) is no reason for a notice.
        self.said_no_metrics |= timed;
        if run.server.is_none() && !timed {
            if !self.said_no_metrics {
                self.said_no_metrics = true;
                host.notice(
                    Level::Info,
                    About::Server,
                    "the server has no /metrics page: no server-side figures (TTFT by its own clock, prefix cache hits)".into(),
                );
            }
            return None;
        }
        let knows = run.server.as_ref().is_some_and(|r| r.after.knows_latency());
        if !knows && !timed && !self.said_no_metrics {
            self.said_no_metrics = true;
            host.notice(
                Level::Info,
                About::Server,
                "the server's /metrics has no latency histogram sweeptop knows (vLLM's or SGLang's): no server-side TTFT".into(),
            );
        }
        match run.server_figures()? {
            Ok(f) => {
                let (f, impossible) = f.bounded(run.wall_ns as f64 / 1e6);
                for why in impossible {
                    host.notice(Level::Warn, About::Cell, why);
                }
                Some(f)
            }
            Err(why) => {
                host.notice(Level::Warn, About::Cell, why.to_string());
                None
            }
        }
    }
}
