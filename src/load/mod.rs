//! Load generation: the OpenAI-compatible streaming client, prompts of exact
//! token length, closed-loop cells, and per-cell metrics. Never decides whether
//! a cell failed (that is `detect`).

pub mod about;
mod cell;
mod chunk;
pub mod client;
pub mod conn;
mod endpoints;
mod error;
#[cfg(test)]
mod fuzz;
pub mod metrics;
pub mod prom;
pub mod prompt;
mod rounds;
pub mod sse;
#[cfg(all(test, target_os = "linux"))]
mod stalled;
pub mod tags;
pub mod tokenizer;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

pub use about::{about, About};
pub use cell::run_cell;
pub use client::{http_client, Target};
pub use conn::Pool;
pub use endpoints::{tokenize, usage_prompt_tokens};
pub use error::{LoadError, PromptSourceError, SideError, UrlProblem};
pub use metrics::CellStats;

/// How requests arrive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrival {
    /// Closed loop: `concurrency` requests in flight, a new one as each ends.
    Closed,
    /// Open loop: Poisson arrivals at `rate` requests/s, optionally capped at
    /// `concurrency` in flight (arrivals wait for a free slot).
    Poisson { rate: f64, capped: bool },
}

/// What one cell sends.
#[derive(Debug, Clone)]
pub struct CellLoad {
    pub arrival: Arrival,
    pub concurrency: u32,
    /// Measured requests (with `duration`, whichever ends first).
    pub requests: u32,
    pub duration: Option<Duration>,
    pub warmup: u32,
    pub max_tokens: u32,
    /// The prompt bodies (cycled); each request gets its own tag.
    pub prompts: Arc<Vec<client::JsonText>>,
    pub tags: tags::Tags,
    pub request_timeout: Duration,
    pub stall_timeout: Duration,
}

/// What one cell measured. The records themselves went to the sink.
#[derive(Debug, Default)]
pub struct CellRun {
    pub stats: CellStats,
    pub wall_ns: u64,
    /// When the measured requests began (Unix ms): with `wall_ns`, the
    /// window the cell's figures are of.
    pub started_ms: u64,
    /// Requests were in flight and no byte arrived for this long.
    pub stalled_for: Option<Duration>,
    /// How many requests were in flight when the cell ended (a stall's
    /// evidence).
    pub in_flight: u64,
    /// The server's `/metrics` page read just before the measured requests
    /// (after the warm-up) and after them; none without the page.
    pub server: Option<prom::Readings>,
}

impl CellRun {
    /// The measured requests' window, in Unix ms: what a GPU sample is
    /// judged against.
    pub fn window_ms(&self) -> (u64, u64) {
        (
            self.started_ms,
            self.started_ms.saturating_add(self.wall_ns / 1_000_000),
        )
    }

    /// The server's own figures over the measured requests, when it has a
    /// `/metrics` page (`None`), and when they are of these requests alone
    /// (`Err` says why not).
    pub fn server_figures(&self) -> Option<Result<prom::ServerFigures, prom::NotTheseRequests>> {
        let counted = self.server.as_ref().map(|r| {
            r.figures()
                .of_these_requests(self.stats.ok(), self.stats.requests)
        });
        // A server that timed each request itself (llama.cpp) timed exactly
        // these: its figures come first, whatever its counters say.
        match (counted, self.stats.server_timings()) {
            (counted, None) => counted,
            (Some(Ok(counted)), Some(timed)) => Some(Ok(timed.or(counted))),
            (Some(Err(_)) | None, Some(timed)) => Some(Ok(timed)),
        }
    }
}
