//! A cell's figures ([`Metrics`], the `metrics` object of a result line) and
//! [`METRICS`], the one table that says, for each of them, its key, its name,
//! its unit, how it is written and which direction is better. The CSV columns,
//! the JSON check, the details popup, the progress lines, `loadtest`'s output and
//! the grid's value modes are all read from this table: a new metric is one field
//! here and one row below (a test fails until both exist).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub requests: u64,
    pub failed_requests: u64,
    /// Successful requests that returned fewer tokens than asked.
    pub short_requests: u64,
    /// Requests the server itself finished during the cell (its end-to-end
    /// histogram's count): the server-side figures are of these.
    #[serde(default)]
    pub server_requests: Option<u64>,
    pub output_tokens: u64,
    /// `max_tokens` summed over the successful requests: what
    /// `output_tokens` would be had the server returned all it was asked for.
    /// Null in records made before it was measured.
    #[serde(default)]
    pub output_tokens_asked: Option<u64>,
    pub duration_s: f64,
    pub output_tok_s: f64,
    pub request_per_s: f64,
    pub decode_tok_s_p50: Option<f64>,
    pub decode_tok_s_mean: Option<f64>,
    pub ttft_ms_p50: f64,
    pub ttft_ms_p90: f64,
    pub ttft_ms_p99: f64,
    pub ttft_ms_mean: f64,
    /// The server's own mean TTFT over the measured requests (the delta of
    /// its Prometheus histogram); null when it exports none, or another
    /// client's requests were mixed in. Likewise for ITL, E2E and queue.
    #[serde(default)]
    pub server_ttft_ms_mean: Option<f64>,
    pub itl_ms_p50: Option<f64>,
    pub itl_ms_p90: Option<f64>,
    pub itl_ms_p99: Option<f64>,
    pub itl_ms_mean: Option<f64>,
    #[serde(default)]
    pub server_itl_ms_mean: Option<f64>,
    pub tpot_ms_p50: Option<f64>,
    pub e2e_ms_p50: f64,
    pub e2e_ms_p99: f64,
    #[serde(default)]
    pub server_e2e_ms_mean: Option<f64>,
    #[serde(default)]
    pub server_queue_ms_mean: Option<f64>,
    /// Null when the server counted no prompt (no `usage`): unknown, not 0.
    pub prompt_tokens_mean: Option<f64>,
    /// The fewest and most prompt tokens the server counted for one request
    /// (`usage.prompt_tokens`); null when the server did not say.
    #[serde(default)]
    pub prompt_tokens_min: Option<u64>,
    #[serde(default)]
    pub prompt_tokens_max: Option<u64>,
    /// Prompt tokens the server found in its prefix cache, in % of those
    /// it looked up.
    #[serde(default)]
    pub prefix_cache_hit_pct: Option<f64>,
    pub tokens_estimated: bool,
    pub accept_len: Option<f64>,
    pub gpu_mem_peak_mib: Option<u64>,
    pub gpu_util_mean: Option<f64>,
    /// How long after arriving the client read a chunk (p99): its own
    /// scheduling delay, the kernel's receive time against the read. Null
    /// on the read clock (no receive timestamps), and in older records.
    #[serde(default)]
    pub client_lag_ms_p99: Option<f64>,
    /// Reads that held more than one text chunk (they share the read's
    /// arrival time; the gaps inside are unknown). Null on the read clock.
    #[serde(default)]
    pub coalesced_reads: Option<u64>,
}

impl Metrics {
    /// Real tokens at a real rate: what a cell recorded `ok` must have.
    pub fn has_tokens(&self) -> bool {
        self.output_tokens > 0 && self.output_tok_s > 0.0 && self.output_tok_s.is_finite()
    }

    /// The client's mean TTFT minus the server's own: what the HTTP front
    /// end, the network and the client added to the measurement.
    pub fn ttft_gap_ms(&self) -> Option<f64> {
        self.server_ttft_ms_mean
            .map(|server| self.ttft_ms_mean - server)
            .filter(|g| g.is_finite())
    }
}

/// One figure of a cell, as read from [`Metrics`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Count(u64),
    Number(f64),
    Flag(bool),
    /// Not measured (no samples, no telemetry, no speculative decoding).
    Missing,
}

impl Value {
    /// As a number, for comparisons and ratios.
    pub fn number(self) -> Option<f64> {
        match self {
            Value::Count(n) => Some(n as f64),
            Value::Number(x) if x.is_finite() => Some(x),
            _ => None,
        }
    }
}

impl From<u64> for Value {
    fn from(v: u64) -> Value {
        Value::Count(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Number(v)
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Flag(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Value {
        v.map_or(Value::Missing, Into::into)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Count,
    Tokens,
    Seconds,
    Millis,
    TokensPerSecond,
    PerSecond,
    /// A plain ratio (acceptance length).
    Ratio,
    Mib,
    Percent,
    Flag,
}

/// Which way a figure improves, for colouring against a baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
    Neither,
}

/// One metric: everything any view needs to show it.
pub struct Metric {
    /// The field name in `results.jsonl`, JSON and CSV.
    pub key: &'static str,
    /// What is measured; metrics of one family are shown on one line
    /// (`TTFT p50 / p90 / p99 / mean`).
    pub family: &'static str,
    /// Which statistic of the family (`p50`, `mean`), or "" for a single figure.
    pub stat: &'static str,
    pub unit: Unit,
    pub better: Better,
    /// Offered as a value of the grid (`v` cycles through them).
    pub grid: bool,
    /// Its name in one-line summaries (progress lines), if it is shown there;
    /// "" when the unit says it all (`389.2 tok/s`).
    pub summary: Option<&'static str>,
    /// What it means, in a few words (help, details).
    pub about: &'static str,
    /// The CSV generation that added it: a later generation's columns come
    /// after all of an earlier one's, so no column a script reads ever moves.
    pub csv_since: u8,
    pub get: fn(&Metrics) -> Value,
}

impl std::fmt::Debug for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key)
    }
}

impl PartialEq for Metric {
    fn eq(&self, other: &Metric) -> bool {
        self.key == other.key
    }
}

impl Metric {
    /// `TTFT p50`, `output tok/s`.
    pub fn label(&self) -> String {
        if self.stat.is_empty() {
            self.family.to_string()
        } else {
            format!("{} {}", self.family, self.stat)
        }
    }

    pub fn value(&self, m: &Metrics) -> Value {
        (self.get)(m)
    }

    /// The exact form for files (CSV): integers as they are, other numbers to
    /// 3 decimals, flags as `true`/`false`, nothing for a missing value.
    pub fn exact(&self, m: &Metrics) -> String {
        match self.value(m) {
            Value::Count(n) => n.to_string(),
            Value::Number(x) => format!("{x:.3}"),
            Value::Flag(b) => b.to_string(),
            Value::Missing => String::new(),
        }
    }

    /// With its unit, for people: `389.2 tok/s`, `85ms`, `1.24s`, `N/A`.
    pub fn human(&self, m: &Metrics) -> String {
        self.unit.human(self.value(m))
    }

    /// At most 7 characters, for a grid cell: `389.2`, `12345`, `85ms`, `2.31`.
    pub fn compact(&self, m: &Metrics) -> String {
        self.unit.compact(self.value(m))
    }

    pub fn by_key(key: &str) -> Option<&'static Metric> {
        METRICS.iter().find(|m| m.key == key)
    }
}

impl Unit {
    pub fn human(self, v: Value) -> String {
        let x = match v {
            Value::Missing => return "N/A".into(),
            Value::Flag(b) => return if b { "yes" } else { "no" }.into(),
            Value::Count(n) => {
                return match self {
                    Unit::Tokens => format!("{n} tokens"),
                    Unit::Mib => format!("{n} MiB"),
                    _ => n.to_string(),
                }
            }
            Value::Number(x) => x,
        };
        match self {
            Unit::Count => format!("{x:.0}"),
            Unit::Tokens => format!("{x:.0} tokens"),
            Unit::Seconds => format!("{x:.2} s"),
            Unit::Millis => ms_label(x),
            Unit::TokensPerSecond => format!("{} tok/s", rate_label(x)),
            Unit::PerSecond => format!("{x:.2}/s"),
            Unit::Ratio => format!("{x:.2}"),
            Unit::Mib => format!("{x:.0} MiB"),
            Unit::Percent => format!("{x:.0} %"),
            Unit::Flag => format!("{x}"),
        }
    }

    pub fn compact(self, v: Value) -> String {
        match (self, v) {
            (_, Value::Missing) => "n/a".into(),
            (Unit::Millis, Value::Number(x)) => ms_label(x),
            (Unit::TokensPerSecond | Unit::PerSecond, Value::Number(x)) => rate_label(x),
            (Unit::Ratio, Value::Number(x)) => format!("{x:.2}"),
            (Unit::Percent, Value::Number(x)) => format!("{x:.0}%"),
            (_, Value::Number(x)) => format!("{x:.0}"),
            (_, Value::Count(n)) => n.to_string(),
            (_, Value::Flag(b)) => if b { "yes" } else { "no" }.into(),
        }
    }
}

/// A rate in at most 7 characters: `83.4`, `1234.5`, `12345`.
pub fn rate_label(v: f64) -> String {
    if v < 10_000.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// A duration in milliseconds, in at most 7 characters with 3 significant
/// digits where they fit: `4.25ms`, `85.0ms`, `312ms`, `1.24s`.
pub fn ms_label(ms: f64) -> String {
    if ms < 9.995 {
        format!("{ms:.2}ms")
    } else if ms < 99.95 {
        format!("{ms:.1}ms")
    } else if ms < 999.5 {
        format!("{ms:.0}ms")
    } else {
        format!("{:.2}s", ms / 1000.0)
    }
}

macro_rules! metrics_table {
    ($( $key:ident: $family:literal, $stat:literal, $unit:ident, $better:ident,
        grid $grid:literal, summary $summary:expr, csv $csv:literal, $about:literal; )*) => {
        /// Every metric of a cell, in the order of the `metrics` object.
        pub static METRICS: &[Metric] = &[$(
            Metric {
                key: stringify!($key),
                family: $family,
                stat: $stat,
                unit: Unit::$unit,
                better: Better::$better,
                grid: $grid,
                summary: $summary,
                about: $about,
                csv_since: $csv,
                get: |m| Value::from(m.$key),
            },
        )*];
    };
}

metrics_table! {
    requests: "requests", "", Count, Neither, grid false, summary None, csv 1,
        "measured requests (warm-up excluded)";
    failed_requests: "requests", "failed", Count, Lower, grid false, summary None, csv 1,
        "requests that ended in an error";
    short_requests: "requests", "short", Count, Lower, grid false, summary None, csv 1,
        "successful requests that returned fewer tokens than asked";
    server_requests: "requests", "server", Count, Neither, grid false, summary None, csv 4,
        "requests the server finished during the cell, by its own count";
    output_tokens: "output tokens", "", Tokens, Neither, grid false, summary None, csv 1,
        "tokens generated by successful requests (from the server's usage)";
    output_tokens_asked: "output tokens", "asked", Tokens, Neither, grid false, summary None, csv 3,
        "max_tokens summed over the successful requests";
    duration_s: "duration", "", Seconds, Neither, grid false, summary None, csv 1,
        "wall time of the measured requests";
    output_tok_s: "output tok/s", "", TokensPerSecond, Higher, grid true, summary Some(""), csv 1,
        "output tokens / cell wall time";
    request_per_s: "requests/s", "", PerSecond, Higher, grid false, summary None, csv 1,
        "successful requests / cell wall time";
    decode_tok_s_p50: "decode tok/s", "p50", TokensPerSecond, Higher, grid true, summary None, csv 1,
        "per request: tokens after the first read / (last text chunk − first text chunk)";
    decode_tok_s_mean: "decode tok/s", "mean", TokensPerSecond, Higher, grid false, summary None, csv 2,
        "per request: tokens after the first read / (last text chunk − first text chunk)";
    ttft_ms_p50: "TTFT", "p50", Millis, Lower, grid true, summary Some("ttft p50"), csv 1,
        "send → first chunk with text";
    ttft_ms_p90: "TTFT", "p90", Millis, Lower, grid false, summary None, csv 1,
        "send → first chunk with text";
    ttft_ms_p99: "TTFT", "p99", Millis, Lower, grid false, summary None, csv 1,
        "send → first chunk with text";
    ttft_ms_mean: "TTFT", "mean", Millis, Lower, grid false, summary None, csv 2,
        "send → first chunk with text";
    server_ttft_ms_mean: "TTFT", "server", Millis, Lower, grid false, summary None, csv 4,
        "the server's own mean time to first token (its histogram over the cell)";
    itl_ms_p50: "ITL", "p50", Millis, Lower, grid true, summary Some("itl p50"), csv 1,
        "per token: each chunk's (or read's) gap split over the tokens it carried";
    itl_ms_p90: "ITL", "p90", Millis, Lower, grid false, summary None, csv 2,
        "per token: each chunk's (or read's) gap split over the tokens it carried";
    itl_ms_p99: "ITL", "p99", Millis, Lower, grid false, summary None, csv 1,
        "per token: each chunk's (or read's) gap split over the tokens it carried";
    itl_ms_mean: "ITL", "mean", Millis, Lower, grid false, summary None, csv 2,
        "per token: each chunk's (or read's) gap split over the tokens it carried";
    server_itl_ms_mean: "ITL", "server", Millis, Lower, grid false, summary None, csv 4,
        "the server's own mean inter-token latency (its histogram over the cell)";
    tpot_ms_p50: "TPOT", "p50", Millis, Lower, grid false, summary None, csv 1,
        "(e2e − TTFT) / (tokens − 1)";
    e2e_ms_p50: "E2E", "p50", Millis, Lower, grid false, summary None, csv 1,
        "send → end of stream";
    e2e_ms_p99: "E2E", "p99", Millis, Lower, grid false, summary None, csv 1,
        "send → end of stream";
    server_e2e_ms_mean: "E2E", "server", Millis, Lower, grid false, summary None, csv 4,
        "the server's own mean request latency (its histogram over the cell)";
    server_queue_ms_mean: "queue (server)", "mean", Millis, Lower, grid false, summary None, csv 4,
        "time requests waited in the server's queue (its histogram over the cell)";
    prompt_tokens_mean: "prompt (real)", "mean", Tokens, Neither, grid false, summary Some("prompt"), csv 1,
        "prompt tokens as the server counted them (usage.prompt_tokens)";
    prompt_tokens_min: "prompt (real)", "min", Tokens, Neither, grid false, summary None, csv 3,
        "prompt tokens as the server counted them (usage.prompt_tokens)";
    prompt_tokens_max: "prompt (real)", "max", Tokens, Neither, grid false, summary None, csv 3,
        "prompt tokens as the server counted them (usage.prompt_tokens)";
    prefix_cache_hit_pct: "prefix cache hits", "", Percent, Neither, grid false, summary None, csv 4,
        "prompt tokens the server found in its prefix cache, % of those it looked up";
    tokens_estimated: "tokens estimated", "", Flag, Neither, grid false, summary None, csv 1,
        "the server sent no usage: token counts estimated from chunks";
    accept_len: "acceptance length", "", Ratio, Higher, grid true, summary Some("accept"), csv 1,
        "speculative decoding: tokens per verification step";
    gpu_mem_peak_mib: "GPU memory", "peak", Mib, Neither, grid false, summary None, csv 1,
        "the most any of the config's GPUs used while the cell ran";
    gpu_util_mean: "GPU util", "mean", Percent, Neither, grid false, summary None, csv 1,
        "mean utilisation of the config's GPUs while the cell ran";
    client_lag_ms_p99: "client read lag", "p99", Millis, Lower, grid false, summary None, csv 6,
        "how long after arriving (kernel receive time) the client read a chunk";
    coalesced_reads: "coalesced reads", "", Count, Lower, grid false, summary None, csv 6,
        "reads that held several text chunks: the gaps inside them are unknown";
}

/// Metrics grouped by family, in table order: one line of a details view each.
pub fn families() -> Vec<(&'static str, Vec<&'static Metric>)> {
    let mut out: Vec<(&'static str, Vec<&'static Metric>)> = Vec::new();
    for m in METRICS {
        match out.last_mut() {
            Some((family, list)) if *family == m.family => list.push(m),
            _ => out.push((m.family, vec![m])),
        }
    }
    out
}

#[cfg(test)]
pub(crate) fn sample() -> Metrics {
    Metrics {
        requests: 4,
        failed_requests: 0,
        short_requests: 1,
        server_requests: Some(4),
        output_tokens: 100,
        output_tokens_asked: Some(128),
        duration_s: 1.5,
        output_tok_s: 66.666_67,
        request_per_s: 2.666_67,
        decode_tok_s_p50: Some(70.0),
        decode_tok_s_mean: Some(69.5),
        ttft_ms_p50: 85.0,
        ttft_ms_p90: 90.0,
        ttft_ms_p99: 1240.0,
        ttft_ms_mean: 88.0,
        server_ttft_ms_mean: Some(80.5),
        itl_ms_p50: Some(10.0),
        itl_ms_p90: None,
        itl_ms_p99: Some(12.0),
        itl_ms_mean: Some(10.5),
        server_itl_ms_mean: Some(10.1),
        tpot_ms_p50: Some(10.2),
        e2e_ms_p50: 300.0,
        e2e_ms_p99: 320.0,
        server_e2e_ms_mean: Some(295.0),
        server_queue_ms_mean: Some(0.2),
        prompt_tokens_mean: Some(1024.0),
        prompt_tokens_min: Some(1024),
        prompt_tokens_max: Some(1024),
        prefix_cache_hit_pct: Some(0.0),
        tokens_estimated: false,
        accept_len: None,
        gpu_mem_peak_mib: Some(81_920),
        gpu_util_mean: Some(93.4),
        client_lag_ms_p99: Some(0.05),
        coalesced_reads: Some(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_every_field_of_the_struct_in_order() {
        let json = serde_json::to_value(sample()).unwrap();
        let mut fields: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut keys: Vec<&str> = METRICS.iter().map(|m| m.key).collect();
        // In the struct's order, as serialized...
        let text = serde_json::to_string(&sample()).unwrap();
        let at = |k: &str| text.find(&format!("\"{k}\":")).unwrap();
        assert!(keys.windows(2).all(|w| at(w[0]) < at(w[1])), "{keys:?}");
        // ...and every field once.
        fields.sort_unstable();
        keys.sort_unstable();
        assert_eq!(fields, keys);
        // And each row reads its own field.
        for m in METRICS {
            let from_json = &json[m.key];
            match m.value(&sample()) {
                Value::Missing => assert!(from_json.is_null(), "{}", m.key),
                Value::Flag(b) => assert_eq!(from_json.as_bool(), Some(b), "{}", m.key),
                Value::Count(n) => assert_eq!(from_json.as_u64(), Some(n), "{}", m.key),
                Value::Number(x) => assert_eq!(from_json.as_f64(), Some(x), "{}", m.key),
            }
        }
    }

    #[test]
    fn formats() {
        let m = sample();
        let get = |k| Metric::by_key(k).unwrap();
        assert_eq!(get("output_tok_s").exact(&m), "66.667");
        assert_eq!(get("requests").exact(&m), "4");
        assert_eq!(get("itl_ms_p90").exact(&m), "");
        assert_eq!(get("tokens_estimated").exact(&m), "false");
        assert_eq!(get("output_tok_s").human(&m), "66.7 tok/s");
        assert_eq!(get("ttft_ms_p99").human(&m), "1.24s");
        assert_eq!(get("ttft_ms_p50").compact(&m), "85.0ms");
        assert_eq!(ms_label(4.25), "4.25ms");
        assert_eq!(ms_label(312.4), "312ms");
        assert_eq!(ms_label(99.99), "100ms");
        assert_eq!(get("accept_len").human(&m), "N/A");
        assert_eq!(get("accept_len").compact(&m), "n/a");
        assert_eq!(get("gpu_mem_peak_mib").human(&m), "81920 MiB");
        assert_eq!(get("prompt_tokens_mean").human(&m), "1024 tokens");
        assert_eq!(get("ttft_ms_p50").label(), "TTFT p50");
        assert_eq!(get("output_tok_s").label(), "output tok/s");
        assert_eq!(rate_label(12345.67), "12346");
        assert_eq!(ms_label(1234.0), "1.23s");
    }

    #[test]
    fn families_group_adjacent_rows() {
        let f = families();
        let ttft = f.iter().find(|(name, _)| *name == "TTFT").unwrap();
        let stats: Vec<&str> = ttft.1.iter().map(|m| m.stat).collect();
        assert_eq!(stats, ["p50", "p90", "p99", "mean", "server"]);
        // No family is split in two.
        let mut names: Vec<&str> = f.iter().map(|(n, _)| *n).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
