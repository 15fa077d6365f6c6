//! Helpers for end-to-end tests: run the real binary, read run directories, and
//! find processes a test started (tagged through an environment variable that
//! the servers inherit).
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_sweeptop")
}

/// A fresh scratch directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sweeptop-e2e-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A command for the binary, tagged so its descendants can be found.
pub fn sweeptop(tag: &str) -> Command {
    let mut c = Command::new(bin());
    c.env("SWEEPTOP_TEST_TAG", tag).stdin(Stdio::null());
    c
}

/// Run to completion with a deadline; kills the process and panics past it.
pub fn run_with_deadline(mut cmd: Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_output(child, limit)
}

pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    // Drain both pipes while waiting, or a chatty child blocks on a full pipe.
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let (stdout, stderr) = (
                out.join().unwrap_or_default(),
                err.join().unwrap_or_default(),
            );
            panic!(
                "timed out after {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&stdout),
                String::from_utf8_lossy(&stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Read one HTTP/1.1 request from a test server's connection: its path and
/// body (by `content-length`).
pub fn read_http_request(stream: &std::net::TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    use std::io::{BufRead, Read};
    let mut reader = std::io::BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split(' ').nth(1).unwrap_or("/").to_string();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" {
            break;
        }
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((path, body))
}

/// Wait until a cell of the run in `run` has a finished request on disk
/// (its `requests/<cell>.jsonl` has a line); false when `limit` passed first.
pub fn cell_has_a_request(run: &Path, cell: &str, limit: Duration) -> bool {
    let records = run
        .join("requests")
        .join(format!("{}.jsonl", cell.replace('/', "__")));
    let deadline = Instant::now() + limit;
    loop {
        if std::fs::read_to_string(&records).is_ok_and(|t| t.lines().next().is_some()) {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The kinds of a result line's warnings, in order.
pub fn warning_kinds(r: &serde_json::Value) -> Vec<String> {
    r["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .map(|w| w["kind"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// [`warning_kinds`] without the one a busy machine may add to any cell: a
/// `client_starved` its own read lag explains (over 20 ms at p99; the
/// figures stand, they are on the kernel's receive clock).
pub fn warning_kinds_of_the_cell(r: &serde_json::Value) -> Vec<String> {
    // A result line holds its figures under `metrics`; `loadtest --json`
    // beside its warnings.
    let lag = r["metrics"]["client_lag_ms_p99"]
        .as_f64()
        .or(r["client_lag_ms_p99"].as_f64())
        .unwrap_or(0.0);
    warning_kinds(r)
        .into_iter()
        .filter(|k| !(k == "client_starved" && lag > sweeptop::detect::LATE_READ_MS))
        .collect()
}

/// The warnings a real server's ok cell may carry, from its own figures:
/// `clock_gap` when the client's TTFT is over 25 ms from the server's (a
/// busy front end), `client_starved` when its read lag p99 (the kernel's
/// receive clock; null on the read clock) is over 20 ms. Nothing else.
pub fn warnings_its_figures_explain(r: &serde_json::Value, gap_ms: f64) -> Vec<&'static str> {
    let lag = r["metrics"]["client_lag_ms_p99"].as_f64();
    let mut expected = Vec::new();
    if gap_ms > 25.0 {
        expected.push("clock_gap");
    }
    if lag.is_some_and(|l| l > sweeptop::detect::LATE_READ_MS) {
        expected.push("client_starved");
    }
    expected
}

/// Poll a condition until it holds or the deadline passes.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn results(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("results.jsonl")).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad result line {l}: {e}")))
        .collect()
}

/// Every field a result line always has (the contract users' scripts read).
pub fn assert_result_line(r: &serde_json::Value) {
    for key in [
        "cell",
        "config",
        "phase",
        "workload",
        "context_tokens",
        "concurrency",
        "status",
        "failure",
        "metrics",
        "started_at",
        "finished_at",
    ] {
        assert!(r.get(key).is_some(), "{key} missing in {r}");
    }
}

pub fn events(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("events.jsonl")).unwrap_or_default();
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub fn by_cell(results: &[serde_json::Value]) -> HashMap<String, Vec<serde_json::Value>> {
    let mut m: HashMap<String, Vec<serde_json::Value>> = HashMap::new();
    for r in results {
        m.entry(r["cell"].as_str().unwrap().to_string())
            .or_default()
            .push(r.clone());
    }
    m
}

/// Live processes (not zombies) whose environment carries the tag.
pub fn tagged_processes(tag: &str) -> Vec<u32> {
    let needle = format!("SWEEPTOP_TEST_TAG={tag}");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !env.split(|&b| b == 0).any(|v| v == needle.as_bytes()) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|s| s.split_whitespace().next())
            .unwrap_or("");
        if state != "Z" {
            out.push(pid);
        }
    }
    out
}

pub fn plan_cells(plan: &Path) -> Vec<String> {
    let out = Command::new(bin())
        .args(["check", "--json"])
        .arg(plan)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect()
}

/// Kills every process carrying the tag when dropped, so a failing test does not
/// leave a detached sweep (or its servers) running.
pub struct KillTagged(pub String);

impl Drop for KillTagged {
    fn drop(&mut self) {
        for pid in tagged_processes(&self.0) {
            // SAFETY: plain kill(2).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

/// One config, one short cell on the simulated server.
pub const TINY_PLAN: &str = r#"
name = "tiny"
[server]
command = "{sweeptop} sim-server --port {port} --startup-ms 50 --ttft-ms 5 --itl-ms 2"
port = "auto"
stop_grace_s = 1
[limits]
context = 4096
[[workloads]]
id = "w"
contexts = [64]
concurrency = [1]
requests = 2
max_tokens = 8
[[phases]]
id = "p"
"#;

/// [`TINY_PLAN`] with one config per `healthy` kind and one, `crash`, whose
/// server dies with a CUDA illegal instruction on its first request.
pub fn tiny_plan_with_crash(healthy: &[&str]) -> String {
    let kinds: Vec<String> = healthy
        .iter()
        .chain(&["crash"])
        .map(|k| format!("\"{k}\""))
        .collect();
    format!(
        "{TINY_PLAN}vars = {{ fault = \"\" }}\nmatrix = {{ kind = [{}] }}\n\
         [[phases.set]]\nwhen = {{ kind = \"crash\" }}\n\
         vars = {{ fault = \"--fault crash:cuda_illegal_instruction@1\" }}\n",
        kinds.join(", ")
    )
    .replace("--itl-ms 2\"", "--itl-ms 2 {fault}\"")
}

/// `sweeptop run PLAN --headless --no-gpu --out OUT`, tagged.
pub fn headless_run(tag: &str, plan: &Path, out: &Path) -> Command {
    let mut cmd = sweeptop(tag);
    cmd.arg("run")
        .arg(plan)
        .args(["--headless", "--no-gpu", "--out"])
        .arg(out);
    cmd
}

/// Write a plan into `dir` and run it headless without GPU telemetry; panics
/// (with the output) unless the sweep finished. Returns the run directory and
/// what the sweep printed.
pub fn run_plan(dir: &Path, tag: &str, plan_text: &str, limit: Duration) -> (PathBuf, String) {
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, plan_text).unwrap();
    let out_dir = dir.join("run");
    let out = run_with_deadline(headless_run(tag, &plan, &out_dir), limit);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (out_dir, stdout)
}

/// A stand-in `sbatch` in `bin`: it records each call's arguments in
/// `bin/sbatch.calls` and answers job id 4242, as `sbatch --parsable` does.
pub fn fake_sbatch(bin: &Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(bin).unwrap();
    let p = bin.join("sbatch");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\necho \"$@\" >> {}/sbatch.calls\necho 4242\n",
            bin.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Two configs (`a`, `b`) of the simulated server, each running one cell per
/// context with `requests` requests of `max_tokens` tokens `itl_ms` apart.
pub fn two_config_plan(
    name: &str,
    itl_ms: u32,
    contexts: &[u32],
    requests: u32,
    max_tokens: u32,
) -> String {
    let contexts: Vec<String> = contexts.iter().map(u32::to_string).collect();
    format!(
        r#"
name = "{name}"
[server]
command = "{{sweeptop}} sim-server --port {{port}} --startup-ms 50 --ttft-ms 5 --itl-ms {itl_ms}"
port = "auto"
stop_grace_s = 1
[limits]
context = 4096
[[workloads]]
id = "w"
contexts = [{}]
concurrency = [1]
requests = {requests}
max_tokens = {max_tokens}
[[phases]]
id = "p"
matrix = {{ n = ["a", "b"] }}
"#,
        contexts.join(", ")
    )
}
