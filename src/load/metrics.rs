//! Per-cell metrics from per-request timelines. Definitions (also in the README):
//! - TTFT: send → first chunk with non-empty text (a role-only chunk does not count).
//! - ITL: per token; a chunk carrying k tokens contributes its gap to the previous
//!   text chunk k times, divided by k.
//! - TPOT: (e2e − ttft) / (tokens − 1).
//! - decode tok/s (per request): (tokens − 1) / (t_last_chunk − t_first_chunk).
//! - output tok/s (aggregate): output tokens of successful requests / cell wall time.
//!   Token counts come from the server's `usage`; without it they are estimated
//!   from chunks and `tokens_estimated` is set.

use serde::{Deserialize, Serialize};

use super::client::RequestRecord;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub requests: u64,
    pub failed_requests: u64,
    /// Successful requests that returned fewer tokens than asked.
    pub short_requests: u64,
    pub output_tokens: u64,
    pub duration_s: f64,
    pub output_tok_s: f64,
    pub request_per_s: f64,
    pub decode_tok_s_p50: Option<f64>,
    pub decode_tok_s_mean: Option<f64>,
    pub ttft_ms_p50: f64,
    pub ttft_ms_p90: f64,
    pub ttft_ms_p99: f64,
    pub ttft_ms_mean: f64,
    pub itl_ms_p50: Option<f64>,
    pub itl_ms_p90: Option<f64>,
    pub itl_ms_p99: Option<f64>,
    pub itl_ms_mean: Option<f64>,
    pub tpot_ms_p50: Option<f64>,
    pub e2e_ms_p50: f64,
    pub e2e_ms_p99: f64,
    pub prompt_tokens_mean: f64,
    pub tokens_estimated: bool,
    pub accept_len: Option<f64>,
    pub gpu_mem_peak_mib: Option<u64>,
    pub gpu_util_mean: Option<f64>,
}

/// Linear-interpolated percentile (numpy's default) of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (p / 100.0).clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    let frac = rank - lo as f64;
    Some(sorted[lo] + (sorted[hi] - sorted[lo]) * frac)
}

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn sort(v: &mut [f64]) {
    v.sort_by(|a, b| a.total_cmp(b));
}

/// Tokens carried by each text chunk: from `usage` when the chunk count agrees,
/// else spread over chunks in proportion to their text.
pub fn tokens_per_chunk(rec: &RequestRecord) -> (Vec<u64>, bool) {
    let n = rec.chunks.len() as u64;
    let (total, estimated) = match rec.completion_tokens {
        Some(t) => (t, false),
        None => (n, true),
    };
    if n == 0 {
        return (Vec::new(), estimated);
    }
    if total == n {
        return (vec![1; n as usize], estimated);
    }
    let chars: u64 = rec.chunks.iter().map(|c| c.1 as u64).sum::<u64>().max(1);
    let mut out = Vec::with_capacity(n as usize);
    let mut given = 0u64;
    let mut acc = 0u64;
    for c in &rec.chunks {
        acc += c.1 as u64;
        let upto = (total as u128 * acc as u128 / chars as u128) as u64;
        out.push(upto.saturating_sub(given));
        given = upto.max(given);
    }
    if let Some(last) = out.last_mut() {
        *last += total.saturating_sub(given);
    }
    (out, estimated)
}

/// Metrics over the measured requests of a cell. `wall_ns` is the cell's
/// measured wall time.
pub fn compute(records: &[RequestRecord], wall_ns: u64) -> Metrics {
    let ok: Vec<&RequestRecord> = records.iter().filter(|r| r.ok()).collect();
    let mut ttft = Vec::with_capacity(ok.len());
    let mut e2e = Vec::with_capacity(ok.len());
    let mut itl = Vec::new();
    let mut tpot = Vec::new();
    let mut decode = Vec::new();
    let mut output_tokens = 0u64;
    let mut prompt_tokens = Vec::new();
    let mut estimated = false;
    let mut short = 0;
    for r in &ok {
        let (per_chunk, est) = tokens_per_chunk(r);
        estimated |= est;
        let tokens: u64 = per_chunk.iter().sum();
        output_tokens += tokens;
        if tokens < r.max_tokens as u64 {
            short += 1;
        }
        if let Some(p) = r.prompt_tokens {
            prompt_tokens.push(p as f64);
        }
        let e = r.end_ns.saturating_sub(r.start_ns) as f64 / 1e6;
        e2e.push(e);
        let Some(first) = r.first_token_ns() else {
            continue;
        };
        let t = first.saturating_sub(r.start_ns) as f64 / 1e6;
        ttft.push(t);
        for (w, &k) in r.chunks.windows(2).zip(&per_chunk[1..]) {
            let gap = w[1].0.saturating_sub(w[0].0) as f64 / 1e6;
            let k = k.max(1);
            for _ in 0..k {
                itl.push(gap / k as f64);
            }
        }
        if tokens > 1 {
            let last = r.chunks.last().map_or(first, |c| c.0);
            tpot.push((e - t) / (tokens - 1) as f64);
            let span = last.saturating_sub(first) as f64 / 1e9;
            if span > 0.0 {
                decode.push((tokens - 1) as f64 / span);
            }
        }
    }
    for v in [&mut ttft, &mut e2e, &mut itl, &mut tpot, &mut decode] {
        sort(v);
    }
    let duration_s = wall_ns as f64 / 1e9;
    let per_s = |x: f64| {
        if duration_s > 0.0 {
            x / duration_s
        } else {
            0.0
        }
    };
    Metrics {
        requests: records.len() as u64,
        failed_requests: (records.len() - ok.len()) as u64,
        short_requests: short,
        output_tokens,
        duration_s,
        output_tok_s: per_s(output_tokens as f64),
        request_per_s: per_s(ok.len() as f64),
        decode_tok_s_p50: percentile(&decode, 50.0),
        decode_tok_s_mean: mean(&decode),
        ttft_ms_p50: percentile(&ttft, 50.0).unwrap_or(0.0),
        ttft_ms_p90: percentile(&ttft, 90.0).unwrap_or(0.0),
        ttft_ms_p99: percentile(&ttft, 99.0).unwrap_or(0.0),
        ttft_ms_mean: mean(&ttft).unwrap_or(0.0),
        itl_ms_p50: percentile(&itl, 50.0),
        itl_ms_p90: percentile(&itl, 90.0),
        itl_ms_p99: percentile(&itl, 99.0),
        itl_ms_mean: mean(&itl),
        tpot_ms_p50: percentile(&tpot, 50.0),
        e2e_ms_p50: percentile(&e2e, 50.0).unwrap_or(0.0),
        e2e_ms_p99: percentile(&e2e, 99.0).unwrap_or(0.0),
        prompt_tokens_mean: mean(&prompt_tokens).unwrap_or(0.0),
        tokens_estimated: estimated,
        accept_len: None,
        gpu_mem_peak_mib: None,
        gpu_util_mean: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn rec(start: u64, chunks: &[(u64, u32)], end: u64, usage: Option<u64>) -> RequestRecord {
        RequestRecord {
            start_ns: start * MS,
            chunks: chunks.iter().map(|&(t, c)| (t * MS, c)).collect(),
            end_ns: end * MS,
            prompt_tokens: Some(100),
            completion_tokens: usage,
            max_tokens: 4,
            finish_reason: Some("length".into()),
            error: None,
        }
    }

    #[test]
    fn one_token_per_chunk() {
        // Sent at 0, text at 200, 210, 220, 230, done at 231.
        let r = rec(0, &[(200, 5), (210, 5), (220, 5), (230, 5)], 231, Some(4));
        let m = compute(&[r], 1000 * MS);
        assert_eq!(m.output_tokens, 4);
        assert_eq!(m.ttft_ms_p50, 200.0);
        assert_eq!(m.itl_ms_p50, Some(10.0));
        assert_eq!(m.tpot_ms_p50, Some((231.0 - 200.0) / 3.0));
        assert_eq!(m.decode_tok_s_p50, Some(3.0 / 0.030));
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
        assert_eq!(m.itl_ms_p50, Some(10.0));
        assert_eq!(m.itl_ms_p99, Some(10.0));
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
        bad.error = Some(super::super::client::RequestError::Timeout);
        let m = compute(&[ok, bad], 1000 * MS);
        assert_eq!(m.requests, 2);
        assert_eq!(m.failed_requests, 1);
        assert_eq!(m.output_tokens, 2);
    }

    #[test]
    fn percentiles_interpolate() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), Some(2.5));
        assert_eq!(percentile(&v, 100.0), Some(4.0));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
