//! Speculative-decoding acceptance from the server's Prometheus counters
//! (vLLM): mean acceptance length over a cell = 1 + Δaccepted / Δdrafts.
//! SGLang's figure comes from its decode log lines (see `detect`), else from its
//! `sglang:spec_accept_length` gauge read as the cell ends.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecCounters {
    pub drafts: f64,
    pub accepted: f64,
}

/// Sum a counter over all its label sets in Prometheus text.
fn counter(text: &str, name: &str) -> Option<f64> {
    let mut found = false;
    let mut sum = 0.0;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        let value = match rest.rfind('}') {
            Some(i) => &rest[i + 1..],
            None => rest,
        };
        if let Some(v) = value
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<f64>().ok())
        {
            sum += v;
            found = true;
        }
    }
    found.then_some(sum)
}

pub fn parse(text: &str) -> Option<SpecCounters> {
    Some(SpecCounters {
        drafts: counter(text, "vllm:spec_decode_num_drafts_total")?,
        accepted: counter(text, "vllm:spec_decode_num_accepted_tokens_total")?,
    })
}

/// SGLang's gauge: the acceptance length of its latest decode batches.
pub fn sglang_gauge(text: &str) -> Option<f64> {
    counter(text, "sglang:spec_accept_length").filter(|v| *v > 0.0)
}

/// The server's Prometheus text, if it has a `/metrics` endpoint.
pub async fn metrics_text(client: &reqwest::Client, base: &str) -> Option<String> {
    let resp = client
        .get(format!("{base}/metrics"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    Some(String::from_utf8_lossy(&resp.bytes().await.ok()?).into_owned())
}

/// Mean acceptance length between two readings, if any drafts happened.
pub fn accept_len(before: SpecCounters, after: SpecCounters) -> Option<f64> {
    let drafts = after.drafts - before.drafts;
    (drafts > 0.0).then(|| 1.0 + (after.accepted - before.accepted) / drafts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acceptance_from_counter_differences() {
        let before = parse("# HELP x\nvllm:spec_decode_num_drafts_total{model_name=\"m\"} 100.0\nvllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 150.0\n").unwrap();
        let after = parse("vllm:spec_decode_num_drafts_total{model_name=\"m\",engine=\"0\"} 150\nvllm:spec_decode_num_drafts_total{model_name=\"m\",engine=\"1\"} 50\nvllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 400\nvllm:spec_decode_num_draft_tokens_total 999\n").unwrap();
        assert_eq!(after.drafts, 200.0);
        assert_eq!(accept_len(before, after), Some(1.0 + 250.0 / 100.0));
        assert_eq!(accept_len(after, after), None);
        assert_eq!(parse("sglang:spec_accept_length 3.1\n"), None);
        assert_eq!(
            sglang_gauge("sglang:spec_accept_length{model_name=\"m\"} 3.1\n"),
            Some(3.1)
        );
        assert_eq!(sglang_gauge("sglang:spec_accept_length 0\n"), None);
    }
}
