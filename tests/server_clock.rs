//! The server's own figures next to the client's: the deltas of its
//! Prometheus histograms over each cell's measured requests (warm-up left
//! out), its prefix-cache hit rate, the cache flushed before cold cells where
//! the server allows it, and the flags when they disagree with what the
//! cell was meant to measure: a front end that adds time the server does
//! not see (`clock_gap`), cold prompts that hit the cache (`cache_hit`).

use crate::common;

use std::time::Duration;

use common::*;

fn plan(kind: &str, server: &str, env: &str, api: &str, limits: &str) -> String {
    format!(
        r#"
name = "clock"
[server]
kind = "{kind}"
command = "{{sweeptop}} sim-server --flavor vllm --port {{port}} --startup-ms 50 --ttft-ms 20 --itl-ms 2 {server}"
port = "auto"
stop_grace_s = 1
api = "{api}"
env = {{ {env} }}
[limits]
context = "server"
{limits}
[[workloads]]
id = "cold"
contexts = [128]
concurrency = [1, 2]
requests = 4
warmup = 1
max_tokens = 8
[[workloads]]
id = "warm"
cache = "warm"
contexts = [128]
concurrency = [2]
requests = 4
warmup = 1
max_tokens = 8
[[phases]]
id = "p"
"#
    )
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn the_servers_own_figures_sit_next_to_the_clients() {
    let dir = scratch("clock-ok");
    let tag = format!("clock-ok-{}", std::process::id());
    // A gap this machine's load cannot reach: only the figures are checked here.
    // `kind = "vllm"` sets VLLM_SERVER_DEV_MODE=1: the cache is flushed.
    let text = plan("vllm", "", "", "completions", "max_ttft_gap_ms = 10000");
    let (run, stdout) = run_plan(&dir, &tag, &text, Duration::from_secs(120));
    let by = by_cell(&results(&run));
    for cell in ["p/cold-ctx128-c1", "p/cold-ctx128-c2", "p/warm-ctx128-c2"] {
        let r = &by[cell][0];
        assert_eq!(r["status"], "ok", "{r}");
        let m = &r["metrics"];
        // The server counted the 4 measured requests, not the warm-up.
        assert_eq!(m["server_requests"], 4, "{r}");
        // Its TTFT is the 20 ms it paces, by its own clock; the client's
        // includes the HTTP round trip, so it is never less.
        let server = f(&m["server_ttft_ms_mean"]);
        assert!((20.0..200.0).contains(&server), "{r}");
        assert!(f(&m["ttft_ms_mean"]) >= server, "{r}");
        assert!((1.0..50.0).contains(&f(&m["server_itl_ms_mean"])), "{r}");
        assert!(f(&m["server_e2e_ms_mean"]) >= server, "{r}");
        assert_eq!(f(&m["server_queue_ms_mean"]), 0.0, "{r}");
        // Prompt lengths are exact, with the tag first or last.
        assert_eq!(m["prompt_tokens_min"], 128, "{r}");
        assert_eq!(m["prompt_tokens_max"], 128, "{r}");
        assert!(common::warning_kinds_of_the_cell(r).is_empty(), "{r}");
    }
    // Cold prompts never meet the cache (flushed before, own tag first); a
    // warm workload's prompts share all but their tag.
    assert_eq!(
        f(&by["p/cold-ctx128-c1"][0]["metrics"]["prefix_cache_hit_pct"]),
        0.0
    );
    assert_eq!(
        f(&by["p/cold-ctx128-c2"][0]["metrics"]["prefix_cache_hit_pct"]),
        0.0
    );
    let warm = f(&by["p/warm-ctx128-c2"][0]["metrics"]["prefix_cache_hit_pct"]);
    assert!(warm > 50.0, "{warm}");
    assert!(!stdout.contains("cannot be flushed"), "{stdout}");
    // The CSV carries the server-side columns.
    let mut cmd = sweeptop(&tag);
    cmd.args(["export", "--format", "csv"]).arg(&run);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    let csv = String::from_utf8(out.stdout).unwrap();
    let header = csv.lines().next().unwrap();
    assert!(header.contains(",server_ttft_ms_mean,"), "{header}");
    assert!(header.contains(",prefix_cache_hit_pct,"), "{header}");
    // What was benchmarked, recorded at launch and in every export.
    let mut cmd = sweeptop(&tag);
    cmd.args(["export", "--format", "json"]).arg(&run);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let server = &json[0]["server"];
    assert_eq!(server["kind"], "vllm", "{server}");
    assert_eq!(server["version"], "0.10.1-sim", "{server}");
    assert!(
        server["command"]
            .as_str()
            .unwrap()
            .contains("sim-server --flavor vllm"),
        "{server}"
    );
    assert!(!server["host"].as_str().unwrap().is_empty(), "{server}");
    assert_eq!(
        server["sweeptop_version"],
        env!("CARGO_PKG_VERSION"),
        "{server}"
    );
    let mut cmd = sweeptop(&tag);
    cmd.args(["export", "--format", "md"]).arg(&run);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    let md = String::from_utf8(out.stdout).unwrap();
    assert!(md.contains("| p | vllm 0.10.1-sim | sim-model |"), "{md}");
}

#[test]
fn a_slow_front_end_and_a_cached_template_are_flagged() {
    let dir = scratch("clock-flag");
    let tag = format!("clock-flag-{}", std::process::id());
    // 60 ms held before the engine's clock starts; a chat template whose 64
    // system-prompt tokens every prompt shares; no dev mode: no flush.
    let text = plan(
        "openai",
        "--front-delay-ms 60 --system-prompt-tokens 64",
        "",
        "chat",
        "",
    );
    let (run, stdout) = run_plan(&dir, &tag, &text, Duration::from_secs(120));
    let by = by_cell(&results(&run));
    let cold = &by["p/cold-ctx128-c1"][0];
    assert_eq!(cold["status"], "ok", "{cold}");
    let kinds = common::warning_kinds_of_the_cell(cold);
    assert_eq!(kinds, ["clock_gap", "cache_hit"], "{cold}");
    let m = &cold["metrics"];
    assert!(
        f(&m["ttft_ms_mean"]) - f(&m["server_ttft_ms_mean"]) >= 60.0,
        "{cold}"
    );
    // 64 of the 128 prompt tokens the server counts are the template's.
    assert_eq!(f(&m["prefix_cache_hit_pct"]), 50.0, "{cold}");
    assert!(
        cold["warnings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("by the server's own clock"),
        "{cold}"
    );
    // A warm workload is meant to hit the cache: only the gap is flagged.
    let warm = &by["p/warm-ctx128-c2"][0];
    assert_eq!(
        common::warning_kinds_of_the_cell(warm),
        ["clock_gap"],
        "{warm}"
    );
    // The server cannot flush its cache, and the run says so once.
    assert_eq!(stdout.matches("cannot be flushed").count(), 1, "{stdout}");
    assert!(stdout.contains("GAP"), "{stdout}");
}

#[test]
fn repeats_record_every_repetition_the_median_and_the_spread() {
    let dir = scratch("repeats");
    let tag = format!("repeats-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    // Any spread at all is flagged here, to see the flag; the default is 5 %.
    let plan = TINY_PLAN
        .replace("requests = 2", "requests = 2\nrepeats = 3")
        .replace("context = 4096", "context = 4096\nmax_spread_pct = 0");
    let (run, _) = run_plan(&dir, &tag, &plan, std::time::Duration::from_secs(120));
    let r = &results(&run)[0];
    assert_eq!(r["status"], "ok", "{r}");
    let reps = r["repetitions"].as_array().expect("repetitions");
    assert_eq!(reps.len(), 3);
    let mut tok: Vec<f64> = reps
        .iter()
        .map(|m| m["output_tok_s"].as_f64().unwrap())
        .collect();
    tok.sort_by(f64::total_cmp);
    // The cell stands for its median repetition.
    assert_eq!(r["metrics"]["output_tok_s"].as_f64().unwrap(), tok[1]);
    let s = &r["spread"];
    assert_eq!(s["n"], 3);
    assert_eq!(s["min"].as_f64().unwrap(), tok[0]);
    assert_eq!(s["max"].as_f64().unwrap(), tok[2]);
    let pct = (tok[2] - tok[0]) / tok[1] * 100.0;
    assert!((s["spread_pct"].as_f64().unwrap() - pct).abs() < 1e-9);
    // Every repetition's raw requests are kept.
    let files: Vec<String> = std::fs::read_dir(run.join("requests"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for want in [".jsonl", ".rep2.jsonl", ".rep3.jsonl"] {
        assert!(
            files.iter().filter(|f| f.ends_with(want)).count() >= 1,
            "{want}: {files:?}"
        );
    }
    if pct > 0.0 {
        let w = &r["warnings"][0];
        assert_eq!(w["kind"], "noisy", "{r}");
        assert!(w["message"]
            .as_str()
            .unwrap()
            .contains("3 repetitions spread"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
