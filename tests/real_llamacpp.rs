//! Against a real llama.cpp `llama-server` (opt-in: `SWEEPTOP_LLAMACPP_SERVER`
//! names the built binary, `SWEEPTOP_LLAMACPP_MODEL` a GGUF, default
//! `/tmp/llamacpp/tiny.gguf`; `../shared/harness/llamacpp/setup.sh` builds
//! both). Without them this test says so and passes: the normal suite needs
//! only cargo. What the real server must give: ready on its own log line;
//! prompts exactly at target as it counts them (its `/tokenize` takes
//! `content`); one slot's context (`--ctx-size 2048 --parallel 4` = 512) as
//! the limit, so a prompt that fits the model but not a slot is its own 400
//! (`context_overflow`) and one that fits while prompt + max_tokens does not
//! is `short_output`; its per-request `timings` as the server's figures, a
//! TTFT a little under the client's, nothing cached on cold cells
//! (`cache_prompt: false`); SIGSEGV and SIGABRT mid-cell recorded as
//! `signal_crash` while the sweep goes on, on a fresh server; a model file
//! that is not a GGUF a `startup_failed` in llama.cpp's words; with
//! `--context-shift` a request past the slot is a `context_shift` warning;
//! and `loadtest`'s decode rate within 5 % of the server's own.
//!
//!   SWEEPTOP_LLAMACPP_SERVER=/tmp/llamacpp/llama-server cargo test --test real_llamacpp -- --nocapture

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// Cells long enough to be killed in: the server gets SIGSEGV once the first
/// has a finished request, SIGABRT once the second has. Each is run again
/// on a relaunched server (`retries = 2`).
const CRASH: &str = r#"
[[workloads]]
id = "segv"
contexts = [256]
concurrency = [4]
requests = 160
max_tokens = 200

[[workloads]]
id = "abrt"
contexts = [128]
concurrency = [4]
requests = 160
max_tokens = 200
"#;

const KILLS: [(&str, &str); 2] = [
    ("cpu/segv-ctx256-c4", "SEGV"),
    ("cpu/abrt-ctx128-c4", "ABRT"),
];

/// Send each of `KILLS`' signals to the tagged llama-server once its cell
/// has a finished request on disk.
fn kill_server_mid_cells(run: PathBuf, tag: String) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut sent = 0;
        for (cell, signal) in KILLS {
            if !cell_has_a_request(&run, cell, Duration::from_secs(300)) {
                return sent;
            }
            for pid in tagged_processes(&tag) {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                if comm.trim() == "llama-server" {
                    let ok = Command::new("kill")
                        .args([format!("-{signal}"), pid.to_string()])
                        .status()
                        .is_ok_and(|s| s.success());
                    eprintln!("SIG{signal} to llama-server {pid} in {cell}: {ok}");
                    sent += ok as usize;
                }
            }
        }
        sent
    })
}

fn plan_for(server: &str, model: &str) -> String {
    include_str!("../sample_runs/llamacpp-cpu.toml")
        .replace(
            "server = \"/tmp/llamacpp/llama-server\"",
            &format!("server = {server:?}"),
        )
        .replace(
            "model = \"/tmp/llamacpp/tiny.gguf\"",
            &format!("model = {model:?}"),
        )
}

#[test]
fn a_real_llamacpp_sweep_records_what_the_server_did() {
    let Ok(server) = std::env::var("SWEEPTOP_LLAMACPP_SERVER") else {
        eprintln!("SWEEPTOP_LLAMACPP_SERVER is not set: the real llama.cpp check is not run");
        return;
    };
    let model = std::env::var("SWEEPTOP_LLAMACPP_MODEL")
        .unwrap_or_else(|_| "/tmp/llamacpp/tiny.gguf".into());
    let plan = plan_for(&server, &model)
        .replace("stop_grace_s = 10", "stop_grace_s = 10\nretries = 2")
        + CRASH;
    let dir = scratch("real-llamacpp");
    let tag = format!("real-llamacpp-{}", std::process::id());
    let killer = kill_server_mid_cells(dir.join("run"), tag.clone());
    let (run, stdout) = run_plan(&dir, &tag, &plan, Duration::from_secs(600));
    eprintln!("{stdout}");
    assert_eq!(
        killer.join().unwrap(),
        2,
        "the server was not found for both signals"
    );
    let by = by_cell(&results(&run));
    let mut wire_cells = 0;
    for cell in [
        "fit-ctx128-c1",
        "fit-ctx128-c4",
        "fit-ctx400-c1",
        "fit-ctx400-c4",
        "segv-ctx256-c4",
        "abrt-ctx128-c4",
    ] {
        let r = by[&format!("cpu/{cell}")].last().unwrap();
        assert_result_line(r);
        let m = &r["metrics"];
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(m["output_tokens"], m["output_tokens_asked"], "{r}");
        let target = r["context_tokens"].as_u64().unwrap();
        assert_eq!(m["prompt_tokens_min"].as_u64(), Some(target), "{r}");
        assert_eq!(m["prompt_tokens_max"].as_u64(), Some(target), "{r}");
        // The server's own clock, from every request's `timings`.
        assert_eq!(m["server_requests"], m["requests"], "{r}");
        let (client, srv) = (
            m["ttft_ms_mean"].as_f64().unwrap(),
            m["server_ttft_ms_mean"].as_f64().unwrap(),
        );
        let gap = client - srv;
        assert!(gap >= 0.0, "client − server TTFT {gap} ms: {r}");
        // On the kernel's receive clock: the client's read lag is measured,
        // and only a client over 20 ms late (p99) says it was starved.
        // Null when no read of the cell carried a usable kernel timestamp:
        // then it was timed on the read clock, and says so by that null.
        let lag = m["client_lag_ms_p99"].as_f64();
        wire_cells += usize::from(lag.is_some());
        let lag = lag.unwrap_or(f64::NAN);
        let expected = warnings_its_figures_explain(r, gap);
        assert_eq!(warning_kinds(r), expected, "{r}");
        assert_eq!(m["prefix_cache_hit_pct"].as_f64(), Some(0.0), "{r}");
        eprintln!(
            "{cell}: prompt {target} exact, TTFT client {client:.2} ms, server {srv:.2} ms, gap {gap:+.2} ms, read lag p99 {lag:.3} ms, ITL client {:.3} ms, server {:.3} ms, cache hits {}%",
            m["itl_ms_mean"].as_f64().unwrap(),
            m["server_itl_ms_mean"].as_f64().unwrap(),
            m["prefix_cache_hit_pct"]
        );
    }
    // The kernel's receive clock, on most cells at least.
    assert!(wire_cells >= 3, "{wire_cells} of 6 cells on the wire clock");
    // 480 fits a 512-token slot, 480 + 64 does not: llama.cpp stops early.
    let short = &by["cpu/edge-ctx480-c1"][0];
    assert_eq!(short["status"], "ok", "{short}");
    assert_eq!(
        warning_kinds_of_the_cell(short),
        ["short_output"],
        "{short}"
    );
    assert_eq!(short["warnings"][0]["context"]["limit"], 512, "{short}");
    // 600 fits the model's 2048 but not a slot: the server's own 400.
    let over = &by["cpu/edge-ctx600-c1"][0];
    assert_eq!(over["status"], "failed", "{over}");
    assert_eq!(over["failure"]["kind"], "context_overflow", "{over}");
    assert_eq!(over["failure"]["context"]["limit"], 512, "{over}");
    assert_eq!(over["failure"]["context"]["prompt_tokens"], 600, "{over}");
    // Each signal: a crash recorded first, the cell run again on a fresh
    // server (its second record, ok above).
    for (cell, _) in KILLS {
        assert_eq!(by[cell].len(), 2, "{:?}", by[cell]);
        let crash = &by[cell][0];
        assert_eq!(crash["status"], "failed", "{crash}");
        assert_eq!(crash["failure"]["kind"], "signal_crash", "{crash}");
        eprintln!("{cell}: {}", crash["failure"]["message"]);
    }
    // What was benchmarked: the build, the model file and its head's hash.
    let events = std::fs::read_to_string(run.join("events.jsonl")).unwrap();
    assert!(
        events.contains(&format!("\"model_path\":{model:?}")),
        "{events}"
    );
    assert!(events.contains("\"model_file_head_sha256\":\""), "{events}");
    assert!(
        stdout.contains("each with 512 tokens of context of its own"),
        "{stdout}"
    );
    assert!(
        tagged_processes(&tag).is_empty(),
        "the server is left running"
    );

    not_a_gguf_is_a_startup_failure_in_its_words(&server);
    context_shift_is_flagged(&server, &model);
    loadtest_agrees_with_the_servers_timings(&server, &model);
}

/// A model file that is not a GGUF: the config fails to start, in
/// llama.cpp's own words.
fn not_a_gguf_is_a_startup_failure_in_its_words(server: &str) {
    let dir = scratch("real-llamacpp-bad");
    let bad = dir.join("bad.gguf");
    std::fs::write(&bad, b"this is not a model".repeat(100)).unwrap();
    let plan = plan_for(server, bad.to_str().unwrap());
    let tag = format!("real-llamacpp-bad-{}", std::process::id());
    let plan_file = dir.join("plan.toml");
    std::fs::write(&plan_file, plan).unwrap();
    let out = run_with_deadline(
        headless_run(&tag, &plan_file, &dir.join("run")),
        Duration::from_secs(120),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rs = results(&dir.join("run"));
    assert!(!rs.is_empty(), "{stdout}");
    for r in &rs {
        assert_eq!(r["status"], "failed", "{r}");
        assert_eq!(r["failure"]["kind"], "startup_failed", "{r}");
    }
    let said = rs[0]["failure"].to_string();
    assert!(
        said.contains("invalid magic") || said.contains("failed to load model"),
        "{said}"
    );
    eprintln!("not a GGUF: {}", rs[0]["failure"]["message"]);
}

/// A llama-server of our own on a free port, stopped when dropped.
struct Server(std::process::Child, String);

impl Server {
    fn start(server: &str, model: &str, extra: &[&str]) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(server)
            .args([
                "-m",
                model,
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ])
            .args(["--ctx-size", "2048", "--parallel", "4", "--threads", "1"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Stopped when dropped, a failed start included.
        let started = Server(child, format!("http://127.0.0.1:{port}"));
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let ok = std::net::TcpStream::connect(("127.0.0.1", port)).is_ok_and(|mut s| {
                use std::io::{Read, Write};
                let _ = write!(
                    s,
                    "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                );
                let mut head = [0u8; 12];
                s.read_exact(&mut head).is_ok() && head.ends_with(b"200")
            });
            if ok {
                return started;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "llama-server did not get ready"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn loadtest(base: &str, args: &[&str]) -> serde_json::Value {
    let mut cmd = Command::new(bin());
    cmd.args(["loadtest", base, "--json"]).args(args);
    let out = run_with_deadline(cmd, Duration::from_secs(300));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// With `--context-shift`, a request that runs past its slot is answered in
/// full by dropping old tokens: a warning, with the numbers.
fn context_shift_is_flagged(server: &str, model: &str) {
    let s = Server::start(server, model, &["--context-shift"]);
    let v = loadtest(
        &s.1,
        &[
            "--prompt-tokens",
            "480",
            "--max-tokens",
            "64",
            "--requests",
            "4",
        ],
    );
    assert_eq!(warning_kinds_of_the_cell(&v), ["context_shift"], "{v}");
    eprintln!("--context-shift: {}", v["warnings"][0]["message"]);
}

/// The same server and workload: the client's decode rate within 5 % of the
/// server's own, its TTFT a little over the server's.
fn loadtest_agrees_with_the_servers_timings(server: &str, model: &str) {
    let s = Server::start(server, model, &[]);
    let v = loadtest(
        &s.1,
        &[
            "--prompt-tokens",
            "128",
            "--max-tokens",
            "256",
            "--requests",
            "32",
            "--warmup",
            "2",
        ],
    );
    let client = v["decode_tok_s_mean"].as_f64().unwrap();
    let srv = 1000.0 / v["server_itl_ms_mean"].as_f64().unwrap();
    let off = (client - srv) / srv * 100.0;
    let gap = v["ttft_ms_mean"].as_f64().unwrap() - v["server_ttft_ms_mean"].as_f64().unwrap();
    eprintln!(
        "loadtest c1, 128 + 256 tokens, 32 requests: decode {client:.1} tok/s here, {srv:.1} tok/s by the server ({off:+.2} %); TTFT {:.2} ms here, {:.2} ms by the server ({gap:+.2} ms)",
        v["ttft_ms_mean"].as_f64().unwrap_or(f64::NAN),
        v["server_ttft_ms_mean"].as_f64().unwrap_or(f64::NAN)
    );
    assert!(off.abs() < 5.0, "{v}");
    assert!((0.0..25.0).contains(&gap), "{v}");
    // The mean ITL too: every token counted once (a chunk that carried two
    // tokens splits its gap, a short one is not left without a token).
    let (itl, srv_itl) = (
        v["itl_ms_mean"].as_f64().unwrap(),
        v["server_itl_ms_mean"].as_f64().unwrap(),
    );
    let itl_off = (itl - srv_itl) / srv_itl * 100.0;
    eprintln!("ITL mean {itl:.4} ms here, {srv_itl:.4} ms by the server ({itl_off:+.2} %)");
    assert!(itl_off.abs() < 5.0, "{v}");
}
