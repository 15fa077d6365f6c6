//! A server that says impossible things about itself: on its `/metrics`
//! page (an acceptance length of 1e15, a negative TTFT, a queue time longer
//! than the whole cell), or a context length of 0 on `/v1/models`. The cell
//! is measured from the client's own clock, each impossible figure is left
//! out (null, unknown) and said in a warning, never recorded or obeyed.

use crate::common;

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{bin, run_with_deadline};

/// The `/metrics` page after `n` finished requests: vLLM's names, every
/// request counted, and figures no server can measure.
fn metrics_page(n: u64) -> String {
    format!(
        "vllm:e2e_request_latency_seconds_count {n}\n\
         vllm:e2e_request_latency_seconds_sum {}\n\
         vllm:time_to_first_token_seconds_count {n}\n\
         vllm:time_to_first_token_seconds_sum {}\n\
         vllm:request_queue_time_seconds_count {n}\n\
         vllm:request_queue_time_seconds_sum {}\n\
         vllm:spec_decode_num_drafts_total {n}\n\
         vllm:spec_decode_num_accepted_tokens_total {}\n",
        0.01 * n as f64,
        -0.5 * n as f64,
        9.0e6 * n as f64,
        1e15 * n as f64,
    )
}

/// One HTTP/1.1 exchange: the request's path and body, then the answer.
fn serve_one(stream: TcpStream, finished: &AtomicU64, lie: Lie) -> std::io::Result<()> {
    let context = lie.context;
    let (path, body) = common::read_http_request(&stream)?;
    let mut out = stream;
    let reply = |out: &mut TcpStream, kind: &str, text: &str| {
        write!(
            out,
            "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
            text.len()
        )
    };
    match path.as_str() {
        "/v1/models" => reply(
            &mut out,
            "application/json",
            &format!(
                r#"{{"object":"list","data":[{{"id":"liar","object":"model","max_model_len":{context}}}]}}"#
            ),
        ),
        "/metrics" => reply(
            &mut out,
            "text/plain",
            &metrics_page(finished.load(Ordering::SeqCst)),
        ),
        "/v1/completions" => {
            write!(
                out,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
            )?;
            let chunk = "data: {\"choices\":[{\"index\":0,\"text\":\" a\"}]}\n\n";
            if lie.burst {
                // The whole answer in one write: it arrives, and is read, at
                // one moment.
                out.write_all(chunk.repeat(8).as_bytes())?;
            } else {
                for _ in 0..8 {
                    out.write_all(chunk.as_bytes())?;
                    out.flush()?;
                }
            }
            // Usage as the prompt was sent: a word a token (the test's
            // prompt is built from the /tokenize-less estimate).
            let words = String::from_utf8_lossy(&body).split_whitespace().count();
            write!(
                out,
                "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":{words},\"completion_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
                lie.completion_tokens
            )?;
            out.flush()?;
            finished.fetch_add(1, Ordering::SeqCst);
            if lie.linger {
                // The stream stays open after [DONE].
                std::thread::sleep(LINGER);
            }
            Ok(())
        }
        _ => write!(
            out,
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        ),
    }
}

/// What the server lies about.
#[derive(Clone, Copy)]
struct Lie {
    /// Its context length on `/v1/models`.
    context: u64,
    /// `usage.completion_tokens` for 8 streamed chunks.
    completion_tokens: u64,
    /// Keep each stream open for [`LINGER`] after `[DONE]`.
    linger: bool,
    /// Send every chunk of an answer in one write.
    burst: bool,
}

/// How long a lingering server keeps a stream open after `[DONE]`: far
/// beyond anything a busy machine adds, so a cell that waited for it shows.
const LINGER: Duration = Duration::from_secs(30);

const HONEST: Lie = Lie {
    context: 4096,
    completion_tokens: 8,
    linger: false,
    burst: false,
};

/// The lying server on a free port, saying its context is `context` tokens.
fn liar(context: u64) -> u16 {
    liar_with(Lie { context, ..HONEST })
}

fn liar_with(lie: Lie) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let finished = Arc::new(AtomicU64::new(0));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let counter = finished.clone();
            std::thread::spawn(move || {
                let _ = serve_one(stream, &counter, lie);
            });
        }
    });
    port
}

/// `sweeptop loadtest --json` against the server on `port`: its result and
/// what it said on stderr.
fn loadtest(port: u16) -> (serde_json::Value, String) {
    let mut cmd = std::process::Command::new(bin());
    cmd.args([
        "loadtest",
        &format!("http://127.0.0.1:{port}"),
        "--concurrency",
        "2",
        "--requests",
        "4",
        "--max-tokens",
        "8",
        "--prompt-tokens",
        "64",
        "--json",
    ]);
    let out = run_with_deadline(cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    (serde_json::from_str(&stdout).unwrap(), stderr)
}

#[test]
fn impossible_server_figures_are_null_and_said() {
    let (m, stderr) = loadtest(liar(4096));
    // The client's own measurement stands.
    assert_eq!(m["requests"], 4, "{m}");
    assert_eq!(m["output_tokens"], 32, "{m}");
    // What the server could not have measured is unknown, not a number (a
    // negative TTFT reads as a counter reset: no figure).
    assert!(m["accept_len"].is_null(), "{m}");
    assert!(m["server_ttft_ms_mean"].is_null(), "{m}");
    assert!(m["server_queue_ms_mean"].is_null(), "{m}");
    // A plausible figure of the same page is kept.
    assert_eq!(m["server_e2e_ms_mean"].as_f64(), Some(10.0), "{m}");
    // Each one left out is said, with the value the server gave.
    let said = format!("{stderr}{}", m["warnings"]);
    assert!(
        said.contains("acceptance length 1000000000000001"),
        "{said}"
    );
    assert!(said.contains("queue time 9000000000 ms"), "{said}");
}

#[test]
fn a_context_of_zero_is_unknown_and_said_not_an_overflow_of_every_prompt() {
    let (m, stderr) = loadtest(liar(0));
    assert_eq!(m["failed_requests"], 0, "{m}\n{stderr}");
    assert_eq!(m["output_tokens"], 32, "{m}");
    assert!(m["context_limit"].is_null(), "{m}");
    assert!(
        stderr.contains("context length 0 tokens (/v1/models max_model_len) cannot be true"),
        "{stderr}"
    );
}

/// 8 chunks said to be 16,000 tokens (and 2^64 − 1): the streamed count is
/// recorded, with a usage_mismatch warning that gives both numbers.
#[test]
fn usage_over_max_tokens_counts_what_was_streamed_and_says_so() {
    for said in [16_000u64, u64::MAX] {
        let (m, stderr) = loadtest(liar_with(Lie {
            completion_tokens: said,
            ..HONEST
        }));
        assert_eq!(m["output_tokens"], 32, "{m}\n{stderr}");
        let warnings = m["warnings"].to_string();
        assert!(warnings.contains("usage_mismatch"), "{warnings}");
        assert!(
            warnings.contains("where 8 text chunks were streamed (max_tokens 8)"),
            "{warnings}"
        );
    }
}

/// A server that keeps each stream open after [DONE]: the cell does not wait
/// for it to close (4 requests, 2 at a time, each kept open 30 s), and the
/// lingering is said.
#[test]
fn a_stream_kept_open_after_done_costs_no_time_and_is_said() {
    let (m, stderr) = loadtest(liar_with(Lie {
        linger: true,
        ..HONEST
    }));
    assert_eq!(m["failed_requests"], 0, "{m}\n{stderr}");
    let wall = m["duration_s"].as_f64().unwrap();
    assert!(
        wall < LINGER.as_secs_f64(),
        "the cell waited for a lingering stream: {wall} s"
    );
    assert!(stderr.contains("stream(s) open after [DONE]"), "{stderr}");
}

/// Chunks that arrive in one burst (here a server that writes its whole
/// answer at once; on a loaded machine a client that fell behind) are no
/// decode rate: the cell says `client_starved` and records no decode rate,
/// ITL or TPOT, where a per-request rate of millions of tokens a second
/// was recorded before.
#[test]
fn chunks_read_in_one_burst_are_no_decode_rate() {
    let (m, stderr) = loadtest(liar_with(Lie {
        burst: true,
        ..HONEST
    }));
    assert_eq!(m["failed_requests"], 0, "{m}\n{stderr}");
    assert_eq!(m["output_tokens"], 32, "{m}");
    assert!(m["decode_tok_s_mean"].is_null(), "{m}");
    assert!(m["decode_tok_s_p50"].is_null(), "{m}");
    assert!(m["itl_ms_p50"].is_null(), "{m}");
    // (The liar's prompts, counted a word a token, are off their target too.)
    let starved = m["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["kind"] == "client_starved")
        .unwrap_or_else(|| panic!("{m}"));
    let said = starved["message"].as_str().unwrap();
    assert!(
        said.starts_with(
            "4 of 4 requests arrived faster than a stream can be produced (8 tokens within"
        ),
        "{said}"
    );
}
