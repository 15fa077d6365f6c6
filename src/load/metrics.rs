//! Per-cell metrics, folded one finished request at a time into HDR histograms
//! (3 significant digits; a cell's memory does not grow with its requests).
//! Definitions (also in the README):
//! - TTFT: send → first chunk with non-empty text (a role-only chunk does not count).
//! - ITL: per token; a chunk carrying k tokens contributes its gap to the previous
//!   text chunk k times, divided by k.
//! - TPOT: (e2e − ttft) / (tokens − 1).
//! - decode tok/s (per request): (tokens − 1) / (t_last_chunk − t_first_chunk).
//! - output tok/s (aggregate): output tokens of successful requests / cell wall time.
//!   Token counts come from the server's `usage`; without it they are estimated
//!   from chunks and `tokens_estimated` is set.
//!
//! Percentiles are HDR's nearest rank, reported at the middle of the value's
//! bucket (within 0.05 % of the recorded value); means are exact sums.

use hdrhistogram::Histogram;

use super::prom::ServerFigures;
use crate::model::{Metrics, RequestError, RequestRecord, ServerTiming};

/// The server's `usage.completion_tokens` for a request, when it can be
/// true: no fewer than the chunks that carried text (each carries one token
/// or more) and no more than `max_tokens` (a server may not return more than
/// asked). `Err(said)` when it cannot.
pub fn trusted_usage(rec: &RequestRecord) -> Result<Option<u64>, u64> {
    let Some(said) = rec.completion_tokens else {
        return Ok(None);
    };
    let streamed = rec.chunks.len() as u64;
    let over = rec.max_tokens > 0 && said > u64::from(rec.max_tokens);
    if over || said < streamed {
        return Err(said);
    }
    Ok(Some(said))
}

/// Tokens carried by each text chunk: from `usage` when the chunk count agrees,
/// else one each (a chunk with text carries a token at least) and the tokens
/// beyond the chunks spread over them in proportion to their text (a server
/// that holds a partial character back sends two tokens in one chunk). A
/// `usage` that cannot be true counts what was streamed (and is estimated).
pub fn tokens_per_chunk(rec: &RequestRecord) -> (Vec<u64>, bool) {
    let n = rec.chunks.len() as u64;
    let (total, estimated) = match trusted_usage(rec) {
        Ok(Some(t)) => (t, false),
        Ok(None) | Err(_) => (n, true),
    };
    if n == 0 {
        return (Vec::new(), estimated);
    }
    let extra = total.saturating_sub(n);
    if extra == 0 {
        return (vec![1; n as usize], estimated);
    }
    let chars: u64 = rec
        .chunks
        .iter()
        .fold(0u64, |a, c| a.saturating_add(u64::from(c.1)))
        .max(1);
    let mut out = Vec::with_capacity(n as usize);
    let mut given = 0u64;
    let mut acc = 0u64;
    for c in &rec.chunks {
        acc = acc.saturating_add(u64::from(c.1));
        let upto = (extra as u128 * acc as u128 / chars as u128) as u64;
        out.push(1 + upto.saturating_sub(given));
        given = upto.max(given);
    }
    if let Some(last) = out.last_mut() {
        *last += extra.saturating_sub(given);
    }
    (out, estimated)
}

/// The fastest one stream of tokens can be produced, in tokens per second:
/// several times what any server sustains for one request (a tiny model on
/// a CPU streams ~3,500, a GPU with speculative decoding a few hundred to a
/// few thousand).
pub const FASTEST_STREAM_TOK_S: f64 = 50_000.0;

/// A request's chunks grouped by the read they came in (equal times: on the
/// wire clock a read's chunks share the arrival of its last segment).
struct Reads<'a> {
    chunks: &'a [(u64, u32)],
    tokens: &'a [u64],
}

/// One read: when, how many text chunks, how many tokens.
struct Read {
    at: u64,
    chunks: usize,
    tokens: u64,
}

impl<'a> Reads<'a> {
    fn of(chunks: &'a [(u64, u32)], tokens: &'a [u64]) -> Reads<'a> {
        let n = chunks.len().min(tokens.len());
        Reads {
            chunks: &chunks[..n],
            tokens: &tokens[..n],
        }
    }
}

impl Iterator for Reads<'_> {
    type Item = Read;
    fn next(&mut self) -> Option<Read> {
        let at = self.chunks.first()?.0;
        let n = self.chunks.iter().take_while(|c| c.0 == at).count();
        let tokens = self.tokens[..n]
            .iter()
            .fold(0u64, |a, t| a.saturating_add(*t));
        self.chunks = &self.chunks[n..];
        self.tokens = &self.tokens[n..];
        Some(Read {
            at,
            chunks: n,
            tokens,
        })
    }
}

/// Whether `tokens` that arrived over `span_ns` (first text chunk to last)
/// came faster than a stream can be produced: chunks the client read
/// together after falling behind, whose arrival times say nothing of the
/// stream.
pub fn collapsed(tokens: u64, span_ns: u64) -> bool {
    tokens > 1 && (span_ns as f64) < (tokens - 1) as f64 * 1e9 / FASTEST_STREAM_TOK_S
}

/// One metric's distribution: an HDR histogram of values scaled to integers,
/// with an exact sum for the mean.
///
/// The histogram starts with one bucket and grows to the largest value
/// recorded (up to `max`): a cell's ITLs of a few milliseconds take a few
/// KB, where a histogram sized for a day up front takes ~200 KB per metric,
/// zeroed page by page for every cell. Buckets depend only on the lowest
/// value and the digits, so the percentiles are the same either way.
#[derive(Debug, Clone)]
pub struct Hist {
    h: Histogram<u64>,
    /// Integer units per reported unit (1000: ms recorded in µs).
    scale: f64,
    /// The largest integer value kept; larger ones count as it.
    high: u64,
    sum: f64,
}

impl Hist {
    /// Values from 0 to `max` reported units, 3 significant digits.
    pub fn new(scale: f64, max: f64) -> Self {
        let high = ((max * scale) as u64).max(2048);
        let mut h = Histogram::new_with_bounds(1, 2048, 3)
            .or_else(|_| Histogram::new(3))
            .unwrap_or_else(|_| unreachable!("3 significant digits is always valid"));
        h.auto(true);
        Hist {
            h,
            scale,
            high,
            sum: 0.0,
        }
    }

    /// Milliseconds, recorded in µs, up to one day.
    pub fn ms() -> Self {
        Self::new(1000.0, 86_400_000.0)
    }

    /// Record `n` occurrences of `v` (reported units). Values beyond the range
    /// are clamped to it; negative and NaN values count as 0.
    pub fn record_n(&mut self, v: f64, n: u64) {
        if n == 0 {
            return;
        }
        let v = if v.is_finite() { v.max(0.0) } else { 0.0 };
        let raw = ((v * self.scale).round() as u64).min(self.high);
        if self.h.record_n(raw, n).is_err() {
            // Growing failed (it cannot below `high`): keep the count at
            // the top of what the histogram holds.
            self.h.saturating_record_n(raw, n);
        }
        self.sum += v * n as f64;
    }

    pub fn record(&mut self, v: f64) {
        self.record_n(v, 1);
    }

    pub fn count(&self) -> u64 {
        self.h.len()
    }

    /// The value at percentile `p` (0–100), or `None` without samples.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        if self.h.is_empty() {
            return None;
        }
        let raw = self.h.value_at_quantile((p / 100.0).clamp(0.0, 1.0));
        Some(self.h.median_equivalent(raw) as f64 / self.scale)
    }

    pub fn mean(&self) -> Option<f64> {
        (!self.h.is_empty()).then(|| self.sum / self.h.len() as f64)
    }
}

/// Errors kept per cell as examples: the first few, plus the first of each kind
/// (so a context overflow after many timeouts is still seen).
const ERROR_EXAMPLES: usize = 32;

/// A cell's measured requests, folded as each one finishes.
#[derive(Debug, Clone)]
pub struct CellStats {
    pub requests: u64,
    pub failed: u64,
    pub short: u64,
    pub output_tokens: u64,
    /// `max_tokens` summed over the successful requests.
    pub asked: u64,
    /// The fewest and most prompt tokens the server counted for a request.
    pub prompt_min: Option<u64>,
    pub prompt_max: Option<u64>,
    pub estimated: bool,
    pub max_tokens: u32,
    /// `completion_tokens` of the first few short requests.
    pub short_examples: Vec<u64>,
    /// Requests whose `usage` could not be true (their streamed count was
    /// used), and the first one's (said, streamed, max_tokens).
    pub usage_mismatch: u64,
    pub usage_example: Option<(u64, u64, u32)>,
    /// Successful requests whose text chunks arrived faster than a stream
    /// can be produced ([`collapsed`]): left out of decode, ITL and TPOT;
    /// the first one's (tokens, first-to-last chunk ns).
    pub starved: u64,
    pub starved_example: Option<(u64, u64)>,
    pub errors: Vec<RequestError>,
    /// The successful request with the most prompt and output tokens
    /// together (the server's prompt count and the tokens it returned).
    pub longest: Option<(u64, u64)>,
    /// The server's own timings of the successful requests that carried
    /// them (llama.cpp's `timings`) and agreed with what was measured here.
    timed: ServerSums,
    /// Requests whose own timings disagreed with what was measured here
    /// (left out of the server figures), and the first disagreement.
    pub timing_mismatch: u64,
    pub timing_example: Option<String>,
    /// Reads that held several text chunks of a successful request.
    pub coalesced: u64,
    /// Each chunk's delay between arriving and being read (ms): empty on
    /// the read clock.
    read_lag: Hist,
    ttft: Hist,
    itl: Hist,
    tpot: Hist,
    e2e: Hist,
    decode: Hist,
    prompt_tokens: Hist,
}

impl Default for CellStats {
    fn default() -> Self {
        Self::new()
    }
}

impl CellStats {
    pub fn new() -> Self {
        CellStats {
            requests: 0,
            failed: 0,
            short: 0,
            output_tokens: 0,
            asked: 0,
            prompt_min: None,
            prompt_max: None,
            estimated: false,
            max_tokens: 0,
            short_examples: Vec::new(),
            usage_mismatch: 0,
            usage_example: None,
            starved: 0,
            starved_example: None,
            errors: Vec::new(),
            longest: None,
            timed: ServerSums::default(),
            timing_mismatch: 0,
            timing_example: None,
            coalesced: 0,
            read_lag: Hist::ms(),
            ttft: Hist::ms(),
            itl: Hist::ms(),
            tpot: Hist::ms(),
            e2e: Hist::ms(),
            decode: Hist::new(1000.0, 1e9),
            prompt_tokens: Hist::new(1.0, 1e9),
        }
    }

    pub fn ok(&self) -> u64 {
        self.requests - self.failed
    }

    /// Fold one finished request.
    pub fn add(&mut self, r: &RequestRecord) {
        self.requests += 1;
        self.max_tokens = self.max_tokens.max(r.max_tokens);
        if let Some(e) = &r.error {
            self.failed += 1;
            let new_kind = !self.errors.iter().any(|k| {
                std::mem::discriminant(k) == std::mem::discriminant(e) && same_status(k, e)
            });
            if self.errors.len() < ERROR_EXAMPLES && (self.errors.len() < 8 || new_kind) {
                self.errors.push(e.clone());
            }
            return;
        }
        if let Err(said) = trusted_usage(r) {
            self.usage_mismatch += 1;
            self.usage_example
                .get_or_insert((said, r.chunks.len() as u64, r.max_tokens));
        }
        let (per_chunk, est) = tokens_per_chunk(r);
        self.estimated |= est;
        let tokens = per_chunk.iter().fold(0u64, |a, t| a.saturating_add(*t));
        self.output_tokens = self.output_tokens.saturating_add(tokens);
        self.asked = self.asked.saturating_add(u64::from(r.max_tokens));
        if tokens < r.max_tokens as u64 {
            self.short += 1;
            if self.short_examples.len() < 5 {
                self.short_examples.push(tokens);
            }
        }
        if let Some(t) = &r.server {
            match timing_disagrees(t, r, tokens, est) {
                None => self.timed.add(t),
                Some(why) => {
                    self.timing_mismatch += 1;
                    self.timing_example.get_or_insert(why);
                }
            }
        }
        if let Some(p) = r.prompt_tokens {
            let total = p.saturating_add(tokens);
            if self
                .longest
                .is_none_or(|(lp, lo)| lp.saturating_add(lo) < total)
            {
                self.longest = Some((p, tokens));
            }
            self.prompt_tokens.record(p as f64);
            self.prompt_min = Some(self.prompt_min.map_or(p, |m| m.min(p)));
            self.prompt_max = Some(self.prompt_max.map_or(p, |m| m.max(p)));
        }
        let e = r.end_ns.saturating_sub(r.start_ns) as f64 / 1e6;
        self.e2e.record(e);
        let Some(first) = r.first_token_ns() else {
            return;
        };
        let t = first.saturating_sub(r.start_ns) as f64 / 1e6;
        self.ttft.record(t);
        for &lag in &r.read_lag_us {
            self.read_lag.record(f64::from(lag) / 1e3);
        }
        let last = r.chunks.last().map_or(first, |c| c.0);
        let span_ns = last.saturating_sub(first);
        let starved = r.chunks.len() > 1 && collapsed(tokens, span_ns);
        // Chunks that came in one read share its time: the gaps inside it
        // are unknown, so a read is one step of the stream whose tokens
        // share the time since the read before (as a chunk's several
        // tokens do). Tokens of the first read came with the first token.
        let mut lead = None;
        let mut prev = first;
        for read in Reads::of(&r.chunks, &per_chunk) {
            self.coalesced += u64::from(read.chunks > 1);
            if lead.is_none() {
                lead = Some(read.tokens);
            } else if !starved {
                let gap = read.at.saturating_sub(prev) as f64 / 1e6;
                let k = read.tokens.max(1);
                self.itl.record_n(gap / k as f64, k);
            }
            prev = read.at;
        }
        if starved {
            // Read in one burst by a client that fell behind: its gaps are
            // the client's, not the stream's. Its TTFT and E2E stand (the
            // bytes had arrived by then); its decode, ITL and TPOT do not.
            self.starved += 1;
            self.starved_example.get_or_insert((tokens, span_ns));
            return;
        }
        let lead = lead.unwrap_or(0);
        if tokens > 1 {
            self.tpot.record((e - t) / (tokens - 1) as f64);
            let span = span_ns as f64 / 1e9;
            if span > 0.0 && tokens > lead {
                self.decode.record((tokens - lead) as f64 / span);
            }
        }
    }

    /// The cell's figures; `wall_ns` is its measured wall time.
    pub fn metrics(&self, wall_ns: u64) -> Metrics {
        let duration_s = wall_ns as f64 / 1e9;
        let per_s = |x: f64| {
            if duration_s > 0.0 {
                x / duration_s
            } else {
                0.0
            }
        };
        Metrics {
            requests: self.requests,
            failed_requests: self.failed,
            short_requests: self.short,
            output_tokens: self.output_tokens,
            output_tokens_asked: Some(self.asked),
            duration_s,
            output_tok_s: per_s(self.output_tokens as f64),
            request_per_s: per_s(self.ok() as f64),
            decode_tok_s_p50: self.decode.percentile(50.0),
            decode_tok_s_mean: self.decode.mean(),
            ttft_ms_p50: self.ttft.percentile(50.0).unwrap_or(0.0),
            ttft_ms_p90: self.ttft.percentile(90.0).unwrap_or(0.0),
            ttft_ms_p99: self.ttft.percentile(99.0).unwrap_or(0.0),
            ttft_ms_mean: self.ttft.mean().unwrap_or(0.0),
            itl_ms_p50: self.itl.percentile(50.0),
            itl_ms_p90: self.itl.percentile(90.0),
            itl_ms_p99: self.itl.percentile(99.0),
            itl_ms_mean: self.itl.mean(),
            tpot_ms_p50: self.tpot.percentile(50.0),
            e2e_ms_p50: self.e2e.percentile(50.0).unwrap_or(0.0),
            e2e_ms_p99: self.e2e.percentile(99.0).unwrap_or(0.0),
            prompt_tokens_mean: self.prompt_tokens.mean(),
            prompt_tokens_min: self.prompt_min,
            prompt_tokens_max: self.prompt_max,
            tokens_estimated: self.estimated,
            accept_len: None,
            gpu_mem_peak_mib: None,
            gpu_util_mean: None,
            client_lag_ms_p99: self.read_lag.percentile(99.0),
            coalesced_reads: (self.read_lag.count() > 0).then_some(self.coalesced),
            server_requests: None,
            server_ttft_ms_mean: None,
            server_itl_ms_mean: None,
            server_e2e_ms_mean: None,
            server_queue_ms_mean: None,
            prefix_cache_hit_pct: None,
        }
    }
}

/// Where a server's own timings of a request cannot be true, said with both
/// numbers: tokens it says it generated or evaluated that differ from those
/// that arrived or that its `usage` counted (by more than one), or time it
/// says it spent that is longer than the request took here (the server's
/// time is inside ours; 5 % and 5 ms allow for the clocks' granularity).
fn timing_disagrees(
    t: &ServerTiming,
    r: &RequestRecord,
    tokens: u64,
    estimated: bool,
) -> Option<String> {
    let apart = |a: u64, b: u64| a.abs_diff(b) > 1;
    if let Some(n) = t.predicted_n {
        if !estimated && apart(n, tokens) {
            return Some(format!(
                "it generated {n} tokens (timings.predicted_n), {tokens} arrived"
            ));
        }
    }
    if let (Some(evaluated), Some(hit), Some(prompt)) = (t.prompt_n, t.cache_n, r.prompt_tokens) {
        let said = evaluated.saturating_add(hit);
        if apart(said, prompt) {
            return Some(format!(
                "its prompt was {said} tokens (timings.prompt_n {evaluated} + cache_n {hit}), its usage counted {prompt}"
            ));
        }
    }
    let longer = |said_ms: f64, ours_ms: f64| said_ms > ours_ms * 1.05 + 5.0;
    let e2e_ms = r.end_ns.saturating_sub(r.start_ns) as f64 / 1e6;
    if let Some(first) = r.first_token_ns() {
        let ttft_ms = first.saturating_sub(r.start_ns) as f64 / 1e6;
        if let Some(p) = t.prompt_ms.filter(|&p| longer(p, ttft_ms)) {
            return Some(format!(
                "its prompt took {p:.1} ms (timings.prompt_ms), the first token arrived {ttft_ms:.1} ms after the request was sent"
            ));
        }
    }
    if let (Some(p), Some(d)) = (t.prompt_ms, t.predicted_ms) {
        if longer(p + d, e2e_ms) {
            return Some(format!(
                "it spent {:.1} ms (timings.prompt_ms + predicted_ms), the whole request took {e2e_ms:.1} ms",
                p + d
            ));
        }
    }
    None
}

/// Sums of the server's own per-request timings, each figure with its own
/// count (a server may leave one out).
#[derive(Debug, Clone, Default)]
struct ServerSums {
    requests: u64,
    prompt: (u64, f64),
    /// Intervals between generated tokens (`predicted_n − 1`) and their time.
    decode: (u64, f64),
    e2e: (u64, f64),
    /// Prompt tokens found in the cache, and evaluated.
    cache: (u64, u64),
}

impl ServerSums {
    fn add(&mut self, t: &ServerTiming) {
        self.requests += 1;
        if let Some(ms) = t.prompt_ms {
            self.prompt = (self.prompt.0 + 1, self.prompt.1 + ms);
        }
        if let (Some(n), Some(ms)) = (t.predicted_n, t.predicted_ms) {
            if n > 1 {
                self.decode = (self.decode.0.saturating_add(n - 1), self.decode.1 + ms);
            }
        }
        if let (Some(p), Some(d)) = (t.prompt_ms, t.predicted_ms) {
            self.e2e = (self.e2e.0 + 1, self.e2e.1 + p + d);
        }
        if let (Some(hit), Some(evaluated)) = (t.cache_n, t.prompt_n) {
            self.cache = (
                self.cache.0.saturating_add(hit),
                self.cache.1.saturating_add(evaluated),
            );
        }
    }
}

impl CellStats {
    /// The server's own figures from the timings its requests carried, or
    /// `None` when none did: its TTFT (prompt evaluation), the time between
    /// its generated tokens, its end-to-end time (the two together), and the
    /// share of prompt tokens it found in its cache.
    pub fn server_timings(&self) -> Option<ServerFigures> {
        let t = &self.timed;
        if t.requests == 0 {
            return None;
        }
        let mean = |(n, sum): (u64, f64)| (n > 0).then(|| sum / n as f64);
        let (hit, evaluated) = t.cache;
        let looked_up = hit.saturating_add(evaluated);
        Some(ServerFigures {
            requests: Some(t.requests),
            ttft_ms: mean(t.prompt),
            itl_ms: mean(t.decode),
            e2e_ms: mean(t.e2e),
            queue_ms: None,
            cache_hit_pct: (looked_up > 0).then(|| hit as f64 / looked_up as f64 * 100.0),
            accept_len: None,
        })
    }
}

fn same_status(a: &RequestError, b: &RequestError) -> bool {
    match (a, b) {
        (RequestError::Http { status: x, .. }, RequestError::Http { status: y, .. }) => x == y,
        _ => true,
    }
}

/// Metrics over a list of records (tests and tools; cells fold as they go).
pub fn compute(records: &[RequestRecord], wall_ns: u64) -> Metrics {
    let mut s = CellStats::new();
    for r in records {
        s.add(r);
    }
    s.metrics(wall_ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn rec(start: u64, chunks: &[(u64, u32)], end: u64, usage: Option<u64>) -> RequestRecord {
        RequestRecord {
            id: None,
            start_ns: start * MS,
            chunks: chunks.iter().map(|&(t, c)| (t * MS, c)).collect(),
            end_ns: end * MS,
            prompt_tokens: Some(100),
            completion_tokens: usage,
            max_tokens: 4,
            finish_reason: Some("length".into()),
            error: None,
            server: None,
            read_lag_us: Vec::new(),
        }
    }

    /// Within HDR's resolution (3 significant digits, reported mid-bucket).
    #[track_caller]
    fn near(got: Option<f64>, want: f64) {
        let got = got.expect("a value");
        assert!(
            (got - want).abs() <= want.abs() * 0.0005 + 1e-3,
            "{got} is not within 0.05 % of {want}"
        );
    }

    fn timed(prompt_n: u64, cache_n: u64, prompt_ms: f64, predicted_n: u64) -> RequestRecord {
        let mut r = rec(0, &[(200, 5), (210, 5), (220, 5), (230, 5)], 231, Some(4));
        r.server = Some(ServerTiming {
            prompt_n: Some(prompt_n),
            cache_n: Some(cache_n),
            prompt_ms: Some(prompt_ms),
            predicted_n: Some(predicted_n),
            predicted_ms: Some(30.0),
        });
        r
    }

    /// Six tokens in four chunks of 1, 1, 6 and 6 characters, 10 ms apart:
    /// every chunk carries a token and the two extra go with the longer
    /// text, so the ITL is the 30 ms over the 5 tokens after the first
    /// (6 ms, the decode rate's inverse), not 30 ms over 7 samples as when
    /// a short chunk counted no token and its gap was taken whole.
    #[test]
    fn tokens_beyond_the_chunks_never_leave_a_chunk_without_one() {
        let mut r = rec(0, &[(100, 1), (110, 1), (120, 6), (130, 6)], 131, Some(6));
        r.max_tokens = 8;
        assert_eq!(tokens_per_chunk(&r), (vec![1, 1, 2, 2], false));
        let mut s = CellStats::new();
        s.add(&r);
        let m = s.metrics(131 * MS);
        assert_eq!(s.itl.count(), 5);
        near(m.itl_ms_mean, 6.0);
        near(m.decode_tok_s_mean, 5.0 / 0.030);
    }

    #[test]
    fn a_servers_own_timings_that_agree_are_its_figures() {
        let mut s = CellStats::new();
        s.add(&timed(60, 40, 150.0, 4));
        let f = s.server_timings().expect("timed");
        assert_eq!(f.ttft_ms, Some(150.0));
        assert_eq!(f.itl_ms, Some(10.0));
        assert_eq!(f.e2e_ms, Some(180.0));
        assert_eq!(f.cache_hit_pct, Some(40.0));
        assert_eq!(s.timing_mismatch, 0);
    }

    #[test]
    fn a_servers_own_timings_that_cannot_be_true_are_left_out_with_both_numbers() {
        for (r, said, ours) in [
            // 500 tokens generated, 4 arrived (and usage said 4).
            (timed(60, 40, 150.0, 500), "500 tokens", "4 arrived"),
            // A prompt of 1,000 tokens by its timings, 100 by its usage.
            (timed(960, 40, 150.0, 4), "1000 tokens", "usage counted 100"),
            // Its prompt took longer than the first token took to arrive.
            (timed(60, 40, 900.0, 4), "900.0 ms", "200.0 ms"),
        ] {
            let mut s = CellStats::new();
            s.add(&r);
            s.add(&timed(60, 40, 150.0, 4));
            assert_eq!(s.timing_mismatch, 1);
            let why = s.timing_example.clone().expect("said why");
            assert!(why.contains(said) && why.contains(ours), "{why}");
            let f = s.server_timings().expect("the honest request");
            assert_eq!(f.requests, Some(1));
            assert_eq!(f.ttft_ms, Some(150.0), "the false one is left out");
        }
        // Off by one token is a count's rounding, not a lie.
        let mut s = CellStats::new();
        s.add(&timed(61, 40, 150.0, 5));
        assert_eq!(s.timing_mismatch, 0);
    }

    #[test]
    fn one_token_per_chunk() {
        // Sent at 0, text at 200, 210, 220, 230, done at 231.
        let r = rec(0, &[(200, 5), (210, 5), (220, 5), (230, 5)], 231, Some(4));
        let m = compute(&[r], 1000 * MS);
        assert_eq!(m.output_tokens, 4);
        near(Some(m.ttft_ms_p50), 200.0);
        assert_eq!(m.ttft_ms_mean, 200.0, "means are exact");
        near(m.itl_ms_p50, 10.0);
        assert_eq!(m.itl_ms_mean, Some(10.0));
        near(m.tpot_ms_p50, (231.0 - 200.0) / 3.0);
        near(m.decode_tok_s_p50, 3.0 / 0.030);
        near(Some(m.e2e_ms_p50), 231.0);
        assert_eq!(m.prompt_tokens_mean, Some(100.0));
        assert_eq!(m.output_tok_s, 4.0);
        assert!(!m.tokens_estimated);
        assert_eq!(m.short_requests, 0);
    }

    #[test]
    fn multi_token_chunks_split_their_gap() {
        // Speculative decoding: 1 token, then 3 tokens 30 ms later.
        let r = rec(0, &[(100, 4), (130, 12)], 131, Some(4));
        let (k, est) = tokens_per_chunk(&r);
        assert_eq!(k, vec![1, 3]);
        assert!(!est);
        let m = compute(&[r], 1000 * MS);
        near(m.itl_ms_p50, 10.0);
        near(m.itl_ms_p99, 10.0);
        assert_eq!(
            m.itl_ms_mean,
            Some(10.0),
            "three tokens of 10 ms, not one of 30"
        );
    }

    #[test]
    fn missing_usage_is_estimated_from_chunks() {
        let r = rec(0, &[(50, 3), (60, 3)], 61, None);
        let m = compute(&[r], 1000 * MS);
        assert_eq!(m.output_tokens, 2);
        assert!(m.tokens_estimated);
        assert_eq!(m.short_requests, 1);
    }

    #[test]
    fn failed_requests_count_separately() {
        let ok = rec(0, &[(50, 3), (60, 3)], 61, Some(2));
        let mut bad = rec(0, &[], 5, None);
        bad.error = Some(RequestError::Timeout);
        let m = compute(&[ok, bad], 1000 * MS);
        assert_eq!(m.requests, 2);
        assert_eq!(m.failed_requests, 1);
        assert_eq!(m.output_tokens, 2);
        near(Some(m.ttft_ms_p50), 50.0);
        near(Some(m.e2e_ms_p99), 61.0);
    }

    #[test]
    fn a_request_without_text_counts_but_has_no_ttft() {
        let r = rec(0, &[], 40, Some(0));
        let m = compute(&[r], 1000 * MS);
        assert_eq!((m.requests, m.output_tokens), (1, 0));
        assert_eq!(m.ttft_ms_p50, 0.0);
        assert_eq!(m.itl_ms_p50, None);
        near(Some(m.e2e_ms_p50), 40.0);
    }

    #[test]
    fn percentiles_are_nearest_rank_within_resolution() {
        let mut h = Hist::ms();
        assert_eq!(h.percentile(50.0), None);
        for v in 1..=1000 {
            h.record(v as f64);
        }
        near(h.percentile(50.0), 500.0);
        near(h.percentile(90.0), 900.0);
        near(h.percentile(99.0), 990.0);
        near(h.percentile(100.0), 1000.0);
        assert_eq!(h.mean(), Some(500.5));
        // Out of range and nonsense values are clamped, never a panic.
        h.record(f64::NAN);
        h.record(-3.0);
        h.record(1e30);
        assert_eq!(h.count(), 1003);
    }

    #[test]
    fn a_histogram_grows_to_what_it_holds_and_reads_as_one_sized_for_a_day() {
        // Sized up front for a day, as the growing one is bounded.
        let mut fixed = Histogram::<u64>::new_with_bounds(1, 86_400_000_000, 3).unwrap();
        let mut h = Hist::ms();
        let values = [0.004, 0.5, 7.9, 8.0, 8.013, 12.7, 395.4, 61_000.0, 3.6e6];
        for v in values {
            h.record(v);
            fixed.saturating_record((v * 1000.0).round() as u64);
        }
        for p in [0.0, 10.0, 50.0, 90.0, 99.0, 100.0] {
            let raw = fixed.value_at_quantile(p / 100.0);
            assert_eq!(
                h.percentile(p),
                Some(fixed.median_equivalent(raw) as f64 / 1000.0),
                "p{p}"
            );
        }
        // ITLs of milliseconds keep a few buckets, not a day's worth.
        let mut itl = Hist::ms();
        for v in values.iter().take(6) {
            itl.record(*v);
        }
        let (grown, day) = (itl.h.distinct_values(), fixed.distinct_values());
        assert!(grown * 4 < day, "{grown} counters against {day}");
        // Past a day is a day, as before.
        h.record(1e12);
        assert!((h.percentile(100.0).unwrap() - 86_400_000.0).abs() < 86_400.0);
    }

    #[test]
    fn error_examples_keep_the_first_of_each_kind() {
        let mut s = CellStats::new();
        for _ in 0..100 {
            let mut r = rec(0, &[], 1, None);
            r.error = Some(RequestError::Timeout);
            s.add(&r);
        }
        let mut r = rec(0, &[], 1, None);
        r.error = Some(RequestError::Http {
            status: 400,
            body: "too long".into(),
        });
        s.add(&r);
        assert_eq!(s.failed, 101);
        assert!(s.errors.len() <= ERROR_EXAMPLES);
        assert!(s
            .errors
            .iter()
            .any(|e| matches!(e, RequestError::Http { status: 400, .. })));
    }

    /// What the hands-on round saw on a loaded machine: 16 chunks read
    /// within 0.06 ms (a decode rate of 250,000 tok/s). Such a request is
    /// counted as starved and none of its per-request rates reach the cell's
    /// figures; a paced one beside it is measured as before.
    #[test]
    fn chunks_read_in_one_burst_are_not_a_decode_rate() {
        let burst: Vec<(u64, u32)> = (0..16).map(|i| (50_000_000 + i * 4_000, 4)).collect();
        let paced: Vec<(u64, u32)> = (0..16).map(|i| (50_000_000 + i * 10_000_000, 4)).collect();
        let rec = |chunks: &[(u64, u32)]| RequestRecord {
            start_ns: 0,
            chunks: chunks.to_vec(),
            end_ns: chunks.last().unwrap().0 + 1_000,
            prompt_tokens: Some(100),
            completion_tokens: Some(16),
            max_tokens: 16,
            ..Default::default()
        };
        let mut s = CellStats::new();
        s.add(&rec(&burst));
        assert_eq!((s.starved, s.starved_example), (1, Some((16, 60_000))));
        let m = s.metrics(1_000_000_000);
        assert_eq!(m.decode_tok_s_mean, None);
        assert_eq!(m.itl_ms_mean, None);
        assert_eq!(m.tpot_ms_p50, None);
        // Its tokens and its TTFT (an upper bound) still count.
        assert_eq!(m.output_tokens, 16);
        assert!((m.ttft_ms_mean - 50.0).abs() < 0.1, "{}", m.ttft_ms_mean);
        s.add(&rec(&paced));
        let m = s.metrics(1_000_000_000);
        assert_eq!(s.starved, 1);
        let decode = m.decode_tok_s_mean.unwrap();
        assert!((decode - 100.0).abs() < 0.5, "{decode}");
        assert!((m.itl_ms_mean.unwrap() - 10.0).abs() < 0.05);
        // One token, or one chunk carrying them all, is no burst.
        assert!(!collapsed(1, 0));
        assert!(collapsed(16, 60_000));
        assert!(!collapsed(16, 15 * 20_000 + 1));
    }

    /// A server's `usage` that cannot be true is not trusted: more tokens
    /// than `max_tokens` (16 chunks said to be 16,000 tokens, or 2^64 − 1),
    /// or fewer than the chunks that carried text. What was streamed counts,
    /// and the cell knows how many and the first one's numbers.
    #[test]
    fn usage_that_cannot_be_true_counts_what_was_streamed() {
        let chunks: Vec<(u64, u32)> = (0..16).map(|i| (100 + i, 3)).collect();
        let lying = |said: u64| RequestRecord {
            max_tokens: 16,
            ..rec(0, &chunks, 120, Some(said))
        };
        let mut s = CellStats::new();
        s.add(&lying(16_000));
        s.add(&lying(u64::MAX));
        s.add(&lying(3));
        s.add(&lying(16));
        assert_eq!(s.output_tokens, 64, "four requests of 16 streamed tokens");
        assert_eq!(s.usage_mismatch, 3);
        assert_eq!(s.usage_example, Some((16_000, 16, 16)));
        assert!(s.estimated, "the streamed count is an estimate");
        let m = s.metrics(1000 * MS);
        assert_eq!(m.output_tok_s, 64.0);
        // Usage over the streamed chunks and within max_tokens is true
        // (speculative decoding sends several tokens a chunk).
        let mut honest = CellStats::new();
        honest.add(&RequestRecord {
            max_tokens: 64,
            ..rec(0, &chunks, 120, Some(48))
        });
        assert_eq!((honest.output_tokens, honest.usage_mismatch), (48, 0));
    }

    /// Without `usage` the prompt is unknown: null, not 0 tokens.
    #[test]
    fn no_usage_leaves_the_prompt_unknown() {
        let r = RequestRecord {
            prompt_tokens: None,
            ..rec(0, &[(200, 5), (210, 5)], 231, None)
        };
        let m = compute(&[r], 1000 * MS);
        assert_eq!(m.prompt_tokens_mean, None);
        assert_eq!((m.prompt_tokens_min, m.prompt_tokens_max), (None, None));
        let v = serde_json::to_value(&m).unwrap();
        assert!(v["prompt_tokens_mean"].is_null(), "{v}");
    }
}
