//! `sweeptop loadtest` against a running simulated server with exact pacing.

use crate::common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;

/// `GET /health` answers 200.
fn health_ok(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let mut reply = String::new();
    s.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .is_ok()
        && s.read_to_string(&mut reply).is_ok()
        && reply.starts_with("HTTP/1.1 200")
}

#[test]
fn loadtest_measures_a_fixed_pace_server() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let tag = format!("loadtest-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let mut server = sweeptop(&tag)
        .args([
            "sim-server",
            "--port",
            &port.to_string(),
            "--ttft-ms",
            "200",
            "--itl-ms",
            "10",
            "--startup-ms",
            "10",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Listening is not ready: until its start-up is done the server answers 503.
    wait_until(Duration::from_secs(20), "the server to be healthy", || {
        health_ok(port)
    });
    let dir = scratch("loadtest");
    let records = dir.join("req.jsonl");
    let mut cmd = Command::new(bin());
    cmd.args([
        "loadtest",
        &format!("http://127.0.0.1:{port}"),
        "--concurrency",
        "64",
        "--requests",
        "256",
        "--max-tokens",
        "128",
        "--json",
        "--records",
    ])
    .arg(&records);
    let out = run_with_deadline(cmd, Duration::from_secs(120));
    // The text form: every metric once, the client − server TTFT gap among
    // them (the server reports its own TTFT), on one line.
    let mut text = Command::new(bin());
    text.args(["loadtest", &format!("http://127.0.0.1:{port}")])
        .args(["--concurrency", "2", "--requests", "4", "--max-tokens", "8"]);
    let text = run_with_deadline(text, Duration::from_secs(60));
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = String::from_utf8_lossy(&text.stdout);
    assert!(text.status.success(), "{shown}");
    assert!(
        shown.contains("prompt target 256 tokens, measured 256"),
        "{shown}"
    );
    assert_eq!(shown.matches("TTFT client").count(), 1, "{shown}");
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m["requests"], 256);
    assert_eq!(m["failed_requests"], 0);
    assert_eq!(m["output_tokens"], 32768);
    assert_eq!(m["tokens_estimated"], false);
    // Timed on the kernel's receive clock, said in both forms, with both
    // clocks kept per request.
    assert_eq!(m["timing_clock"], "wire", "{m}");
    assert!(m["client_lag_ms_p99"].as_f64().is_some(), "{m}");
    assert!(
        shown.contains("chunks timed on the kernel's receive clock"),
        "{shown}"
    );
    // The prompt reached its target exactly, as the server counts tokens.
    assert_eq!(m["prompt_tokens_measured"], 256);
    assert_eq!(m["prompt_tokens_mean"].as_f64(), Some(256.0));
    // Bounds with room for a busy machine; `cargo bench --bench load` has the
    // precise figures.
    let ttft = m["ttft_ms_p50"].as_f64().unwrap();
    let itl = m["itl_ms_p50"].as_f64().unwrap();
    // The server's pace is a floor no honest clock reads under; above it a
    // busy machine may add any delay, so only a wrong unit would pass 1 s.
    assert!((199.0..1000.0).contains(&ttft), "TTFT p50 {ttft}");
    assert!((5.0..100.0).contains(&itl), "ITL p50 {itl}");
    // The client sees the first token after the server sent it.
    let gap = m["ttft_gap_ms"]
        .as_f64()
        .expect("the server reports its TTFT");
    assert!(gap >= -0.5, "client − server TTFT {gap} ms");
    // The raw timelines went to --records, one line per request, and give the
    // same figures again.
    let recs = sweeptop::store::read_requests(&records).unwrap();
    assert_eq!(recs.len(), 256);
    assert!(recs
        .iter()
        .all(|r| r.chunks.len() == 128 && r.read_lag_us.len() == 128 && r.error.is_none()));
    let again = sweeptop::load::metrics::compute(&recs, 1);
    assert_eq!(again.output_tokens, 32768);
    assert_eq!(Some(again.ttft_ms_p50), m["ttft_ms_p50"].as_f64());
    assert_eq!(again.itl_ms_p50, m["itl_ms_p50"].as_f64());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_url_the_client_cannot_use_is_a_clear_error() {
    for (url, says) in [
        ("https://127.0.0.1:1", "only http:// is supported"),
        ("127.0.0.1:30000", "needs http://"),
    ] {
        let mut cmd = Command::new(bin());
        cmd.args(["loadtest", url, "--requests", "1"]);
        let out = run_with_deadline(cmd, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert!(err.contains(url) && err.contains(says), "{url}: {err}");
    }
}

#[test]
fn times_and_rates_that_make_no_sense_are_refused_before_anything_is_sent() {
    for bad in [
        "--request-timeout=-1",
        "--request-timeout=1e30",
        "--duration=-1",
        "--duration=NaN",
        "--rate=0",
    ] {
        let mut cmd = Command::new(bin());
        cmd.args(["loadtest", "http://127.0.0.1:1", bad]);
        let out = run_with_deadline(cmd, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.starts_with("error: invalid value"), "{bad}: {err}");
    }
}

/// A free port on loopback (nothing listens on it once returned).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn sim(tag: &str, port: u16, extra: &[&str]) -> std::process::Child {
    sweeptop(tag)
        .args(["sim-server", "--port", &port.to_string()])
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_server_that_is_not_there_is_one_error_line_not_a_table_of_zeros() {
    let port = free_port();
    let mut cmd = Command::new(bin());
    cmd.args([
        "loadtest",
        &format!("http://127.0.0.1:{port}"),
        "--requests",
        "4",
    ]);
    let out = run_with_deadline(cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(out.stdout.is_empty(), "no figures at all");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot be reached")
            && err.contains("refused")
            && err.contains("--wait-ready"),
        "{err}"
    );
}

#[test]
fn wait_ready_waits_for_a_server_still_loading() {
    let port = free_port();
    let tag = format!("loadtest-wait-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    // Answers 503 until its start-up is done, as a loading server does.
    let mut server = sim(&tag, port, &["--startup-ms", "1500", "--itl-ms", "1"]);
    wait_until(Duration::from_secs(20), "the server to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let url = format!("http://127.0.0.1:{port}");
    let mut cmd = Command::new(bin());
    cmd.args(["loadtest", &url, "--requests", "2", "--max-tokens", "4"]);
    let out = run_with_deadline(cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(1) {
        // Still loading when asked: said with what it answered.
        assert!(err.contains("is not ready") && err.contains("503"), "{err}");
    }
    let mut cmd = Command::new(bin());
    cmd.args(["loadtest", &url, "--requests", "2", "--max-tokens", "4"])
        .args(["--wait-ready", "60"]);
    let out = run_with_deadline(cmd, Duration::from_secs(90));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("output tok/s"));
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn every_request_refused_is_said_once_with_its_count_and_no_figures() {
    let port = free_port();
    let tag = format!("loadtest-refused-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let mut server = sim(
        &tag,
        port,
        &["--max-model-len", "128", "--startup-ms", "10"],
    );
    let url = format!("http://127.0.0.1:{port}");
    let mut cmd = Command::new(bin());
    cmd.args([
        "loadtest",
        &url,
        "--requests",
        "4",
        "--prompt-tokens",
        "200",
    ])
    .args(["--wait-ready", "30"]);
    let out = run_with_deadline(cmd, Duration::from_secs(90));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        !stdout.contains("TTFT") && !stdout.contains("tok/s"),
        "{stdout}"
    );
    assert!(stdout.contains("all 4 requests failed"), "{stdout}");
    let said: Vec<&str> = stdout.lines().filter(|l| l.contains("HTTP 400")).collect();
    assert_eq!(said.len(), 1, "{stdout}");
    assert!(said[0].ends_with("(×4)"), "{stdout}");
    let _ = server.kill();
    let _ = server.wait();
}
