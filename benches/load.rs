//! The load generator's own figures, on the real binary against the simulated
//! server on this machine (both sharing its cores):
//! - timing accuracy: `loadtest` at concurrency 64 against
//!   `sim-server --ttft-ms 200 --itl-ms 10`, on the wire clock (the kernel's
//!   receive time, the default on Linux) and on the read clock
//!   (`SWEEPTOP_CLOCK=read`), quiet and with two busy loops beside it. The
//!   error is what the client adds beyond the simulated server's own
//!   lateness, which a raw-socket reference measures (one request at a time,
//!   no HTTP library). Targets: TTFT error ≤ 0.1 ms at p50 and ≤ 0.5 ms at
//!   p99, ITL p99 error ≤ 0.2 ms. The percentiles of the server's lateness
//!   under load are not the raw reference's, so each request is also joined
//!   by its id with the simulated server's own timing of it
//!   (`sim-server --send-log`: when each request reached the server's
//!   socket, by the kernel's receive stamp, and when each text chunk was
//!   handed to the connection): the client's own error, request by
//!   request, is its TTFT less the server's, and each gap between chunks
//!   less the server's gap;
//!   its percentiles are printed beside;
//! - client CPU per streamed token at concurrency 256 against
//!   `sim-server --max-speed`, 1 M tokens (target ≤ 1 µs user+sys);
//! - client peak RSS at concurrency 1024 (target ≤ 64 MB).
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
fn loadtest(port: u16, args: &[&str]) -> (serde_json::Value, f64, u64) {
    loadtest_on(port, args, "wire")
}

/// `loadtest` timing chunks on `clock` (`wire` or `read`).
// Reaped with wait4, which also gives its rusage.
#[allow(clippy::zombie_processes)]
fn loadtest_on(port: u16, args: &[&str], clock: &str) -> (serde_json::Value, f64, u64) {
    let child = Command::new(BIN)
        .env("SWEEPTOP_CLOCK", clock)
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

/// Two threads that spin until dropped: a client machine short of CPU.
struct Hogs(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Vec<std::thread::JoinHandle<()>>,
);

impl Hogs {
    fn start(n: usize) -> Hogs {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                })
            })
            .collect();
        Hogs(stop, threads)
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

/// Timing errors of one setting: TTFT p50/p99 beyond the server's own
/// lateness, ITL p50/p99 against its pace (ms), and the client's read lag p99;
/// and, joined request by request with the server's own timing, the
/// client's TTFT and ITL error at p50 and p99.
#[derive(Clone, Copy)]
struct Errors {
    ttft50: f64,
    ttft99: f64,
    itl50: f64,
    itl99: f64,
    lag99: f64,
    joined: [f64; 4],
}

/// The percentile `p` (0–100) of `v`, nearest rank.
fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[rank.clamp(1, v.len()) - 1]
}

/// The client's own error, request by request: its records joined by id
/// with the server's send log. TTFT error = the client's TTFT less the
/// server's (from the request's arrival at its socket, the kernel's stamp,
/// to the first chunk handed over: the server's intake is its own); ITL error =
/// each gap between chunks less the server's gap (gaps inside a coalesced
/// read, which the metrics leave out, are left out). p50 and p99 of each
/// (ms), and how many requests were joined.
fn joined(records: &std::path::Path, send_log: &std::path::Path) -> ([f64; 4], usize) {
    let read = |p: &std::path::Path| -> String {
        let gz = p.with_extension("jsonl.gz");
        if gz.exists() {
            let mut s = String::new();
            flate2::read::GzDecoder::new(std::fs::File::open(&gz).expect("records"))
                .read_to_string(&mut s)
                .expect("gzipped records");
            let _ = std::fs::remove_file(&gz);
            s
        } else {
            let s = std::fs::read_to_string(p).unwrap_or_default();
            let _ = std::fs::remove_file(p);
            s
        }
    };
    // Each text chunk's time (ms) since the request reached the server's
    // machine (its kernel's stamp), or since its head was in where the
    // server had no stamp.
    let sent: std::collections::HashMap<String, Vec<f64>> = std::fs::read_to_string(send_log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| {
            let id = v["id"].as_str()?.to_string();
            let intake = v["in_us"].as_f64().unwrap_or(0.0);
            let us = v["sent_us"].as_array()?;
            Some((
                id,
                us.iter()
                    .filter_map(|x| x.as_f64())
                    .map(|x| (x + intake) / 1e3)
                    .collect(),
            ))
        })
        .collect();
    let (mut ttft, mut itl, mut n) = (Vec::new(), Vec::new(), 0);
    for line in read(records).lines() {
        let Ok(r) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(s) = r["id"].as_str().and_then(|id| sent.get(id)) else {
            continue;
        };
        let start = r["start_ns"].as_f64().unwrap_or(0.0);
        let c: Vec<f64> = r["chunks"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|c| c[0].as_f64())
                    .map(|t| (t - start) / 1e6)
                    .collect()
            })
            .unwrap_or_default();
        if c.len() != s.len() || c.is_empty() {
            continue;
        }
        n += 1;
        ttft.push(c[0] - s[0]);
        for k in 1..c.len() {
            if c[k] > c[k - 1] {
                itl.push((c[k] - c[k - 1]) - (s[k] - s[k - 1]));
            }
        }
    }
    (
        [
            pct(&mut ttft, 50.0),
            pct(&mut ttft, 99.0),
            pct(&mut itl, 50.0),
            pct(&mut itl, 99.0),
        ],
        n,
    )
}

fn timing(port: u16, send_log: &std::path::Path, clock: &str, reps: usize, late: f64) -> Errors {
    let mut rows = Vec::new();
    let records = std::env::temp_dir().join(format!("sweeptop-bench-{}.jsonl", std::process::id()));
    let records_arg = records.display().to_string();
    for _ in 0..reps {
        let (m, _, _) = loadtest_on(
            port,
            &[
                "--concurrency",
                "64",
                "--requests",
                "256",
                "--max-tokens",
                "128",
                "--records",
                &records_arg,
            ],
            clock,
        );
        let (j, n) = joined(&records, send_log);
        println!(
            "  {clock:4}  joined with the server's own timing ({n} requests): the client's TTFT error p50 {:+.3} p99 {:+.3}   ITL error p50 {:+.3} p99 {:+.3}   (ms)",
            j[0], j[1], j[2], j[3]
        );
        let f = |k: &str| m[k].as_f64().unwrap_or(f64::NAN);
        assert_eq!(m["output_tokens"], 32768, "{m}");
        println!(
            "  {clock:4}  TTFT p50 {:.3} p99 {:.3}   ITL p50 {:.3} p99 {:.3}   read lag p99 {:.3}   coalesced reads {}   (ms)",
            f("ttft_ms_p50"),
            f("ttft_ms_p99"),
            f("itl_ms_p50"),
            f("itl_ms_p99"),
            f("client_lag_ms_p99"),
            m["coalesced_reads"]
        );
        rows.push([
            f("ttft_ms_p50"),
            f("ttft_ms_p99"),
            f("itl_ms_p50"),
            f("itl_ms_p99"),
            f("client_lag_ms_p99"),
            j[0],
            j[1],
            j[2],
            j[3],
        ]);
    }
    let col = |i: usize| median(rows.iter().map(|r| r[i]).collect());
    Errors {
        ttft50: col(0) - 200.0 - late,
        ttft99: col(1) - 200.0 - late,
        itl50: col(2) - 10.0,
        itl99: col(3) - 10.0,
        lag99: col(4),
        joined: [col(5), col(6), col(7), col(8)],
    }
}

fn main() {
    let reps: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(3)
        .max(1);

    println!("== timing accuracy: concurrency 64, 256 requests x 128 tokens, sim-server --ttft-ms 200 --itl-ms 10");
    let send_log =
        std::env::temp_dir().join(format!("sweeptop-bench-{}-sent.jsonl", std::process::id()));
    let (_s, port) = sim(&[
        "--ttft-ms",
        "200",
        "--itl-ms",
        "10",
        "--send-log",
        &send_log.display().to_string(),
    ]);
    let model = get(port, "/v1/models")
        .and_then(|r| {
            let body = r.split("\r\n\r\n").nth(1)?.to_string();
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            Some(v["data"][0]["id"].as_str()?.to_string())
        })
        .unwrap_or_else(|| "default".into());
    let mut table = Vec::new();
    for hogs in [0, 2] {
        let _hogs = Hogs::start(hogs);
        let raw = median((0..10).map(|_| raw_ttft(port, &model)).collect());
        let late = raw - 200.0;
        let beside = if hogs == 0 {
            "quiet".to_string()
        } else {
            format!("{hogs} busy loops beside")
        };
        println!("{beside}: the simulated server alone, timed with a plain socket, is +{late:.3} ms late");
        for clock in ["wire", "read"] {
            let e = timing(port, &send_log, clock, reps, late);
            table.push((beside.clone(), clock, e));
        }
    }
    drop(_s);
    let _ = std::fs::remove_file(&send_log);

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
    println!("\n== summary (medians of {reps}; errors beyond the simulated server's own lateness)");
    println!("| setting | clock | TTFT p50 error | TTFT p99 error | ITL p50 error | ITL p99 error | read lag p99 |");
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (beside, clock, e) in &table {
        println!(
            "| {beside} | {clock} | {:+.3} ms | {:+.3} ms | {:+.3} ms | {:+.3} ms | {:.3} ms |",
            e.ttft50, e.ttft99, e.itl50, e.itl99, e.lag99
        );
    }
    println!("\nThe client's own error, request by request against the server's own timing of it:");
    println!("| setting | clock | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 |");
    println!("|---|---|---:|---:|---:|---:|");
    for (beside, clock, e) in &table {
        let j = e.joined;
        println!(
            "| {beside} | {clock} | {:+.3} ms | {:+.3} ms | {:+.3} ms | {:+.3} ms |",
            j[0], j[1], j[2], j[3]
        );
    }
    println!();
    println!("| figure | target | measured | |");
    println!("|---|---|---:|---|");
    for (beside, clock, e) in table.iter().filter(|(_, c, _)| *c == "wire") {
        let j = e.joined;
        println!(
            "| TTFT error p50 / p99, {beside} ({clock}), the client's own (joined) | ≤ 0.1 / 0.5 ms | {:+.3} / {:+.3} ms | {} / {} |",
            j[0],
            j[1],
            ok(j[0] <= 0.1),
            ok(j[1] <= 0.5)
        );
        println!(
            "| ITL p99 error, {beside} ({clock}), the client's own (joined) | ≤ 0.2 ms | {:+.3} ms | {} |",
            j[3],
            ok(j[3] <= 0.2)
        );
        println!(
            "| TTFT error p50 / p99, {beside} ({clock}), beyond the raw reference | ≤ 0.1 / 0.5 ms | {:+.3} / {:+.3} ms | {} / {} |",
            e.ttft50,
            e.ttft99,
            ok(e.ttft50 <= 0.1),
            ok(e.ttft99 <= 0.5)
        );
    }
    println!(
        "| client CPU per token, c256 | ≤ 1.0 µs | {us:.3} µs | {} |",
        ok(us <= 1.0)
    );
    println!(
        "| client peak RSS, c1024 | ≤ 64 MB | {rss:.1} MB | {} |",
        ok(rss <= 64.0)
    );
}
