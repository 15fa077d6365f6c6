//! A server without `/tokenize`: prompts are measured with the plan's local
//! tokenizer.json (exact), or estimated with a notice when there is none.

mod common;

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
        stdout.contains("measuring prompts with the plan's tokenizer"),
        "{stdout}"
    );
    assert!(stdout.contains("prompt lengths are estimated"), "{stdout}");
    let est = results.iter().find(|r| r["config"] == "estimate").unwrap();
    assert_eq!(est["status"], "ok", "{est}");
    let _ = std::fs::remove_dir_all(&dir);
}
