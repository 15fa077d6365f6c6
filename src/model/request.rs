//! One measured request as `requests/<cell>.jsonl` keeps it: its timeline
//! ([`RequestRecord`]) and, when it did not complete, why ([`RequestError`]).

use serde::{Deserialize, Serialize};

/// Which clock a request's chunk times are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clock {
    /// When the bytes reached the machine: the kernel's receive timestamp
    /// (Linux's `SO_TIMESTAMPNS`).
    Wire,
    /// When the client read them.
    Read,
}

impl Clock {
    /// The clock this process times chunks on: the wire's where the platform
    /// has receive timestamps (Linux), unless `SWEEPTOP_CLOCK=read` asks
    /// for the read time (to compare the two).
    pub fn in_use() -> Clock {
        static IN_USE: std::sync::OnceLock<Clock> = std::sync::OnceLock::new();
        *IN_USE.get_or_init(|| {
            let asked_read = std::env::var("SWEEPTOP_CLOCK").is_ok_and(|v| v == "read");
            if cfg!(target_os = "linux") && !asked_read {
                Clock::Wire
            } else {
                Clock::Read
            }
        })
    }
}

/// Why a request did not complete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RequestError {
    /// Non-2xx status with the (truncated) body.
    Http {
        status: u16,
        body: String,
    },
    /// An `error` object inside a 200 stream.
    InStream {
        body: String,
    },
    Connection {
        message: String,
    },
    Timeout,
    /// The stream ended without `[DONE]`.
    Truncated,
    Malformed {
        message: String,
    },
    /// The stream carried more text chunks than `max_tokens` allows (with a
    /// margin): read no further, the request is not a measurement.
    Overlong {
        streamed: u64,
        max_tokens: u32,
    },
}

/// Everything measured about one request. Times are nanoseconds since the cell
/// started, taken when the bytes arrived.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// The server's id for the request (its stream's `id`, at most 128
    /// bytes): to find it in the server's own log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub start_ns: u64,
    /// Arrival of every chunk that carried text, with its text length in
    /// bytes: on the wire clock (the kernel's receive time) where the
    /// platform gives it, else when the client read it. Chunks that came in
    /// one read share its time (the last segment's arrival).
    pub chunks: Vec<(u64, u32)>,
    /// For each chunk, how long after arriving the client read it (µs): the
    /// client's own scheduling delay. Empty on the read clock.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_lag_us: Vec<u32>,
    pub end_ns: u64,
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub max_tokens: u32,
    pub finish_reason: Option<String>,
    pub error: Option<RequestError>,
    /// The server's own timing of the request, when its stream says it
    /// (llama.cpp's `timings`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerTiming>,
}

/// One request as the server timed it: llama.cpp's `timings` object in the
/// stream's last chunk. Each figure is kept only when it can be true (a
/// finite, non-negative number); a missing or broken one is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ServerTiming {
    /// Prompt tokens it evaluated, and those it found in its cache instead.
    pub prompt_n: Option<u64>,
    pub cache_n: Option<u64>,
    /// Evaluating the prompt, to the first token: its TTFT.
    pub prompt_ms: Option<f64>,
    /// Tokens generated, and the time generating them took.
    pub predicted_n: Option<u64>,
    pub predicted_ms: Option<f64>,
}

impl RequestRecord {
    pub fn ok(&self) -> bool {
        self.error.is_none()
    }
    pub fn first_token_ns(&self) -> Option<u64> {
        self.chunks.first().map(|c| c.0)
    }
}
