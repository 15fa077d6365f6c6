//! The load generator's own figures, on the real binary against the simulated
//! server on this machine (both sharing its cores):
//! - timing accuracy: `loadtest` at concurrency 64 against
//!   `sim-server --ttft-ms 200 --itl-ms 10` (targets: TTFT and ITL p50 within
//!   0.2 ms of the truth, p99 within 2 ms), next to a raw-socket reference
//!   (one request at a time, no HTTP library) showing how late the simulated
//!   server itself delivers on this machine;
//! - client CPU per streamed token at concurrency 256 against
//!   `sim-server --max-speed`, 1 M tokens (target ≤ 2 µs user+sys);
//! - client peak RSS at concurrency 1024 (target ≤ 100 MB).
//!
//! Run: `cargo bench --bench load` (release build). Optional argument: how
//! many times to repeat each measurement (default 3); medians are reported.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_sweeptop");

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

fn sim(args: &[&str]) -> (Server, u16) {
    let port = free_port();
    let child = Command::new(BIN)
        .args(["sim-server", "--port", &port.to_string()])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sim-server");
    let server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !get(port, "/health").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
        assert!(Instant::now() < deadline, "sim-server did not become ready");
        std::thread::sleep(Duration::from_millis(50));
    }
    (server, port)
}

/// Run `loadtest` and return its JSON and the child's rusage (CPU s, max RSS KiB).
// Reaped with wait4, which also gives its rusage.
#[allow(clippy::zombie_processes)]
fn loadtest(port: u16, args: &[&str]) -> (serde_json::Value, f64, u64) {
    let child = Command::new(BIN)
        .arg("loadtest")
        .arg(format!("http://127.0.0.1:{port}"))
        .args(args)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start loadtest");
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.expect("stdout");
    let mut text = String::new();
    let _ = stdout.read_to_string(&mut text);
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter; wait4 reaps our own child.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    let cpu = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    let v: serde_json::Value = serde_json::from_str(&text).expect("loadtest JSON");
    (v, cpu(ru.ru_utime) + cpu(ru.ru_stime), ru.ru_maxrss as u64)
}

/// One request at a time on a fresh socket, timed around plain reads: when the
/// first text arrives after the request is written (ms).
fn raw_ttft(port: u16, model: &str) -> f64 {
    let body = serde_json::json!({
        "model": model, "prompt": "hello ".repeat(200), "max_tokens": 2,
        "stream": true, "ignore_eos": true,
    })
    .to_string();
    let req = format!(
        "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let _ = s.set_nodelay(true);
    std::thread::sleep(Duration::from_millis(20));
    let t0 = Instant::now();
    s.write_all(req.as_bytes()).expect("write");
    let mut seen = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        let n = s.read(&mut buf).expect("read");
        assert!(n > 0, "stream ended before any text");
        seen.extend_from_slice(&buf[..n]);
        if seen.windows(8).any(|w| w == b"\"text\":\"") {
            return t0.elapsed().as_secs_f64() * 1e3;
        }
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let reps: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3)
        .max(1);

    println!("== timing accuracy: concurrency 64, 256 requests x 128 tokens, sim-server --ttft-ms 200 --itl-ms 10");
    let (_s, port) = sim(&["--ttft-ms", "200", "--itl-ms", "10"]);
    let model = get(port, "/v1/models")
        .and_then(|r| {
            let body = r.split("\r\n\r\n").nth(1)?.to_string();
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            Some(v["data"][0]["id"].as_str()?.to_string())
        })
        .unwrap_or_else(|| "default".into());
    let raw: Vec<f64> = (0..10).map(|_| raw_ttft(port, &model)).collect();
    let raw = median(raw);
    let mut rows = Vec::new();
    for _ in 0..reps {
        let (m, _, _) = loadtest(
            port,
            &[
                "--concurrency",
                "64",
                "--requests",
                "256",
                "--max-tokens",
                "128",
            ],
        );
        let f = |k: &str| m[k].as_f64().unwrap_or(f64::NAN);
        assert_eq!(m["output_tokens"], 32768, "{m}");
        println!(
            "TTFT p50 {:.3} p99 {:.3}   ITL p50 {:.3} p99 {:.3}   (ms)",
            f("ttft_ms_p50"),
            f("ttft_ms_p99"),
            f("itl_ms_p50"),
            f("itl_ms_p99")
        );
        rows.push([
            f("ttft_ms_p50"),
            f("ttft_ms_p99"),
            f("itl_ms_p50"),
            f("itl_ms_p99"),
        ]);
    }
    let col = |i: usize| median(rows.iter().map(|r| r[i]).collect());
    let (t50, t99, i50, i99) = (col(0), col(1), col(2), col(3));
    println!(
        "median   TTFT p50 {t50:.3} (+{:.3}) p99 {t99:.3} (+{:.3})   ITL p50 {i50:.3} ({:+.3}) p99 {i99:.3} (+{:.3})",
        t50 - 200.0,
        t99 - 200.0,
        i50 - 10.0,
        i99 - 10.0
    );
    println!(
        "raw-socket reference, one request at a time: first text after {raw:.3} ms (the simulated server's own lateness: +{:.3} ms)",
        raw - 200.0
    );
    drop(_s);

    println!("\n== client CPU per token: concurrency 256, 1024 requests x 1024 tokens, sim-server --max-speed");
    let (_s, port) = sim(&["--max-speed", "--max-model-len", "1000000"]);
    let mut per_token = Vec::new();
    for _ in 0..reps {
        let (m, cpu, rss) = loadtest(
            port,
            &[
                "--concurrency",
                "256",
                "--requests",
                "1024",
                "--max-tokens",
                "1024",
                "--prompt-tokens",
                "64",
            ],
        );
        let tokens = m["output_tokens"].as_u64().unwrap_or(0);
        assert_eq!(tokens, 1 << 20, "{m}");
        let us = cpu / tokens as f64 * 1e6;
        println!(
            "{tokens} tokens, {cpu:.2} s CPU: {us:.3} µs/token, RSS {:.1} MB",
            rss as f64 / 1024.0
        );
        per_token.push(us);
    }
    let us = median(per_token);

    println!("\n== client memory: concurrency 1024, 2048 requests x 256 tokens");
    let mut rss_mb = Vec::new();
    for _ in 0..reps {
        let (m, _, rss) = loadtest(
            port,
            &[
                "--concurrency",
                "1024",
                "--requests",
                "2048",
                "--max-tokens",
                "256",
                "--prompt-tokens",
                "64",
            ],
        );
        assert_eq!(m["failed_requests"], 0, "{m}");
        println!("peak RSS {:.1} MB", rss as f64 / 1024.0);
        rss_mb.push(rss as f64 / 1024.0);
    }
    let rss = median(rss_mb);

    let ok = |b: bool| if b { "met" } else { "NOT met" };
    println!("\n== summary (medians of {reps})");
    println!(
        "TTFT p50 +{:.3} ms, p99 +{:.3} ms (targets 0.2 / 2): {} / {}",
        t50 - 200.0,
        t99 - 200.0,
        ok(t50 - 200.0 <= 0.2),
        ok(t99 - 200.0 <= 2.0)
    );
    println!(
        "ITL  p50 {:+.3} ms, p99 +{:.3} ms (targets 0.2 / 2): {} / {}",
        i50 - 10.0,
        i99 - 10.0,
        ok((i50 - 10.0).abs() <= 0.2),
        ok(i99 - 10.0 <= 2.0)
    );
    println!("CPU  {us:.3} µs/token (target 2): {}", ok(us <= 2.0));
    println!(
        "RSS  {rss:.1} MB at concurrency 1024 (target 100): {}",
        ok(rss <= 100.0)
    );
}
