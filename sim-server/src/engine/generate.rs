//! One request's generation: its tokens paced into a stream (or collected),
//! the counters updated as they go, faults honoured, and how it ends.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::{mpsc, watch};

use super::pacing::after;
use super::{lines::prefill_lines, ActiveGuard, Pacing, Phase, Rng, Shared};
use crate::args::{CrashKind, Flavor, TokenFault};
use crate::faults::{self, When};
use crate::texts::texts;
use crate::wire::{self, Delta, DeltaChoice, Envelope, TextChoice, Usage};
use crate::{timer, tokenizer};

/// Which OpenAI endpoint a request came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Completions,
    Chat,
}

/// A validated generation request.
#[derive(Debug, Clone)]
pub struct Generation {
    pub endpoint: Endpoint,
    pub id: String,
    pub created: u64,
    pub model: String,
    pub prompt_tokens: u64,
    pub max_tokens: u64,
    pub include_usage: bool,
    /// Arrival number: seeds the request's accept-length spread and output words.
    pub seq: u64,
    /// When the request arrived: every deadline counts from here.
    pub start: Instant,
    /// When its bytes reached this machine, where the kernel said (with
    /// `--send-log`): before `start` by the server's intake.
    pub arrived: Option<Instant>,
}

/// One SSE event for the response body, and whether it carries text.
pub struct Event {
    pub bytes: Bytes,
    pub text: bool,
}

/// Where generated chunks go.
pub enum Sink {
    /// SSE events to the response body.
    Stream(mpsc::Sender<Event>),
    /// The whole text, for a non-streaming response.
    Collect(String),
}

/// How a generation ended.
pub enum Outcome {
    /// All tokens delivered; for `Sink::Collect`, the text.
    Done(String),
    /// The client went away, or the stream was ended by the engine.
    Ended,
    /// The engine died with this error (non-streaming answer: HTTP 500).
    Failed(String),
}

impl Sink {
    async fn send(&mut self, event: String) -> bool {
        self.send_event(event, false).await
    }

    async fn send_event(&mut self, event: String, text: bool) -> bool {
        match self {
            Sink::Stream(tx) => tx
                .send(Event {
                    bytes: Bytes::from(event),
                    text,
                })
                .await
                .is_ok(),
            Sink::Collect(_) => true,
        }
    }

    /// Waits until the client goes away (a hung stream never ends on its own).
    async fn closed(&self) {
        match self {
            Sink::Stream(tx) => tx.closed().await,
            Sink::Collect(_) => std::future::pending().await,
        }
    }
}

fn sse(json: &str) -> String {
    format!("data: {json}\n\n")
}

impl Generation {
    fn object(&self) -> &'static str {
        match self.endpoint {
            Endpoint::Completions => "text_completion",
            Endpoint::Chat => "chat.completion.chunk",
        }
    }

    fn envelope<C: serde::Serialize>(&self, choices: Vec<C>, usage: Option<Usage>) -> String {
        Envelope {
            id: &self.id,
            object: self.object(),
            created: self.created,
            model: &self.model,
            choices,
            usage,
        }
        .to_json()
    }

    fn content_chunk(&self, text: &str, finish: Option<&str>) -> String {
        match self.endpoint {
            Endpoint::Completions => self.envelope(
                vec![TextChoice {
                    index: 0,
                    text,
                    logprobs: None,
                    finish_reason: finish,
                    stop_reason: None,
                }],
                None,
            ),
            Endpoint::Chat => self.envelope(
                vec![DeltaChoice {
                    index: 0,
                    delta: Delta {
                        role: None,
                        content: text,
                    },
                    logprobs: None,
                    finish_reason: finish,
                }],
                None,
            ),
        }
    }

    /// The first chat chunk: the role, no content.
    fn role_chunk(&self) -> String {
        self.envelope(
            vec![DeltaChoice {
                index: 0,
                delta: Delta {
                    role: Some("assistant"),
                    content: "",
                },
                logprobs: None,
                finish_reason: None,
            }],
            None,
        )
    }

    fn usage_chunk(&self, completion_tokens: u64) -> String {
        self.envelope::<TextChoice>(
            Vec::new(),
            Some(Usage::new(self.prompt_tokens, completion_tokens)),
        )
    }
}

/// Waits for the phase to change; pends forever if it never can.
async fn phase_changed(rx: &mut watch::Receiver<Phase>) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Sleeps until `deadline` unless the engine stops running first; returns the
/// phase that stopped it.
async fn wait_until(deadline: Instant, rx: &mut watch::Receiver<Phase>) -> Option<Phase> {
    loop {
        let phase = rx.borrow_and_update().clone();
        if phase != Phase::Running {
            return Some(phase);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::select! {
            biased;
            _ = phase_changed(rx) => {}
            _ = timer::sleep_until(deadline) => {}
        }
    }
}

/// Produces the request's tokens into `sink`, paced by the model, honouring faults.
pub async fn generate(shared: Arc<Shared>, gen: Generation, mut sink: Sink) -> Outcome {
    let pacing = Pacing::new(&shared.args);
    let seq = gen.seq;
    let mut rng = Rng::new(shared.args.seed ^ seq.wrapping_mul(0xA076_1D64_78BD_642F));
    let word_offset = seq.wrapping_mul(7);
    let mut active_guard = ActiveGuard::new(shared.clone(), gen.prompt_tokens);
    let mut phase_rx = shared.phase_tx.subscribe();
    shared
        .style
        .print(&prefill_lines(&shared, gen.prompt_tokens));

    if gen.endpoint == Endpoint::Chat && !sink.send(sse(&gen.role_chunk())).await {
        return Outcome::Ended;
    }

    let active = shared.counters().active;
    let first_token_at = after(gen.start, pacing.ttft(gen.prompt_tokens, active));
    let mut deadline = first_token_at;
    let mut emitted = 0u64;
    // No queue here: every request is scheduled as it arrives.
    shared.counters().latency.queue.observe(0.0);
    let mut last_sent = gen.start;
    while emitted < gen.max_tokens {
        let spec_step = emitted > 0 && pacing.speculative();
        let want = if spec_step {
            pacing.draw_accept(&mut rng)
        } else {
            1
        }
        .min(gen.max_tokens - emitted);
        if emitted > 0 {
            deadline = match pacing.fixed_itl {
                // The chunk goes out when its last token is due.
                Some(itl) => {
                    let n = u32::try_from(emitted + want - 1).unwrap_or(u32::MAX);
                    after(first_token_at, itl.saturating_mul(n))
                }
                None => after(deadline, pacing.step(shared.counters().active)),
            };
        }
        let stopped = if pacing.max_speed {
            if emitted % 256 == 255 {
                tokio::task::yield_now().await;
            }
            Some(shared.phase()).filter(|p| *p != Phase::Running)
        } else {
            wait_until(deadline, &mut phase_rx).await
        };
        if let Some(phase) = stopped {
            return stop(&mut sink, phase).await;
        }
        let (granted, fault) = shared.reserve(want, spec_step.then(|| pacing.draft_len()));
        match fault {
            Some(TokenFault::Hang) => shared.set_phase(Phase::Hung),
            Some(TokenFault::Crash(kind)) => start_crash(shared.clone(), kind),
            None => {}
        }
        active_guard.kv_tokens += granted;
        if granted == 0 {
            // Another stream used up the budget before a fault: the phase follows.
            let phase = wait_until(
                after(Instant::now(), Duration::from_secs(3600)),
                &mut phase_rx,
            )
            .await
            .unwrap_or(Phase::Hung);
            return stop(&mut sink, phase).await;
        }
        let mut piece = String::new();
        for i in emitted..emitted + granted {
            piece.push(' ');
            piece.push_str(tokenizer::output_token(word_offset, i));
        }
        emitted += granted;
        let finish = (emitted == gen.max_tokens).then_some("length");
        // The token is out of the engine now; its chunk may reach the
        // client before this task runs again, so it is timed before it goes.
        let now = Instant::now();
        match &mut sink {
            Sink::Collect(all) => all.push_str(&piece),
            Sink::Stream(_) => {
                if !sink
                    .send_event(sse(&gen.content_chunk(&piece, finish)), true)
                    .await
                {
                    return Outcome::Ended;
                }
            }
        }
        let latency = &mut shared.counters().latency;
        if emitted == granted {
            latency.ttft.observe((now - gen.start).as_secs_f64());
        } else {
            latency.itl.observe((now - last_sent).as_secs_f64());
        }
        last_sent = now;
    }
    {
        let mut c = shared.counters();
        c.requests_finished += 1;
        c.latency.e2e.observe(gen.start.elapsed().as_secs_f64());
    }
    match sink {
        Sink::Collect(all) => Outcome::Done(all),
        Sink::Stream(_) => {
            if gen.include_usage {
                let _ = sink.send(sse(&gen.usage_chunk(emitted))).await;
            }
            let _ = sink.send("data: [DONE]\n\n".to_string()).await;
            Outcome::Done(String::new())
        }
    }
}

/// Ends a generation the engine stopped: a hang keeps the connection open until the
/// client leaves; a dying vLLM sends its in-stream error.
async fn stop(sink: &mut Sink, phase: Phase) -> Outcome {
    match (phase, &sink) {
        (
            Phase::Dying {
                stream_error: Some(err),
            },
            Sink::Stream(_),
        ) => {
            let _ = sink.send(sse(&wire::stream_error(&err))).await;
            let _ = sink.send("data: [DONE]\n\n".to_string()).await;
            Outcome::Ended
        }
        (
            Phase::Dying {
                stream_error: Some(err),
            },
            Sink::Collect(_),
        ) => Outcome::Failed(err),
        _ => {
            sink.closed().await;
            Outcome::Ended
        }
    }
}

/// Begins a crash: streams stop at once (vLLM's end with an in-stream error), the
/// report is written, and the process dies the way the real server would.
fn start_crash(shared: Arc<Shared>, kind: CrashKind) {
    let vllm_reports_in_stream = shared.args.flavor == Flavor::Vllm
        && !matches!(
            kind,
            CrashKind::SignalCrash | CrashKind::OomKilled | CrashKind::ServerExited
        );
    shared.set_phase(Phase::Dying {
        stream_error: vllm_reports_in_stream.then(|| {
            texts()
                .constant(Flavor::Vllm, "engine_dead_message")
                .to_string()
        }),
    });
    let style = shared.style.clone();
    let tp = shared.args.tp;
    let die = move || {
        let (report, death) = faults::crash_report(&style, tp, kind, When::Serving);
        faults::write_report(&report);
        if vllm_reports_in_stream {
            // Let the in-stream errors reach the clients before the sockets close.
            std::thread::sleep(Duration::from_millis(150));
        }
        faults::end_process(death)
    };
    if std::thread::Builder::new()
        .name("sim-crash".into())
        .spawn(die.clone())
        .is_err()
    {
        die();
    }
}
