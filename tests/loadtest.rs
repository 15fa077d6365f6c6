//! `sweeptop loadtest` against a running simulated server with exact pacing.

mod common;

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
        .all(|r| r.chunks.len() == 128 && r.error.is_none()));
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
