//! The simulated server's HTTP API, through a raw HTTP/1.1 client.

use crate::simclient;

use serde_json::{json, Value};
use simclient::{completion_body, request, start, EventStream};
use sweeptop_sim::count_tokens;

fn chunk_text(v: &Value) -> String {
    let c = &v["choices"][0];
    c["text"]
        .as_str()
        .or_else(|| c["delta"]["content"].as_str())
        .unwrap_or("")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_stream_shape() {
    let port = start(&["--max-speed"]).await;
    let body = json!({
        "model": "sim-model",
        "messages": [{"role": "user", "content": "write a parser please"}],
        "max_tokens": 20,
        "stream": true,
        "stream_options": {"include_usage": true},
    })
    .to_string();
    let s = EventStream::open(port, "/v1/chat/completions", &body)
        .await
        .unwrap();
    assert_eq!(s.status, 200);
    let ct = s
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        .map(|(_, v)| v.clone());
    assert!(ct.unwrap_or_default().starts_with("text/event-stream"));
    let events: Vec<String> = s
        .collect()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    // First chunk: the role only, empty content.
    let first = &chunks[0];
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(first["choices"][0]["delta"]["content"], "");
    // Content chunks, the last with finish_reason "length".
    let content = &chunks[1..chunks.len() - 1];
    assert!(!content.is_empty());
    for c in &content[..content.len() - 1] {
        assert_eq!(c["choices"][0]["finish_reason"], Value::Null);
        assert!(c["choices"][0]["delta"].get("role").is_none());
    }
    assert_eq!(
        content.last().unwrap()["choices"][0]["finish_reason"],
        "length"
    );
    let text: String = content.iter().map(chunk_text).collect();
    assert_eq!(count_tokens(&text), 20);
    // Usage chunk: empty choices; prompt = 4 words + 3 per message + 3.
    let usage = chunks.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(
        usage["usage"],
        json!({"prompt_tokens": 10, "total_tokens": 30, "completion_tokens": 20})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_stream_and_spec_chunks() {
    let port = start(&["--max-speed", "--method", "dflash", "--flavor", "vllm"]).await;
    let events = EventStream::open(port, "/v1/completions", &completion_body(7, 100, true))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let chunks: Vec<Value> = events
        .iter()
        .filter(|e| e.0 != "[DONE]")
        .map(|e| serde_json::from_str(&e.0).unwrap())
        .collect();
    let content: Vec<&Value> = chunks
        .iter()
        .filter(|c| !c["choices"].as_array().unwrap().is_empty())
        .collect();
    assert_eq!(content[0]["object"], "text_completion");
    // Speculative decoding: several tokens per chunk, so fewer chunks than tokens.
    let total: u64 = content.iter().map(|c| count_tokens(&chunk_text(c))).sum();
    assert_eq!(total, 100);
    assert!(
        content.len() < 60,
        "{} chunks for 100 tokens",
        content.len()
    );
    assert!(content.iter().any(|c| count_tokens(&chunk_text(c)) > 1));
    assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 100);
    assert_eq!(chunks.last().unwrap()["usage"]["prompt_tokens"], 7);

    // The vLLM counters agree with what was delivered: every token after a
    // request's first came from a verify step delivering 1 + accepted tokens.
    let m = request(port, "GET", "/metrics", None).await.unwrap().body;
    let counter = |name: &str| -> f64 {
        m.lines()
            .find(|l| l.starts_with(name) && l.contains('{'))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing in\n{m}"))
    };
    let drafts = counter("vllm:spec_decode_num_drafts_total");
    let accepted = counter("vllm:spec_decode_num_accepted_tokens_total");
    let draft_tokens = counter("vllm:spec_decode_num_draft_tokens_total");
    assert_eq!(drafts + accepted + 1.0, 100.0);
    assert_eq!(draft_tokens, drafts * 15.0);
    assert_eq!(counter("vllm:generation_tokens_total"), 100.0);
    let mean = 1.0 + accepted / drafts;
    assert!(mean > 1.5 && mean < 5.0, "mean acceptance length {mean}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_streaming_bodies() {
    let port = start(&["--max-speed"]).await;
    let r = request(
        port,
        "POST",
        "/v1/completions",
        Some(&completion_body(5, 9, false)),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(count_tokens(v["choices"][0]["text"].as_str().unwrap()), 9);
    assert_eq!(v["usage"]["completion_tokens"], 9);
    let chat = json!({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 4});
    let r = request(
        port,
        "POST",
        "/v1/chat/completions",
        Some(&chat.to_string()),
    )
    .await
    .unwrap();
    let v = r.json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["choices"][0]["message"]["role"], "assistant");
    assert_eq!(
        v["usage"],
        json!({"prompt_tokens": 7, "total_tokens": 11, "completion_tokens": 4})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflow_sglang() {
    let port = start(&["--max-model-len", "100"]).await;
    for stream in [false, true] {
        let r = request(
            port,
            "POST",
            "/v1/completions",
            Some(&completion_body(90, 20, stream)),
        )
        .await
        .unwrap();
        assert_eq!(r.status, 400);
        assert!(r
            .header("content-type")
            .unwrap()
            .starts_with("application/json"));
        assert_eq!(
            r.body,
            "{\"object\":\"error\",\"message\":\"Requested token count exceeds the model's maximum \
             context length of 100 tokens. You requested a total of 110 tokens: 90 tokens from \
             the input messages and 20 tokens for the completion. Please reduce the number of \
             tokens in the input messages or the completion to fit within the limit.\",\"type\":\
             \"BadRequestError\",\"param\":null,\"code\":400}"
        );
    }
    // Exactly at the limit is fine.
    let r = request(
        port,
        "POST",
        "/v1/completions",
        Some(&completion_body(80, 20, false)),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn context_overflow_vllm() {
    let port = start(&["--flavor", "vllm", "--max-model-len", "32768"]).await;
    let chat = json!({
        "messages": [{"role": "user", "content": vec!["w"; 32_700].join(" ")}],
        "max_tokens": 256,
        "stream": true,
    });
    let r = request(
        port,
        "POST",
        "/v1/chat/completions",
        Some(&chat.to_string()),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body,
        "{\"error\":{\"message\":\"This model's maximum context length is 32768 tokens. However, \
         you requested 32962 tokens (32706 in the messages, 256 in the completion). Please reduce \
         the length of the messages or completion.\",\"type\":\"BadRequestError\",\"param\":null,\
         \"code\":400}}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests() {
    let port = start(&["--flavor", "vllm", "--model", "m1"]).await;
    let r = request(port, "POST", "/v1/completions", Some("{\"prompt\": "))
        .await
        .unwrap();
    assert_eq!(r.status, 400);
    let msg = r.json()["error"]["message"].as_str().unwrap().to_string();
    assert!(!msg.contains("maximum context length"), "{msg}");
    let r = request(
        port,
        "POST",
        "/v1/completions",
        Some(&json!({"model": "other", "prompt": "x", "max_tokens": 1}).to_string()),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json()["error"]["message"],
        "The model `other` does not exist."
    );
    let r = request(port, "POST", "/v1/completions", Some("{\"max_tokens\": 3}"))
        .await
        .unwrap();
    assert_eq!(r.status, 400);
    let r = request(port, "GET", "/get_server_info", None)
        .await
        .unwrap();
    assert_eq!(r.status, 404, "SGLang-only endpoint on vLLM");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokenize_models_and_info() {
    let port = start(&["--method", "ddtree", "--budget", "8", "--max-speed"]).await;
    let r = request(
        port,
        "POST",
        "/tokenize",
        Some(&json!({"prompt": "fn main ( ) { }", "model": "sim-model"}).to_string()),
    )
    .await
    .unwrap();
    let v = r.json();
    assert_eq!(v["count"], 6);
    assert_eq!(v["tokens"].as_array().unwrap().len(), 6);
    assert_eq!(v["max_model_len"], 32768);
    let r = request(
        port,
        "POST",
        "/tokenize",
        Some(&json!({"messages": [{"role": "user", "content": "a b"}]}).to_string()),
    )
    .await
    .unwrap();
    assert_eq!(r.json()["count"], 2 + 3 + 3);

    let v = request(port, "GET", "/v1/models", None)
        .await
        .unwrap()
        .json();
    assert_eq!(v["object"], "list");
    assert_eq!(v["data"][0]["id"], "sim-model");
    assert_eq!(v["data"][0]["object"], "model");
    assert_eq!(v["data"][0]["max_model_len"], 32768);

    let r = request(port, "GET", "/get_model_info", None).await.unwrap();
    assert_eq!(r.json()["model_path"], "sim-model");
    request(
        port,
        "POST",
        "/v1/completions",
        Some(&completion_body(3, 200, false)),
    )
    .await
    .unwrap();
    let info = request(port, "GET", "/get_server_info", None)
        .await
        .unwrap()
        .json();
    let accept = info["internal_states"][0]["avg_spec_accept_length"]
        .as_f64()
        .unwrap();
    // ddtree with budget 8: mean 3.4 + 0.05 * 8 = 3.8, spread deterministic.
    assert!((2.5..5.0).contains(&accept), "{accept}");
    let m = request(port, "GET", "/metrics", None).await.unwrap().body;
    assert!(
        m.contains(&format!(
            "sglang:spec_accept_length{{model_name=\"sim-model\"}} {accept:?}"
        )),
        "{m}"
    );
    assert!(
        m.contains("sglang:generation_tokens_total{model_name=\"sim-model\"} 200.0"),
        "{m}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn not_ready_answers_503() {
    let port = simclient::free_port();
    let args = {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: sweeptop_sim::SimArgs,
        }
        Cli::parse_from(["sim", "--port", &port.to_string(), "--startup-ms", "1500"]).args
    };
    tokio::spawn(sweeptop_sim::serve(args));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    let r = loop {
        match request(port, "GET", "/health", None).await {
            Ok(r) => break r,
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(r.status, 503);
    let r = request(
        port,
        "POST",
        "/v1/completions",
        Some(&completion_body(1, 1, false)),
    )
    .await
    .unwrap();
    assert_eq!(r.status, 503);
    simclient::wait_healthy(port, std::time::Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hang_stops_tokens_but_not_health() {
    let port = start(&["--ttft-ms", "5", "--itl-ms", "2", "--fault", "hang@10"]).await;
    let mut s = EventStream::open(port, "/v1/completions", &completion_body(3, 50, true))
        .await
        .unwrap();
    let mut tokens = 0;
    let got_all = tokio::time::timeout(std::time::Duration::from_millis(800), async {
        while let Some((e, _)) = s.next().await.unwrap() {
            if let Ok(v) = serde_json::from_str::<Value>(&e) {
                tokens += count_tokens(&chunk_text(&v));
            }
        }
    })
    .await;
    assert!(got_all.is_err(), "the stream should hang, not end");
    assert_eq!(tokens, 10);
    let r = request(port, "GET", "/health", None).await.unwrap();
    assert_eq!(r.status, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_hang_never_becomes_ready() {
    let port = simclient::free_port();
    let args = {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: sweeptop_sim::SimArgs,
        }
        Cli::parse_from([
            "sim",
            "--port",
            &port.to_string(),
            "--startup-ms",
            "100",
            "--fault",
            "startup-hang",
        ])
        .args
    };
    tokio::spawn(sweeptop_sim::serve(args));
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let r = request(port, "GET", "/health", None).await.unwrap();
    assert_eq!(r.status, 503);
}

/// `--send-log`: a line per streamed request with its id, how long before
/// its head was in it reached the machine (the kernel's stamp) and when
/// each text chunk was handed to the connection, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_send_log_times_each_request_from_its_arrival() {
    let dir = std::env::temp_dir().join(format!("sweeptop-sendlog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("sent.jsonl");
    let port = start(&[
        "--ttft-ms",
        "20",
        "--itl-ms",
        "2",
        "--send-log",
        log.to_str().unwrap(),
    ])
    .await;
    let body = completion_body(12, 8, true);
    let s = EventStream::open(port, "/v1/completions", &body)
        .await
        .unwrap();
    let events = s.collect().await.unwrap();
    let chunks: Vec<Value> = events
        .iter()
        .filter(|e| e.0 != "[DONE]")
        .map(|e| serde_json::from_str(&e.0).unwrap())
        .collect();
    let texts = chunks.iter().filter(|c| !chunk_text(c).is_empty()).count();
    // The line is written once the stream has ended, by a thread of its
    // own: look until it is there (read off the runtime's threads).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let line = loop {
        let text = tokio::fs::read_to_string(&log).await.unwrap_or_default();
        if let Some(l) = text.lines().next() {
            break l.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "no send log line");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    };
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["id"], chunks[0]["id"], "{line}");
    let in_us = v["in_us"].as_u64().expect("the kernel's arrival stamp");
    assert!(in_us < 10_000_000, "{line}");
    let sent: Vec<u64> = v["sent_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(sent.len(), texts, "{line}");
    assert!(sent.windows(2).all(|w| w[0] <= w[1]), "{line}");
    // Paced from the head: the first text no sooner than the TTFT.
    assert!(sent[0] >= 20_000, "{line}");
    let _ = std::fs::remove_dir_all(&dir);
}
