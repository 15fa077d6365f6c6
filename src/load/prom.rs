//! The server's own figures, from its Prometheus page (`/metrics`), read once
//! before a cell's measured requests and once after: the deltas of its latency
//! histograms (the server's clock), of its prefix-cache counters, and of its
//! speculative-decoding counters. vLLM and SGLang names are known; a page in
//! another shape gives null figures, never an error.

use std::collections::HashMap;
use std::time::Duration;

use crate::model::Metrics;

/// The most of a `/metrics` page read; a larger one is cut there.
const MAX_PAGE: usize = 8 << 20;
/// The most series kept from one page.
const MAX_SERIES: usize = 20_000;

/// One reading of the page: each series' value summed over its label sets
/// (engines, data-parallel ranks, finish reasons). Histogram buckets and
/// `_created` timestamps are left out; `_sum` and `_count` are kept.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    series: HashMap<String, f64>,
}

impl Scrape {
    pub fn parse(text: &str) -> Scrape {
        let mut series: HashMap<String, f64> = HashMap::new();
        for line in text.lines() {
            let line = line.trim_start();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let end = line
                .find(|c: char| c == '{' || c.is_whitespace())
                .unwrap_or(line.len());
            let name = &line[..end];
            if name.is_empty() || name.ends_with("_bucket") || name.ends_with("_created") {
                continue;
            }
            let rest = &line[end..];
            let rest = match rest.strip_prefix('{') {
                Some(labels) => match labels.rfind('}') {
                    Some(i) => &labels[i + 1..],
                    None => continue,
                },
                None => rest,
            };
            let Some(value) = rest
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite())
            else {
                continue;
            };
            if let Some(sum) = series.get_mut(name) {
                *sum += value;
            } else if series.len() < MAX_SERIES {
                series.insert(name.to_string(), value);
            }
        }
        Scrape { series }
    }

    pub fn get(&self, name: &str) -> Option<f64> {
        self.series.get(name).copied()
    }

    /// Whether the page has any latency histogram sweeptop knows.
    pub fn knows_latency(&self) -> bool {
        HISTOGRAMS
            .iter()
            .flat_map(|(_, names)| names.iter())
            .any(|n| self.get(&format!("{n}_count")).is_some())
    }
}

/// The server's page, if it has one that answers 200 within 5 s.
pub async fn scrape(client: &reqwest::Client, base: &str) -> Option<Scrape> {
    let mut resp =
        super::endpoints::get_ok(client, &format!("{base}/metrics"), Duration::from_secs(5))
            .await?;
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_PAGE {
            body.truncate(MAX_PAGE);
            break;
        }
    }
    Some(Scrape::parse(&String::from_utf8_lossy(&body)))
}

/// The page read before a cell's measured requests and after them.
#[derive(Debug, Clone, PartialEq)]
pub struct Readings {
    pub before: Scrape,
    pub after: Scrape,
}

impl Readings {
    pub fn figures(&self) -> ServerFigures {
        ServerFigures::between(&self.before, &self.after)
    }
}

/// How long the server's counters may lag the last response before the
/// reading is taken as it is.
const SETTLE: Duration = Duration::from_secs(1);

/// Read the page after the measured requests. A server records a request's
/// latencies as it finishes it, which can be a moment after the client has
/// read its last byte: the page is read again (every 50 ms, for at most
/// [`SETTLE`]) until it counts at least the `finished` requests the client saw.
pub async fn read_after(
    client: &reqwest::Client,
    base: &str,
    mut before: Scrape,
    finished: u64,
) -> Option<Readings> {
    let deadline = tokio::time::Instant::now() + SETTLE;
    loop {
        let after = scrape(client, base).await?;
        let readings = Readings { before, after };
        let counted = readings.figures().requests;
        if counted.is_none_or(|n| n >= finished) || tokio::time::Instant::now() >= deadline {
            return Some(readings);
        }
        before = readings.before;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Which latency a histogram measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Latency {
    Ttft,
    Itl,
    E2e,
    Queue,
}

/// The histograms of each latency, by server: vLLM (before and after 0.11's
/// rename of the per-token histogram), SGLang.
const HISTOGRAMS: &[(Latency, &[&str])] = &[
    (
        Latency::Ttft,
        &[
            "vllm:time_to_first_token_seconds",
            "sglang:time_to_first_token_seconds",
        ],
    ),
    (
        Latency::Itl,
        &[
            "vllm:inter_token_latency_seconds",
            "vllm:time_per_output_token_seconds",
            "sglang:inter_token_latency_seconds",
        ],
    ),
    (
        Latency::E2e,
        &[
            "vllm:e2e_request_latency_seconds",
            "sglang:e2e_request_latency_seconds",
        ],
    ),
    (
        Latency::Queue,
        &[
            "vllm:request_queue_time_seconds",
            "sglang:queue_time_seconds",
        ],
    ),
];

/// The histogram names of one latency, by server.
fn names(which: Latency) -> &'static [&'static str] {
    HISTOGRAMS
        .iter()
        .find(|(l, _)| *l == which)
        .map_or(&[], |(_, n)| n)
}

/// Prefix-cache counters (hit tokens, queried tokens): vLLM, vLLM before
/// 0.10, SGLang (cached prompt tokens of all prompt tokens).
const CACHE: &[(&str, &str)] = &[
    (
        "vllm:prefix_cache_hits_total",
        "vllm:prefix_cache_queries_total",
    ),
    (
        "vllm:gpu_prefix_cache_hits_total",
        "vllm:gpu_prefix_cache_queries_total",
    ),
    ("sglang:cached_tokens_total", "sglang:prompt_tokens_total"),
];

/// vLLM's speculative-decoding counters: drafts (verify steps) and accepted
/// draft tokens; mean acceptance length = 1 + Δaccepted / Δdrafts.
const SPEC_DRAFTS: &str = "vllm:spec_decode_num_drafts_total";
const SPEC_ACCEPTED: &str = "vllm:spec_decode_num_accepted_tokens_total";
/// SGLang's gauge: the acceptance length of its latest decode batches.
const SGLANG_ACCEPT: &str = "sglang:spec_accept_length";

/// What the server's own counters say about the requests between two readings.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerFigures {
    /// Requests the server finished (its end-to-end histogram's count).
    pub requests: Option<u64>,
    pub ttft_ms: Option<f64>,
    pub itl_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    pub queue_ms: Option<f64>,
    /// Prompt tokens found in the prefix cache, in % of those looked up.
    pub cache_hit_pct: Option<f64>,
    /// Mean acceptance length of speculative decoding (vLLM's counters).
    pub accept_len: Option<f64>,
}

impl ServerFigures {
    pub fn between(before: &Scrape, after: &Scrape) -> ServerFigures {
        let delta = |name: &str| Some(after.get(name)? - before.get(name).unwrap_or(0.0));
        let mean_ms = |which: Latency| {
            names(which).iter().find_map(|n| {
                let count = delta(&format!("{n}_count"))?;
                let sum = delta(&format!("{n}_sum"))?;
                (count > 0.0 && sum >= 0.0).then(|| sum / count * 1000.0)
            })
        };
        // The end-to-end histogram counts every finished request.
        let requests = names(Latency::E2e)
            .iter()
            .find_map(|n| delta(&format!("{n}_count")))
            .filter(|d| *d >= 0.0)
            .map(|d| d.round() as u64);
        let cache_hit_pct = CACHE.iter().find_map(|(hits, queries)| {
            let (h, q) = (delta(hits)?, delta(queries)?);
            (q > 0.0 && h >= 0.0).then(|| (h / q * 100.0).min(100.0))
        });
        let accept_len = match (delta(SPEC_DRAFTS), delta(SPEC_ACCEPTED)) {
            (Some(d), Some(a)) if d > 0.0 && a >= 0.0 => Some(1.0 + a / d),
            _ => None,
        };
        ServerFigures {
            requests,
            ttft_ms: mean_ms(Latency::Ttft),
            itl_ms: mean_ms(Latency::Itl),
            e2e_ms: mean_ms(Latency::E2e),
            queue_ms: mean_ms(Latency::Queue),
            cache_hit_pct,
            accept_len,
        }
    }
}

impl ServerFigures {
    /// The figures when they are of the client's requests alone: the server
    /// counted at least the `finished` requests the client saw end and at
    /// most the `sent` it sent. Otherwise why they are not kept (another
    /// client shared the server, or its counters lag or were reset).
    pub fn of_these_requests(
        self,
        finished: u64,
        sent: u64,
    ) -> Result<ServerFigures, NotTheseRequests> {
        match self.requests {
            Some(counted) if counted > sent => Err(NotTheseRequests::Shared { counted, sent }),
            Some(counted) if counted < finished => {
                Err(NotTheseRequests::Incomplete { counted, finished })
            }
            _ => Ok(self),
        }
    }

    /// These figures, each missing one taken from `other`.
    pub fn or(self, other: ServerFigures) -> ServerFigures {
        ServerFigures {
            requests: self.requests.or(other.requests),
            ttft_ms: self.ttft_ms.or(other.ttft_ms),
            itl_ms: self.itl_ms.or(other.itl_ms),
            e2e_ms: self.e2e_ms.or(other.e2e_ms),
            queue_ms: self.queue_ms.or(other.queue_ms),
            cache_hit_pct: self.cache_hit_pct.or(other.cache_hit_pct),
            accept_len: self.accept_len.or(other.accept_len),
        }
    }

    /// Put the figures in a cell's metrics.
    pub fn fill(&self, m: &mut Metrics) {
        m.server_requests = self.requests;
        m.server_ttft_ms_mean = self.ttft_ms;
        m.server_itl_ms_mean = self.itl_ms;
        m.server_e2e_ms_mean = self.e2e_ms;
        m.server_queue_ms_mean = self.queue_ms;
        m.prefix_cache_hit_pct = self.cache_hit_pct;
    }
}

/// The largest mean acceptance length a speculative decoder can report: a
/// verify step accepts at most its draft, and no drafter proposes this many.
pub const MAX_ACCEPT_LEN: f64 = 64.0;

/// Whether a mean acceptance length is one a server could measure: finite,
/// at least the one token every step emits, at most [`MAX_ACCEPT_LEN`].
pub fn plausible_accept_len(v: f64) -> bool {
    v.is_finite() && (1.0..=MAX_ACCEPT_LEN).contains(&v)
}

/// How far past the cell's wall time a server's latency may read (its
/// clock and the client's tick apart).
const LATENCY_SLACK_MS: f64 = 1000.0;

impl ServerFigures {
    /// The figures with each impossible value taken out, and what was taken
    /// out, in words with the value: a latency not finite, negative, or
    /// longer than the `window_ms` the measured requests ran in; a cache hit
    /// share outside 0–100 %; an acceptance length outside 1–64.
    pub fn bounded(mut self, window_ms: f64) -> (ServerFigures, Vec<String>) {
        let mut dropped = Vec::new();
        let longest = window_ms.max(0.0) + LATENCY_SLACK_MS;
        for (name, v) in [
            ("TTFT", &mut self.ttft_ms),
            ("ITL", &mut self.itl_ms),
            ("E2E latency", &mut self.e2e_ms),
            ("queue time", &mut self.queue_ms),
        ] {
            if let Some(x) = *v {
                if !(x.is_finite() && (0.0..=longest).contains(&x)) {
                    dropped.push(format!(
                        "the server's mean {name} {x} ms is impossible for requests that ran within {window_ms:.0} ms: not recorded"
                    ));
                    *v = None;
                }
            }
        }
        if let Some(x) = self.cache_hit_pct.filter(|x| !(0.0..=100.0).contains(x)) {
            dropped.push(format!(
                "the server's prefix cache hit share {x} % is impossible: not recorded"
            ));
            self.cache_hit_pct = None;
        }
        if let Some(x) = self.accept_len.filter(|x| !plausible_accept_len(*x)) {
            dropped.push(format!(
                "the server's acceptance length {x} is impossible (1 to {MAX_ACCEPT_LEN}): not recorded"
            ));
            self.accept_len = None;
        }
        (self, dropped)
    }
}

/// Why the server's figures over a cell are not kept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotTheseRequests {
    #[error("the server finished {counted} requests during the cell, sweeptop sent {sent}: another client is using it, so its figures are not this cell's")]
    Shared { counted: u64, sent: u64 },
    #[error("the server counted {counted} finished requests, sweeptop saw {finished} end: its figures are incomplete")]
    Incomplete { counted: u64, finished: u64 },
}

/// Why the server's prefix cache was not flushed.
#[derive(Debug, thiserror::Error)]
pub enum FlushError {
    #[error("{0}")]
    Send(#[source] reqwest::Error),
    #[error("POST {path}: HTTP {status}")]
    Status { path: String, status: u16 },
    #[error("POST {path}: the server said it did not flush")]
    Refused { path: String },
}

/// Empty the server's prefix cache with `POST path`.
pub async fn flush_cache(
    client: &reqwest::Client,
    base: &str,
    path: &str,
) -> Result<(), FlushError> {
    let resp = client
        .post(format!("{base}{path}"))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .map_err(FlushError::Send)?;
    let status = resp.status();
    if !status.is_success() {
        return Err(FlushError::Status {
            path: path.to_string(),
            status: status.as_u16(),
        });
    }
    // vLLM answers 200 with {"success": false} when it could not.
    let body = super::endpoints::read_capped(resp, super::endpoints::MAX_JSON_BODY)
        .await
        .unwrap_or_default();
    match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(v) if v.get("success") == Some(&serde_json::Value::Bool(false)) => {
            Err(FlushError::Refused {
                path: path.to_string(),
            })
        }
        _ => Ok(()),
    }
}

/// SGLang's acceptance-length gauge as the cell ends (it has no counters).
pub fn sglang_accept_gauge(after: &Scrape) -> Option<f64> {
    after.get(SGLANG_ACCEPT).filter(|v| *v > 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the page names a prefix-cache counter pair sweeptop knows.
    fn knows_cache(s: &Scrape) -> bool {
        CACHE
            .iter()
            .any(|(h, q)| s.get(h).is_some() && s.get(q).is_some())
    }

    /// The shape of vLLM 0.32's page (CPU build, tiny model), cut to what is read.
    const VLLM_BEFORE: &str = "\
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine=\"0\",le=\"0.001\",model_name=\"tiny\"} 0.0
vllm:time_to_first_token_seconds_count{engine=\"0\",model_name=\"tiny\"} 2.0
vllm:time_to_first_token_seconds_sum{engine=\"0\",model_name=\"tiny\"} 0.09041404724121094
vllm:time_to_first_token_seconds_created{engine=\"0\",model_name=\"tiny\"} 1.796350614946426e+09
vllm:e2e_request_latency_seconds_count{engine=\"0\",model_name=\"tiny\"} 2.0
vllm:e2e_request_latency_seconds_sum{engine=\"0\",model_name=\"tiny\"} 0.5
vllm:request_queue_time_seconds_count{engine=\"0\",model_name=\"tiny\"} 2.0
vllm:request_queue_time_seconds_sum{engine=\"0\",model_name=\"tiny\"} 0.00018475500110071152
vllm:prefix_cache_queries_total{engine=\"0\",model_name=\"tiny\"} 1000.0
vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"tiny\"} 384.0
";

    #[test]
    fn deltas_of_vllm_histograms_and_counters() {
        let before = Scrape::parse(VLLM_BEFORE);
        assert_eq!(
            before.get("vllm:time_to_first_token_seconds_count"),
            Some(2.0)
        );
        assert_eq!(before.get("vllm:time_to_first_token_seconds_bucket"), None);
        assert_eq!(before.get("vllm:time_to_first_token_seconds_created"), None);
        assert!(before.knows_latency() && knows_cache(&before));
        // Two engines (data parallel): their series add up.
        let after = Scrape::parse(
            "vllm:time_to_first_token_seconds_count{engine=\"0\"} 4\n\
             vllm:time_to_first_token_seconds_count{engine=\"1\"} 2\n\
             vllm:time_to_first_token_seconds_sum{engine=\"0\"} 0.15041404724121094\n\
             vllm:time_to_first_token_seconds_sum{engine=\"1\"} 0.04\n\
             vllm:e2e_request_latency_seconds_count 6\n\
             vllm:e2e_request_latency_seconds_sum 1.3\n\
             vllm:prefix_cache_queries_total 1400\n\
             vllm:prefix_cache_hits_total 384\n\
             vllm:spec_decode_num_drafts_total 50\n\
             vllm:spec_decode_num_accepted_tokens_total 75\n",
        );
        let f = ServerFigures::between(&before, &after);
        assert_eq!(f.requests, Some(4));
        assert!((f.ttft_ms.unwrap() - 25.0).abs() < 1e-9, "{f:?}");
        assert!((f.e2e_ms.unwrap() - 200.0).abs() < 1e-9, "{f:?}");
        // The queue histogram is gone from the second page: no figure.
        assert_eq!(f.queue_ms, None);
        assert_eq!(f.itl_ms, None);
        assert_eq!(f.cache_hit_pct, Some(0.0));
        // Counters that appear during the cell count from zero.
        assert_eq!(f.accept_len, Some(2.5));
    }

    #[test]
    fn sglang_names() {
        let before = Scrape::parse(
            "sglang:time_to_first_token_seconds_sum{model_name=\"m\"} 1.0\n\
             sglang:time_to_first_token_seconds_count{model_name=\"m\"} 10\n\
             sglang:queue_time_seconds_sum{model_name=\"m\"} 0\n\
             sglang:queue_time_seconds_count{model_name=\"m\"} 10\n\
             sglang:cached_tokens_total{model_name=\"m\",cache_source=\"device\"} 100\n\
             sglang:prompt_tokens_total{model_name=\"m\"} 1000\n",
        );
        let after = Scrape::parse(
            "sglang:time_to_first_token_seconds_sum{model_name=\"m\"} 1.5\n\
             sglang:time_to_first_token_seconds_count{model_name=\"m\"} 15\n\
             sglang:queue_time_seconds_sum{model_name=\"m\"} 0.01\n\
             sglang:queue_time_seconds_count{model_name=\"m\"} 15\n\
             sglang:cached_tokens_total{model_name=\"m\",cache_source=\"device\"} 150\n\
             sglang:cached_tokens_total{model_name=\"m\",cache_source=\"host\"} 50\n\
             sglang:prompt_tokens_total{model_name=\"m\"} 1400\n\
             sglang:spec_accept_length{model_name=\"m\"} 3.1\n",
        );
        let f = ServerFigures::between(&before, &after);
        assert!((f.ttft_ms.unwrap() - 100.0).abs() < 1e-9);
        assert!((f.queue_ms.unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(f.cache_hit_pct, Some(25.0));
        assert_eq!(f.accept_len, None);
        assert_eq!(sglang_accept_gauge(&after), Some(3.1));
        assert_eq!(sglang_accept_gauge(&before), None);
    }

    #[test]
    fn pages_in_unexpected_shapes_give_null_figures() {
        for page in [
            "",
            "<html>not prometheus</html>",
            "vllm:time_to_first_token_seconds_count{engine=\"0\" 3\n",
            "vllm:time_to_first_token_seconds_count NaN\nvllm:time_to_first_token_seconds_sum +Inf\n",
            "vllm:time_to_first_token_seconds_count{a=\"}\"} x\n",
        ] {
            let s = Scrape::parse(page);
            let f = ServerFigures::between(&s, &s);
            assert_eq!(f, ServerFigures::default(), "{page:?}");
        }
        // A counter reset (the server restarted) gives no figure, not a negative one.
        let before = Scrape::parse(VLLM_BEFORE);
        let after = Scrape::parse(
            "vllm:time_to_first_token_seconds_count 1\nvllm:time_to_first_token_seconds_sum 0.01\nvllm:prefix_cache_queries_total 10\nvllm:prefix_cache_hits_total 0\n",
        );
        let f = ServerFigures::between(&before, &after);
        assert_eq!((f.ttft_ms, f.cache_hit_pct), (None, None));
        // A label value holding a brace is read past.
        let s = Scrape::parse("x{a=\"}\",b=\"{\"} 2\n");
        assert_eq!(s.get("x"), Some(2.0));
    }

    #[test]
    fn impossible_figures_are_taken_out_and_said() {
        let lying = ServerFigures {
            requests: Some(4),
            ttft_ms: Some(-3.0),
            itl_ms: Some(12.0),
            e2e_ms: Some(1e15),
            queue_ms: Some(f64::NAN),
            cache_hit_pct: Some(250.0),
            accept_len: Some(1e15),
        };
        let (kept, said) = lying.bounded(5_000.0);
        assert_eq!(
            kept,
            ServerFigures {
                requests: Some(4),
                itl_ms: Some(12.0),
                ..ServerFigures::default()
            }
        );
        assert_eq!(said.len(), 5, "{said:?}");
        assert!(said
            .iter()
            .any(|s| s.contains("acceptance length 1000000000000000")));
        assert!(said.iter().any(|s| s.contains("TTFT -3 ms")));
        // Plausible figures pass untouched.
        let fine = ServerFigures {
            ttft_ms: Some(80.0),
            accept_len: Some(3.2),
            cache_hit_pct: Some(0.0),
            ..ServerFigures::default()
        };
        assert_eq!(fine.bounded(5_000.0), (fine, Vec::new()));
        assert!(!plausible_accept_len(0.5) && !plausible_accept_len(f64::INFINITY));
    }
}
