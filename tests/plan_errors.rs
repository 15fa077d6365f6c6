//! Bad plans and failed preflights give clear, located errors and recorded results.

use crate::common;

use std::time::Duration;

use common::*;

#[test]
fn misspelled_key_exits_nonzero_naming_file_line_col() {
    let dir = scratch("badplan");
    let plan = dir.join("bad.toml");
    let text = include_str!("../sample_runs/demo.toml")
        .replace("concurrency = [1, 4]", "concurency = [1, 4]");
    std::fs::write(&plan, &text).unwrap();
    let mut cmd = sweeptop("badplan");
    cmd.arg("check").arg(&plan);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let line = text
        .lines()
        .position(|l| l.starts_with("concurency"))
        .unwrap()
        + 1;
    assert!(
        err.contains(&format!("{}:{line}:1:", plan.display())),
        "{err}"
    );
    assert!(err.contains("concurency"), "{err}");
    // `run` refuses it the same way, before creating anything.
    let mut cmd = sweeptop("badplan");
    cmd.arg("run")
        .arg(&plan)
        .arg("--headless")
        .arg("--out")
        .arg(dir.join("run"));
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!(":{line}:1:")));
    assert!(!dir.join("run").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_json_lists_configs_and_cells() {
    let out = std::process::Command::new(bin())
        .args(["check", "--json", "sample_runs/qwen3.6-27b-sglang.toml"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let configs: Vec<&str> = v["configs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(configs.contains(&"tp8-ddtree-b16"));
    assert!(!configs.contains(&"tp1-ddtree-b8"), "excluded budget");
    assert_eq!(
        v["count"]["cells"].as_u64().unwrap() as usize,
        v["cells"].as_array().unwrap().len()
    );
}

#[test]
fn missing_model_path_fails_preflight_with_a_hint_and_the_sweep_goes_on() {
    let dir = scratch("preflight");
    let (out_dir, _) = run_plan(
        &dir,
        "preflight",
        r#"
name = "preflight"
[vars]
model = "/dev/shm/sweeptop-test-no-such-model"
[server]
command = "{sweeptop} sim-server --port {port} --startup-ms 50 --max-speed"
port = "auto"
requires = ["{model}"]
ready = { timeout_s = 20 }
[limits]
context = 4096
[[workloads]]
id = "w"
contexts = [100]
concurrency = [1]
requests = 1
max_tokens = 4
[[phases]]
id = "p"
  [phases.matrix]
  method = ["a", "b"]
  [[phases.set]]
  when = { method = "b" }
  vars = { model = "/" }
"#,
        Duration::from_secs(60),
    );
    let results = results(&out_dir);
    let a = results.iter().find(|r| r["config"] == "a").unwrap();
    assert_eq!(a["status"], "failed");
    assert_eq!(a["failure"]["source"], "preflight");
    let msg = a["failure"]["message"].as_str().unwrap();
    assert!(
        msg.contains("/dev/shm/sweeptop-test-no-such-model") && msg.contains("reboot"),
        "{msg}"
    );
    let b = results.iter().find(|r| r["config"] == "b").unwrap();
    assert_eq!(b["status"], "ok", "{b}");
    let _ = std::fs::remove_dir_all(&dir);
}
