//! A server without `/tokenize`: prompts are measured with the plan's local
//! tokenizer.json (exact), or estimated with a notice when there is none.

use crate::common;

use std::time::Duration;

use common::*;

/// Word-level, split on whitespace only: the simulated server's own counting.
const TOKENIZER: &str = r#"{
  "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
  "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"},
  "post_processor": null, "decoder": null,
  "model": {"type": "WordLevel", "vocab": {"[UNK]": 0}, "unk_token": "[UNK]"}
}"#;

#[test]
fn local_tokenizer_measures_prompts_when_the_server_cannot() {
    let dir = scratch("tokenizer");
    std::fs::write(dir.join("tokenizer.json"), TOKENIZER).unwrap();
    let plan = dir.join("p.toml");
    std::fs::write(
        &plan,
        format!(
            r#"
name = "tok"
[vars]
tok = "{}"
[server]
command = "{{sweeptop}} sim-server --port {{port}} --startup-ms 50 --max-speed --no-tokenize"
port = "auto"
tokenizer = "{{tok}}"
[limits]
context = 8192
[[workloads]]
id = "w"
contexts = [500, 3000]
concurrency = [2]
requests = 2
max_tokens = 8
[[phases]]
id = "p"
  [phases.matrix]
  how = ["local", "estimate"]
  [[phases.set]]
  when = {{ how = "estimate" }}
  vars = {{ tok = "" }}
"#,
            dir.join("tokenizer.json").display()
        ),
    )
    .unwrap();
    let out_dir = dir.join("run");
    let mut cmd = sweeptop("tokenizer");
    cmd.arg("run")
        .arg(&plan)
        .args(["--headless", "--no-gpu", "--out"])
        .arg(&out_dir);
    let out = run_with_deadline(cmd, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let results = results(&out_dir);
    for target in [500.0, 3000.0] {
        let local = results
            .iter()
            .find(|r| r["config"] == "local" && r["context_tokens"].as_f64() == Some(target))
            .unwrap();
        assert_eq!(local["status"], "ok", "{local}");
        assert_eq!(
            local["metrics"]["prompt_tokens_mean"].as_f64(),
            Some(target),
            "{local}"
        );
    }
    assert!(
        stdout.contains("measuring prompts with the tokenizer server.tokenizer names"),
        "{stdout}"
    );
    assert!(stdout.contains("prompt lengths are estimated"), "{stdout}");
    let est = results.iter().find(|r| r["config"] == "estimate").unwrap();
    assert_eq!(est["status"], "ok", "{est}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server whose requests count a token more than its `/tokenize` says (a
/// BOS, as vLLM's): prompts are still exactly as long as asked, by the
/// server's own count in `usage`, in both APIs.
#[test]
fn prompts_are_as_long_as_the_server_counts_them() {
    for api in ["completions", "chat"] {
        let dir = scratch(&format!("tokenizer-bos-{api}"));
        let tag = format!("tokenizer-bos-{api}-{}", std::process::id());
        let plan = format!(
            r#"
name = "bos"
[server]
command = "{{sweeptop}} sim-server --flavor vllm --port {{port}} --startup-ms 50 --max-speed --bos"
port = "auto"
api = "{api}"
[limits]
context = 8192
[[workloads]]
id = "w"
contexts = [128, 1000, 4000]
concurrency = [2]
requests = 4
max_tokens = 8
[[phases]]
id = "p"
"#
        );
        let (run, stdout) = run_plan(&dir, &tag, &plan, Duration::from_secs(120));
        assert!(!stdout.contains("warning"), "{stdout}");
        let results = results(&run);
        assert_eq!(results.len(), 3);
        for r in results {
            let target = r["context_tokens"].as_u64().unwrap();
            let m = &r["metrics"];
            assert_eq!(r["status"], "ok", "{r}");
            assert_eq!(m["prompt_tokens_min"].as_u64(), Some(target), "{api}: {r}");
            assert_eq!(m["prompt_tokens_max"].as_u64(), Some(target), "{api}: {r}");
        }
    }
}
