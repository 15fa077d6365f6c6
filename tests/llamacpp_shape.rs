//! A server shaped like llama.cpp's `llama-server` (build b1-0c1e570, as
//! observed with `../shared/harness/llamacpp`; `tests/real_llamacpp.rs` runs
//! the real one): `/tokenize` takes `content` and answers `{"tokens": []}` to
//! a `prompt`, `/props` gives one slot's context and the slot count, the
//! last chunk carries `timings`, a prompt over a slot is its 400. Through
//! `sweeptop loadtest`: prompts exactly at target, planned against the slot,
//! the server's figures from its timings, `cache_prompt: false` on every
//! request of a cold cell, and the 400 with its numbers. A words-as-tokens
//! tokenizer keeps the arithmetic visible.

use crate::common;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{bin, run_with_deadline};

/// One slot's context: `--ctx-size 2048 --parallel 4`.
const SLOT: usize = 512;
/// The server's own timing of every request.
const PROMPT_MS: f64 = 2.5;
const PREDICTED_MS: f64 = 7.0;

/// What the server saw.
#[derive(Default)]
struct Seen {
    streamed: AtomicU64,
    /// Streamed requests that said `"cache_prompt": false`.
    uncached: AtomicU64,
    /// `/tokenize` calls sent `prompt` (answered with no tokens).
    wrong_field: AtomicU64,
}

fn reply(out: &mut TcpStream, status: &str, body: &str) -> std::io::Result<()> {
    write!(
        out,
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

fn serve_one(stream: TcpStream, seen: &Seen) -> std::io::Result<()> {
    let (path, body) = common::read_http_request(&stream)?;
    let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let mut out = stream;
    match path.as_str() {
        "/health" => reply(&mut out, "200 OK", r#"{"status":"ok"}"#),
        // No max_model_len: the model's own context is not a request's.
        "/v1/models" => reply(
            &mut out,
            "200 OK",
            r#"{"object":"list","data":[{"id":"/models/tiny.gguf","object":"model","owned_by":"llamacpp","meta":{"n_ctx":512,"n_ctx_train":4096}}]}"#,
        ),
        "/props" => reply(
            &mut out,
            "200 OK",
            r#"{"default_generation_settings":{"n_ctx":512},"total_slots":4,"model_path":"/models/tiny.gguf","build_info":"b1-0c1e570"}"#,
        ),
        "/tokenize" => match req.get("content").and_then(|c| c.as_str()) {
            Some(text) => {
                let ids: Vec<usize> = (0..text.split_whitespace().count()).collect();
                reply(
                    &mut out,
                    "200 OK",
                    &serde_json::json!({ "tokens": ids }).to_string(),
                )
            }
            None => {
                seen.wrong_field.fetch_add(1, Ordering::SeqCst);
                reply(&mut out, "200 OK", r#"{"tokens":[]}"#)
            }
        },
        "/v1/completions" => {
            // A BOS the completion adds and /tokenize leaves out.
            let prompt = req["prompt"]
                .as_str()
                .unwrap_or("")
                .split_whitespace()
                .count()
                + 1;
            let max = req["max_tokens"].as_u64().unwrap_or(16) as usize;
            if prompt > SLOT {
                let body = format!(
                    r#"{{"error":{{"code":400,"message":"request ({prompt} tokens) exceeds the available context size ({SLOT} tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":{prompt},"n_ctx":{SLOT}}}}}"#
                );
                return reply(&mut out, "400 Bad Request", &body);
            }
            // Without a context shift, generation stops at the slot's end.
            let n = max.min(SLOT - 1 - prompt);
            let usage = format!(
                r#""usage":{{"completion_tokens":{n},"prompt_tokens":{prompt},"total_tokens":{}}}"#,
                prompt + n
            );
            if req["stream"] != true {
                return reply(
                    &mut out,
                    "200 OK",
                    &format!(r#"{{"choices":[{{"text":" a"}}],{usage}}}"#),
                );
            }
            seen.streamed.fetch_add(1, Ordering::SeqCst);
            if req["cache_prompt"] == false {
                seen.uncached.fetch_add(1, Ordering::SeqCst);
            }
            write!(
                out,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            )?;
            // A token a millisecond, as a stream is produced (chunks sent
            // back to back would be read as one burst: `client_starved`).
            for _ in 0..n {
                std::thread::sleep(Duration::from_millis(1));
                write!(
                    out,
                    "data: {{\"choices\":[{{\"index\":0,\"text\":\" a\"}}]}}\n\n"
                )?;
                out.flush()?;
            }
            write!(
                out,
                "data: {{\"choices\":[{{\"finish_reason\":\"length\",\"index\":0,\"text\":\"\"}}]}}\n\n\
                 data: {{\"choices\":[],{usage},\"timings\":{{\"cache_n\":0,\"prompt_n\":{prompt},\"prompt_ms\":{PROMPT_MS},\"predicted_n\":{n},\"predicted_ms\":{PREDICTED_MS},\"predicted_per_second\":1}}}}\n\n\
                 data: [DONE]\n\n"
            )?;
            out.flush()
        }
        _ => write!(
            out,
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        ),
    }
}

fn server() -> (u16, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let s = s.clone();
            std::thread::spawn(move || {
                let _ = serve_one(stream, &s);
            });
        }
    });
    (port, seen)
}

/// `sweeptop loadtest --json`: its result, what it said on stderr, and
/// whether it judged the cell ok (exit 0).
fn loadtest(port: u16, prompt: u32, max_tokens: u32) -> (serde_json::Value, String, bool) {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["loadtest", &format!("http://127.0.0.1:{port}"), "--json"])
        .args(["--concurrency", "2", "--requests", "4"])
        .args(["--prompt-tokens", &prompt.to_string()])
        .args(["--max-tokens", &max_tokens.to_string()]);
    let out = run_with_deadline(cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    (v, stderr, out.status.success())
}

/// The cell's warning kinds, but `client_starved`: whether a loaded machine
/// left the client behind a whole 1 ms-a-token stream is not what these
/// tests are about.
fn kinds(m: &serde_json::Value) -> Vec<String> {
    let mut k = common::warning_kinds(m);
    k.retain(|k| k != "client_starved");
    k
}

#[test]
fn a_llamacpp_shaped_server_is_measured_exactly_against_one_slot() {
    let (port, seen) = server();
    let (m, stderr, ok) = loadtest(port, 100, 9);
    assert!(ok, "{m}\n{stderr}");
    // Prompts exactly at target as the server counts them: measured with
    // `content` once `prompt` got no tokens, the BOS it adds found.
    assert!(
        seen.wrong_field.load(Ordering::SeqCst) <= 1,
        "asked with `prompt` again and again"
    );
    assert_eq!(m["prompt_tokens_measured"], 100, "{m}");
    assert_eq!(
        (
            m["prompt_tokens_min"].as_u64(),
            m["prompt_tokens_max"].as_u64()
        ),
        (Some(100), Some(100)),
        "{m}"
    );
    // One slot's context, said.
    assert_eq!(m["context_limit"], 512, "{m}");
    assert!(
        stderr.contains("4 requests at once, each with 512 tokens"),
        "{stderr}"
    );
    // The server's figures are its own timings of these requests.
    assert_eq!(m["server_requests"], 4, "{m}");
    assert_eq!(m["server_ttft_ms_mean"].as_f64(), Some(PROMPT_MS), "{m}");
    assert_eq!(
        m["server_itl_ms_mean"].as_f64(),
        Some(PREDICTED_MS / 8.0),
        "{m}"
    );
    assert_eq!(
        m["server_e2e_ms_mean"].as_f64(),
        Some(PROMPT_MS + PREDICTED_MS),
        "{m}"
    );
    assert_eq!(m["prefix_cache_hit_pct"].as_f64(), Some(0.0), "{m}");
    assert!(!stderr.contains("no latency histogram"), "{stderr}");
    // Every streamed request of the cold cell asked for no cache reuse.
    let streamed = seen.streamed.load(Ordering::SeqCst);
    assert_eq!(streamed, 4);
    assert_eq!(seen.uncached.load(Ordering::SeqCst), streamed);
    assert_eq!(kinds(&m), Vec::<String>::new(), "{m}");
}

#[test]
fn a_prompt_that_fits_the_model_but_not_a_slot_is_the_servers_400() {
    let (port, _) = server();
    let (m, _, ok) = loadtest(port, 600, 8);
    assert!(!ok, "{m}");
    assert_eq!(m["failed_requests"], 4, "{m}");
    assert!(
        m["errors"][0]
            .as_str()
            .unwrap()
            .contains("request (600 tokens) exceeds the available context size (512 tokens)"),
        "{m}"
    );
    // Fits a slot, prompt + max_tokens does not: fewer tokens, said.
    let (m, _, ok) = loadtest(port, 480, 64);
    assert!(ok, "{m}");
    assert_eq!(m["short_requests"], 4, "{m}");
    assert_eq!(kinds(&m), ["short_output"], "{m}");
}
