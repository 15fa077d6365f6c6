//! A server that returns fewer tokens than asked (vLLM 0.32 lowers
//! `max_tokens` to what the context has left and answers 200) is never a
//! clean ok: the cell carries a `short_output` warning with got/asked and the
//! context as the reason, in the record, the progress line and every export;
//! `short_requests = "fail"` fails it and `"ignore"` is the explicit opt-out.

use crate::common;

use std::time::Duration;

use common::*;

fn plan(policy: &str) -> String {
    format!(
        r#"
name = "short"
[server]
# Paced (a token a millisecond): a stream at machine speed is read in one
# burst and is rightly `client_starved`, which is not what this tests.
command = "{{sweeptop}} sim-server --flavor vllm --port {{port}} --startup-ms 50 --ttft-ms 1 --itl-ms 1 --max-model-len 256 --clamp-max-tokens"
port = "auto"
stop_grace_s = 1
[limits]
context = "server"
{policy}
[[workloads]]
id = "w"
contexts = [64, 200]
concurrency = [1]
requests = 2
max_tokens = 100
overflow = "send"
[[phases]]
id = "p"
"#
    )
}

fn export(tag: &str, run: &std::path::Path, format: &str) -> String {
    let mut cmd = sweeptop(tag);
    cmd.args(["export", "--format", format]).arg(run);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn short_outputs_are_flagged_everywhere_by_default() {
    let dir = scratch("short-flag");
    let tag = format!("short-flag-{}", std::process::id());
    let (run, stdout) = run_plan(&dir, &tag, &plan(""), Duration::from_secs(120));
    let by = by_cell(&results(&run));
    let full = &by["p/w-ctx64-c1"][0];
    assert_eq!(full["status"], "ok");
    assert!(common::warning_kinds_of_the_cell(full).is_empty(), "{full}");
    assert_eq!(full["metrics"]["output_tokens"], 200);
    assert_eq!(full["metrics"]["output_tokens_asked"], 200);
    let short = &by["p/w-ctx200-c1"][0];
    assert_eq!(short["status"], "ok", "{short}");
    let w = &short["warnings"][0];
    assert_eq!(w["kind"], "short_output", "{short}");
    let got = short["metrics"]["output_tokens"].as_u64().unwrap();
    let prompt = short["metrics"]["prompt_tokens_max"].as_u64().unwrap();
    assert_eq!(got, 2 * (256 - prompt), "{short}");
    assert_eq!(short["metrics"]["output_tokens_asked"], 200);
    let message = w["message"].as_str().unwrap();
    assert!(
        message.starts_with("2 of 2 requests returned fewer tokens than the 100 asked")
            && message.ends_with(&format!(": prompt {prompt} + 100 asked > context 256")),
        "{message}"
    );
    assert_eq!(w["context"]["limit"], 256);
    assert_eq!(w["context"]["prompt_tokens"], prompt);
    assert_eq!(w["context"]["output_tokens"], 100);
    // The progress line says it next to the numbers.
    let line = stdout
        .lines()
        .find(|l| l.contains("p/w-ctx200-c1"))
        .unwrap();
    assert!(
        line.contains("  ok  ") && line.contains("SHORT 2 of 2 requests"),
        "{line}"
    );
    // Every export: CSV columns, the Markdown grid and its warnings, JSON.
    let csv = export(&tag, &run, "csv");
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert!(
        header.contains(&"warning_kind") && header.contains(&"warning_message"),
        "{header:?}"
    );
    let row = csv
        .lines()
        .find(|l| l.starts_with("p/w-ctx200-c1"))
        .unwrap();
    assert!(row.contains(",short_output,"), "{row}");
    let md = export(&tag, &run, "md");
    assert!(md.contains(&format!(" short {got}/200 |")), "{md}");
    assert!(md.contains("## Warnings"), "{md}");
    let json = export(&tag, &run, "json");
    assert!(json.contains("\"short_output\""), "{json}");
}

/// The results by cell of the plan with `policy`, in a directory of its own.
fn run_with(name: &str, policy: &str) -> std::collections::HashMap<String, Vec<serde_json::Value>> {
    let dir = scratch(name);
    let tag = format!("{name}-{}", std::process::id());
    let (run, _) = run_plan(&dir, &tag, &plan(policy), Duration::from_secs(120));
    by_cell(&results(&run))
}

#[test]
fn short_outputs_fail_the_cell_or_are_ignored_when_the_plan_says_so() {
    let by = run_with("short-fail", "short_requests = \"fail\"");
    let short = &by["p/w-ctx200-c1"][0];
    assert_eq!(short["status"], "failed");
    assert_eq!(short["failure"]["kind"], "short_output");
    assert_eq!(by["p/w-ctx64-c1"][0]["status"], "ok");

    let by = run_with("short-ignore", "short_requests = \"ignore\"");
    let short = &by["p/w-ctx200-c1"][0];
    assert_eq!(short["status"], "ok");
    assert!(
        common::warning_kinds_of_the_cell(short).is_empty(),
        "{short}"
    );
    assert_eq!(short["metrics"]["short_requests"], 2);
}
