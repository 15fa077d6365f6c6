//! Configs packed side by side on one machine: a TP1 phase of six configs on
//! eight simulated GPUs runs them all at once, each on a GPU of its own, and
//! one config's crash leaves the others running.

use crate::common;

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use common::*;

/// Six TP1 configs, one GPU each; `crash` dies with an illegal instruction
/// in its first cell.
fn plan(pack: bool) -> String {
    format!(
        r#"
name = "pack"
pack = {pack}
[server]
command = "{{sweeptop}} sim-server --port {{port}} --startup-ms 300 --ttft-ms 20 --itl-ms 25 {{fault}}"
port = "auto"
gpus = "auto:1"
stop_grace_s = 1
[limits]
context = 4096
[[workloads]]
id = "w"
contexts = [64]
concurrency = [1, 2]
requests = 2
max_tokens = 24
[[phases]]
id = "tp1"
vars = {{ fault = "" }}
matrix = {{ kind = ["a", "b", "c", "d", "e", "crash"] }}
[[phases.set]]
when = {{ kind = "crash" }}
vars = {{ fault = "--fault crash:cuda_illegal_instruction@30" }}
"#
    )
}

/// Runs the plan on eight simulated GPUs; the sweep's wall time in seconds
/// (from its events) and the run directory.
fn sweep(name: &str, pack: bool) -> (f64, std::path::PathBuf) {
    let dir = scratch(name);
    let plan_path = dir.join("plan.toml");
    std::fs::write(&plan_path, plan(pack)).unwrap();
    let out = dir.join("run");
    let mut cmd = sweeptop(name);
    cmd.arg("run")
        .arg(&plan_path)
        .args([
            "--headless",
            "--sim-gpus",
            "8",
            "--gpu-interval-ms",
            "250",
            "--out",
        ])
        .arg(&out);
    let done = run_with_deadline(cmd, Duration::from_secs(240));
    assert!(
        done.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&done.stdout),
        String::from_utf8_lossy(&done.stderr)
    );
    let events = events(&out);
    let at = |kind: &str| {
        events
            .iter()
            .find(|e| e["event"] == kind)
            .and_then(|e| e["at"].as_str())
            .map(|s| s.to_string())
            .unwrap_or_else(|| panic!("no {kind} event"))
    };
    (
        seconds_between(&at("sweep_started"), &at("sweep_finished")),
        out,
    )
}

/// `2026-12-04T08:03:10.123Z` → seconds since midnight (the runs are short).
fn clock_s(ts: &str) -> f64 {
    let t = ts.split('T').nth(1).unwrap().trim_end_matches('Z');
    let parts: Vec<f64> = t.split(':').map(|p| p.parse().unwrap()).collect();
    parts[0] * 3600.0 + parts[1] * 60.0 + parts[2]
}

fn seconds_between(a: &str, b: &str) -> f64 {
    let d = clock_s(b) - clock_s(a);
    if d < 0.0 {
        d + 86_400.0
    } else {
        d
    }
}

#[test]
fn a_packed_phase_runs_its_configs_side_by_side_and_a_crash_stops_only_its_own() {
    let (packed_s, run) = sweep("pack-on", true);
    let results = results(&run);
    let cells = by_cell(&results);
    assert_eq!(cells.len(), 12, "every cell once: {cells:?}");
    for r in &results {
        assert_result_line(r);
    }

    // Each config on a GPU of its own, named in its records.
    let mut gpu_of: HashMap<String, Vec<u64>> = HashMap::new();
    // (A cell the crash left not run ran on nothing.)
    for r in results
        .iter()
        .filter(|r| r["metrics"].is_object() || r["gpus"].is_array())
    {
        let gpus: Vec<u64> = r["gpus"]
            .as_array()
            .unwrap_or_else(|| panic!("no gpus in {r}"))
            .iter()
            .map(|g| g.as_u64().unwrap())
            .collect();
        assert_eq!(gpus.len(), 1, "{r}");
        let config = r["config"].as_str().unwrap().to_string();
        let before = gpu_of.insert(config.clone(), gpus.clone());
        assert!(before.is_none_or(|b| b == gpus), "{config} moved GPUs");
    }
    let distinct: BTreeSet<&Vec<u64>> = gpu_of.values().collect();
    assert_eq!(
        distinct.len(),
        6,
        "six configs on six different GPUs: {gpu_of:?}"
    );

    // The crash is the crashing config's alone: the others are ok, on the
    // server they started with (no relaunch, one stop each), and their cells
    // say they ran beside it.
    for r in &results {
        let config = r["config"].as_str().unwrap();
        if config.ends_with("crash") {
            assert_eq!(r["status"], "failed", "{r}");
            assert_eq!(r["failure"]["kind"], "cuda_illegal_instruction", "{r}");
        } else {
            assert_eq!(r["status"], "ok", "{r}");
        }
    }
    let events = events(&run);
    for config in gpu_of.keys() {
        let starts = events
            .iter()
            .filter(|e| e["event"] == "config_starting" && e["config"] == config.as_str())
            .count();
        assert_eq!(starts, 1, "{config} launched once");
    }
    let crash_at = results
        .iter()
        .find(|r| r["status"] == "failed")
        .map(|r| r["finished_at"].as_str().unwrap().to_string())
        .unwrap();
    let beside_crash = results.iter().any(|r| {
        r["status"] == "ok"
            && r["beside"]
                .as_array()
                .unwrap()
                .iter()
                .any(|b| b.as_str().unwrap().ends_with("crash"))
    });
    assert!(beside_crash, "healthy cells ran beside the crashing config");
    let after_crash = results
        .iter()
        .filter(|r| r["status"] == "ok")
        .filter(|r| r["finished_at"].as_str().unwrap() > crash_at.as_str())
        .count();
    assert!(after_crash > 0, "healthy cells went on after the crash");

    // Side by side: some moment had every config's server up at once.
    let mut live = 0i32;
    let mut most = 0i32;
    for e in &events {
        match e["event"].as_str() {
            Some("server_ready") => live += 1,
            Some("server_stopped") => live -= 1,
            _ => {}
        }
        most = most.max(live);
    }
    assert_eq!(most, 6, "all six servers were up together");
    // The phase takes about as long as its longest config.
    let longest_s = gpu_of
        .keys()
        .map(|config| {
            let at = |kind: &str| {
                events
                    .iter()
                    .filter(|e| e["event"] == kind && e["config"] == config.as_str())
                    .filter_map(|e| e["at"].as_str())
                    .next_back()
                    .unwrap()
                    .to_string()
            };
            seconds_between(&at("config_starting"), &at("server_stopped"))
        })
        .fold(0.0, f64::max);

    // One at a time, the same phase takes several times as long.
    let (sequential_s, seq_run) = sweep("pack-off", false);
    let seq = common::results(&seq_run);
    assert!(seq
        .iter()
        .all(|r| r["beside"].as_array().unwrap().is_empty()));
    println!(
        "6-config TP1 phase on 8 simulated GPUs: packed {packed_s:.1} s (longest config {longest_s:.1} s), one at a time {sequential_s:.1} s ({:.1}x)",
        sequential_s / packed_s
    );
    assert!(
        packed_s < longest_s * 2.0,
        "packed {packed_s:.1} s, longest config {longest_s:.1} s"
    );
    assert!(
        packed_s * 2.0 < sequential_s,
        "packed {packed_s:.1} s vs sequential {sequential_s:.1} s"
    );
}
