//! Plans an adversarial user wrote: each mistake is a located error from
//! `check` (exit 2) at the key it is about, nothing is read without bound, and
//! a big plan expands in time linear in its size.

use crate::common;

use std::time::Duration;

use common::*;

const BASE: &str = r#"name = "x"
[server]
command = "run {port} {tp}"
port = "auto"
[[workloads]]
id = "w"
contexts = [64]
concurrency = [1]
[[phases]]
id = "p"
[phases.matrix]
tp = [1, 2]
"#;

/// `check` on `text`: its exit code and standard error.
fn check(name: &str, text: &str) -> (Option<i32>, String) {
    let dir = scratch(&format!("planhard-{name}"));
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, text).unwrap();
    let (code, err) = check_path(&plan);
    let _ = std::fs::remove_dir_all(&dir);
    (code, err.replace(&format!("{}:", plan.display()), "PLAN:"))
}

fn check_path(plan: &std::path::Path) -> (Option<i32>, String) {
    let mut cmd = sweeptop("planhard");
    cmd.arg("check").arg(plan);
    let out = run_with_deadline(cmd, Duration::from_secs(60));
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The base plan with `line` put after the line that starts with `after`.
fn with(after: &str, line: &str) -> String {
    let mut out = String::new();
    for l in BASE.lines() {
        out.push_str(l);
        out.push('\n');
        if l.starts_with(after) {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

#[test]
fn each_mistake_is_located_at_its_own_key() {
    let name300 = format!("name = \"{}\"", "a".repeat(300));
    let cases: Vec<(&str, String, &str, &str)> = vec![
        (
            "when",
            format!(
                "{BASE}[[phases.set]]\nwhen = {{ method = [\"a\"] }}\nvars = {{ x = \"1\" }}\n"
            ),
            "PLAN:14:19:",
            "`when` names `method`, which is not an axis of phase `p` (its axes: tp)",
        ),
        (
            "grace",
            with("port", "stop_grace_s = -1"),
            "PLAN:5:16:",
            "server.stop_grace_s must be from 0",
        ),
        (
            "ready",
            with("port", "ready = { timeout_s = nan }"),
            "PLAN:5:",
            "server.ready.timeout_s must be more than 0",
        ),
        (
            "retries",
            with("port", "retries = 100000"),
            "PLAN:5:11:",
            "server.retries must be from 0 to 100",
        ),
        (
            "stall",
            format!("{BASE}[limits]\nstall_timeout_s = 0\n"),
            "PLAN:14:19:",
            "limits.stall_timeout_s must be more than 0",
        ),
        (
            "errors",
            format!("{BASE}[limits]\nmax_error_rate = 2.0\n"),
            "PLAN:14:18:",
            "limits.max_error_rate must be from 0 to 1",
        ),
        (
            "margin",
            format!("{BASE}[limits]\ncontext_margin = 99999999\n"),
            "PLAN:14:18:",
            "limits.context_margin must be from 0 to",
        ),
        (
            "name",
            BASE.replace("name = \"x\"", &name300),
            "PLAN:1:8:",
            "plan name is 300 characters; at most 100",
        ),
        (
            "prompt",
            with("contexts", "prompt = \"file:/nonexistent/prompt.txt\""),
            "PLAN:8:10:",
            "prompt file `/nonexistent/prompt.txt` of workload `w`",
        ),
        (
            "brace",
            BASE.replace("{tp}", "{tp"),
            "PLAN:3:11:",
            "unclosed `{` in `{tp`",
        ),
        (
            "requests",
            with("concurrency", "requests = 0"),
            "PLAN:9:12:",
            "requests must be from 1 to 10000000, not 0",
        ),
        (
            "rate",
            with("concurrency", "rate = inf"),
            "PLAN:9:8:",
            "rate must be more than 0 and at most 1000000",
        ),
        (
            "duration",
            with("concurrency", "duration_s = -3"),
            "PLAN:9:14:",
            "duration_s must be more than 0",
        ),
        (
            "concurrency",
            BASE.replace("concurrency = [1]", "concurrency = [1000000]"),
            "PLAN:8:15:",
            "concurrency levels must be from 1 to 65536",
        ),
        (
            "contexts",
            BASE.replace("contexts = [64]", "contexts = [1000000000000]"),
            "PLAN:7:12:",
            "context targets must be from 1 to",
        ),
    ];
    for (name, text, at, says) in cases {
        let (code, err) = check(name, &text);
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(err.starts_with(&format!("error: {at}")), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert!(!err.contains("{{tp"), "{name}: {err}");
    }
}

#[test]
fn unreadable_plans_say_why_without_a_made_up_place() {
    let dir = scratch("planhard-files");
    // Binary: where the text stops being text.
    let bin = dir.join("bin.toml");
    std::fs::write(&bin, b"name = \"x\"\n\xff\xfe\x00").unwrap();
    let (code, err) = check_path(&bin);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("not UTF-8 text (at byte 11)"), "{err}");
    assert!(!err.contains(":0:0:"), "{err}");
    // Missing.
    let (code, err) = check_path(&dir.join("missing.toml"));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("No such file"), "{err}");
    assert!(!err.contains(":0:0:"), "{err}");
    // Endless: read up to a bound, not until memory runs out.
    let (code, err) = check_path(std::path::Path::new("/dev/zero"));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("larger than 4 MiB"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_big_plan_expands_and_one_too_big_says_its_size() {
    // Four 10-value axes on a 2×2 workload: 10,000 configs, 40,000 cells.
    // (It took a minute when duplicate points were found by comparing every
    // pair; now each is looked up once.)
    let axes: String = (0..4)
        .map(|i| format!("a{i} = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"))
        .collect();
    let plan = format!(
        "name = \"big\"\n[server]\ncommand = \"x {{port}}\"\nport = \"auto\"\n[[workloads]]\nid = \"w\"\ncontexts = [64, 128]\nconcurrency = [1, 2]\n[[phases]]\nid = \"p\"\n[phases.matrix]\n{axes}"
    );
    let dir = scratch("planhard-big");
    let path = dir.join("big.toml");
    std::fs::write(&path, &plan).unwrap();
    let mut cmd = sweeptop("planhard");
    cmd.args(["check", "--json"]).arg(&path);
    let out = run_with_deadline(cmd, Duration::from_secs(120));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["count"]["configs"], 10_000);
    assert_eq!(v["count"]["cells"], 40_000);
    let ids: std::collections::HashSet<&str> = v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 40_000);

    // Thirty axes: refused at once, with the size it would have had.
    let axes: String = (0..30)
        .map(|i| format!("a{i} = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\n"))
        .collect();
    let huge =
        plan.split("[phases.matrix]").next().unwrap().to_string() + "[phases.matrix]\n" + &axes;
    let (code, err) = check("huge", &huge);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("error: PLAN:10:6:"), "{err}");
    assert!(
        err.contains("1,000,000,000,000,000,000,000,000,000,000 configs × 4 cells each"),
        "{err}"
    );
    assert!(err.contains("at most 1,000,000 cells"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
