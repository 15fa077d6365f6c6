//! Every crash kind the simulated server can inject, in both server flavors, is
//! recorded with the right kind and evidence, and the next config runs on a
//! fresh server; hangs are caught by the stall timeout and the group is gone.

use crate::common;

use std::time::Duration;

use common::*;

const PLAN: &str = r#"
name = "faults"
config_id = "{flavor}-{fault}"

[server]
command = "{sweeptop} sim-server --flavor {flavor} --port {port} --tp 2 --startup-ms 100 --ttft-ms 5 --itl-ms 2 {spec}"
port = "auto"
stop_grace_s = 2
ready = { timeout_s = 3 }

[limits]
context = 4096
stall_timeout_s = 1.5
request_timeout_s = 30

[[workloads]]
id = "w"
contexts = [64]
concurrency = [1, 2]
requests = 2
max_tokens = 16

[[phases]]
id = "all"
  [phases.matrix]
  flavor = ["sglang", "vllm"]
  fault = ["cuda_illegal_instruction", "cuda_illegal_address", "cuda_oom", "device_assert", "nccl_error",
           "triton_error", "signal_crash", "oom_killed", "server_exited", "engine_dead",
           "startup_no_kernel_image", "startup_cuda_oom", "startup_hang", "hang", "none"]
  [[phases.set]]
  when = { fault = ["cuda_illegal_instruction", "cuda_illegal_address", "cuda_oom", "device_assert", "nccl_error", "triton_error", "signal_crash", "oom_killed", "server_exited", "engine_dead"] }
  vars = { spec = "--fault crash:{fault}@10" }
  [[phases.set]]
  when = { fault = "startup_no_kernel_image" }
  vars = { spec = "--fault startup-crash:no_kernel_image" }
  [[phases.set]]
  when = { fault = "startup_cuda_oom" }
  vars = { spec = "--fault startup-crash:cuda_oom" }
  [[phases.set]]
  when = { fault = "startup_hang" }
  vars = { spec = "--fault startup-hang" }
  [[phases.set]]
  when = { fault = "hang" }
  vars = { spec = "--fault hang@10" }
  [[phases.set]]
  when = { fault = "none" }
  vars = { spec = "" }
"#;

#[test]
fn every_injected_fault_is_recorded_with_its_kind_and_evidence() {
    let dir = scratch("faults");
    let tag = format!("faults-{}", std::process::id());
    let (out_dir, stdout) = run_plan(&dir, &tag, PLAN, Duration::from_secs(240));
    let results = results(&out_dir);
    assert_eq!(results.len(), 2 * 15 * 2, "{stdout}");
    fn expect(fault: &str) -> &str {
        match fault {
            "engine_dead" | "server_exited" => "server_exited",
            "startup_no_kernel_image" => "no_kernel_image",
            "startup_cuda_oom" => "cuda_oom",
            "startup_hang" => "startup_timeout",
            "hang" => "stalled",
            "none" => "",
            k => k,
        }
    }
    for flavor in ["sglang", "vllm"] {
        for fault in [
            "cuda_illegal_instruction",
            "cuda_illegal_address",
            "cuda_oom",
            "device_assert",
            "nccl_error",
            "triton_error",
            "signal_crash",
            "oom_killed",
            "server_exited",
            "engine_dead",
            "startup_no_kernel_image",
            "startup_cuda_oom",
            "startup_hang",
            "hang",
            "none",
        ] {
            let config = format!("{flavor}-{fault}");
            let cells: Vec<_> = results
                .iter()
                .filter(|r| r["config"] == config.as_str())
                .collect();
            assert_eq!(cells.len(), 2, "{config}");
            let first = cells[0];
            if fault == "none" {
                // A healthy config after all the crashes runs on a fresh server.
                for c in &cells {
                    assert_eq!(c["status"], "ok", "{c}");
                    // --no-gpu: the GPU figures are there, and null.
                    assert!(c["metrics"]["gpu_mem_peak_mib"].is_null(), "{c}");
                    assert!(c["metrics"]["gpu_util_mean"].is_null(), "{c}");
                }
                continue;
            }
            assert_eq!(first["status"], "failed", "{config}: {first}");
            assert_eq!(first["failure"]["kind"], expect(fault), "{config}: {first}");
            let evidence = first["failure"]["evidence"].as_array().unwrap();
            if !["server_exited", "engine_dead", "startup_hang", "hang"].contains(&fault) {
                assert!(!evidence.is_empty(), "{config}: no evidence in {first}");
            }
            if fault == "hang" {
                // The stall is caught after the stall timeout, not long after it
                // (a busy machine may be late by seconds, a missed stall by the
                // whole request timeout), and the next cell of the config runs
                // on a fresh server.
                let msg = first["failure"]["message"].as_str().unwrap();
                let secs: f64 = msg
                    .split("for ")
                    .nth(1)
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!((1.5..8.0).contains(&secs), "{msg}");
                // It says how many requests hung, and what the server said last.
                assert!(msg.contains("1 request(s) in flight"), "{msg}");
                assert!(
                    evidence.len() > 1 && evidence[0].as_str().unwrap().contains("server log"),
                    "{config}: {first}"
                );
            }
        }
    }
    // Each config's server was launched on its own; every group is gone.
    let starts = stdout.matches(": starting").count();
    assert!(starts >= 30, "{starts} launches\n{stdout}");
    assert!(tagged_processes(&tag).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_crashed_config_is_relaunched_as_the_plan_allows_then_marked() {
    let dir = scratch("retry");
    let (out_dir, _stdout) = run_plan(
        &dir,
        "retry",
        r#"
name = "retry"
[server]
command = "{sweeptop} sim-server --port {port} --startup-ms 50 --ttft-ms 5 --itl-ms 2 --fault crash:cuda_illegal_address@40"
port = "auto"
retries = 1
stop_grace_s = 1
[limits]
context = 4096
[[workloads]]
id = "w"
contexts = [64]
concurrency = [1]
requests = 4
max_tokens = 16
[[phases]]
id = "p"
"#,
        Duration::from_secs(60),
    );
    let starts: Vec<_> = events(&out_dir)
        .into_iter()
        .filter(|e| e["event"] == "config_starting")
        .collect();
    assert_eq!(starts.len(), 2, "one launch and one retry");
    assert_eq!(starts[1]["attempt"], 2);
    // Each attempt's crash is recorded; the last record is the cell's result.
    let results = results(&out_dir);
    assert_eq!(results.len(), 2, "one record per attempt");
    for r in &results {
        assert_eq!(r["cell"], "p/w-ctx64-c1");
        assert_eq!(r["failure"]["kind"], "cuda_illegal_address");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_exit_no_pattern_knows_is_named_by_its_last_exception() {
    let dir = scratch("traceback");
    // A server that prints a Python traceback no pattern knows, then exits 1.
    let plan = TINY_PLAN.replace(
        "command = \"{sweeptop} sim-server --port {port} --startup-ms 50 --ttft-ms 5 --itl-ms 2\"",
        r#"shell = true
command = "printf 'INFO starting\nTraceback (most recent call last):\n  File \"sched.py\", line 9, in step\n    self.reqs[rid]\nKeyError: %s\n' \"'rid-42'\"; exit 1""#,
    );
    let (out_dir, _stdout) = run_plan(&dir, "traceback", &plan, Duration::from_secs(60));
    let results = results(&out_dir);
    let f = &results[0]["failure"];
    assert_eq!(f["kind"], "startup_failed", "{f}");
    assert_eq!(
        f["message"], "server exited during startup (exit code 1): KeyError: 'rid-42'",
        "{f}"
    );
    let evidence: Vec<&str> = f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(
        evidence.first(),
        Some(&"Traceback (most recent call last):"),
        "{f}"
    );
    assert_eq!(evidence.last(), Some(&"KeyError: 'rid-42'"), "{f}");
    let _ = std::fs::remove_dir_all(&dir);
}
