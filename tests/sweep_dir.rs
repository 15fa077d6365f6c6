//! A sweep spread over shards, without a cluster: `sweeptop slurm` with a
//! stand-in `sbatch` on the PATH that records what it was asked, then each
//! array task's script run here as Slurm would run it, then `slurm --resume`
//! and the sweep directory read back as one grid (`ls`, `export`, `open`).
//! `tests/slurm.rs` does the same on a real Slurm.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;

fn cmd(tag: &str, bin: &Path, args: &[&str]) -> std::process::Command {
    let mut c = sweeptop(tag);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    c.env("PATH", path).args(args);
    c
}

fn ok(out: &std::process::Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// One array task, as Slurm runs it: the batch script with its task id.
fn task(tag: &str, sweep: &Path, i: u32) -> String {
    let mut c = std::process::Command::new("bash");
    c.arg(sweep.join("sweep.sbatch"))
        .env("SWEEPTOP_TEST_TAG", tag)
        .env("SLURM_ARRAY_TASK_ID", i.to_string())
        .env("SLURMD_NODENAME", format!("node{i}"))
        .stdin(std::process::Stdio::null());
    let out = run_with_deadline(c, Duration::from_secs(120));
    format!("{}{}", ok(&out), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn a_sweep_is_split_submitted_resumed_and_read_back_as_one() {
    let dir = scratch("sweepdir");
    let tag = format!("sweepdir-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let bin = dir.join("bin");
    fake_sbatch(&bin);
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, two_config_plan("spread", 2, &[64, 128], 2, 8)).unwrap();
    let sweep = dir.join("sweep");
    let s = sweep.to_str().unwrap();
    let p = plan.to_str().unwrap();

    // --dry-run prints the script and writes nothing.
    let out = run_with_deadline(
        cmd(
            &tag,
            &bin,
            &[
                "slurm",
                p,
                "--nodes",
                "3",
                "--out",
                s,
                "--dry-run",
                "--partition",
                "debug",
            ],
        ),
        Duration::from_secs(30),
    );
    let text = ok(&out);
    assert!(text.contains("#SBATCH --array=1-3"), "{text}");
    assert!(text.contains("#SBATCH --partition=debug"), "{text}");
    assert!(!sweep.exists() && !bin.join("sbatch.calls").exists());

    let out = run_with_deadline(
        cmd(
            &tag,
            &bin,
            &["slurm", p, "--nodes", "3", "--out", s, "--run-arg=--no-gpu"],
        ),
        Duration::from_secs(30),
    );
    let text = ok(&out);
    assert!(text.contains("submitted job 4242"), "{text}");
    let calls = std::fs::read_to_string(bin.join("sbatch.calls")).unwrap();
    assert_eq!(calls.trim(), format!("--parsable {s}/sweep.sbatch"));
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sweep.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(meta["shards"], 3);
    assert_eq!(meta["submissions"][0]["job_id"], "4242");

    // Before any task ran: every shard pending.
    let text = ok(&run_with_deadline(
        cmd(&tag, &bin, &["ls", s]),
        Duration::from_secs(30),
    ));
    assert_eq!(text.matches("pending").count(), 3, "{text}");

    // Two configs in three shards: one shard has nothing to run.
    let outputs: Vec<String> = [1, 3].iter().map(|&i| task(&tag, &sweep, i)).collect();
    let empty = outputs
        .iter()
        .filter(|o| o.contains("has no configs"))
        .count();
    let ran: usize = [1, 3]
        .iter()
        .map(|i| results(&sweep.join(format!("shards/{i}"))).len())
        .sum();
    // Shard 2 still to run: resume submits it alone.
    let text = ok(&run_with_deadline(
        cmd(&tag, &bin, &["slurm", "--resume", s]),
        Duration::from_secs(30),
    ));
    assert!(text.contains("shard 2/3: pending, "), "{text}");
    assert!(text.contains("submitted job 4242: shard(s) 2"), "{text}");
    let calls = std::fs::read_to_string(bin.join("sbatch.calls")).unwrap();
    assert_eq!(
        calls.lines().last().unwrap(),
        format!("--parsable --array=2 {s}/sweep.sbatch")
    );
    let second = task(&tag, &sweep, 2);
    let empty = empty + usize::from(second.contains("has no configs"));
    assert_eq!(empty, 1, "one empty shard: {outputs:?} {second}");
    assert_eq!(ran + results(&sweep.join("shards/2")).len(), 4);
    // A shard's run directory knows its shard and who ran it.
    let shard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sweep.join("shards/2/shard.json")).unwrap())
            .unwrap();
    assert_eq!(
        (shard["index"].as_u64(), shard["count"].as_u64()),
        (Some(2), Some(3))
    );
    let beat = std::fs::read_to_string(sweep.join("shards/2/heartbeat")).unwrap();
    assert!(beat.contains("\"host\":\"node2\""), "{beat}");

    let text = ok(&run_with_deadline(
        cmd(&tag, &bin, &["slurm", "--resume", s]),
        Duration::from_secs(30),
    ));
    assert!(text.contains("nothing to submit"), "{text}");

    // Resuming a finished shard keeps to its part of the plan.
    let text = ok(&run_with_deadline(
        cmd(
            &tag,
            &bin,
            &[
                "run",
                "--resume",
                &format!("{s}/shards/2"),
                "--headless",
                "--no-gpu",
            ],
        ),
        Duration::from_secs(60),
    ));
    assert!(text.contains("nothing left to run"), "{text}");

    // One grid: every cell of the plan exactly once, all ok.
    let text = ok(&run_with_deadline(
        cmd(&tag, &bin, &["ls", s, "--json"]),
        Duration::from_secs(30),
    ));
    let runs: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(runs[0]["state"], "finished", "{runs}");
    assert_eq!(
        (runs[0]["done"].as_u64(), runs[0]["total"].as_u64()),
        (Some(4), Some(4))
    );
    assert_eq!(runs[0]["shards"].as_array().unwrap().len(), 3);
    let text = ok(&run_with_deadline(
        cmd(&tag, &bin, &["export", s, "--format", "json"]),
        Duration::from_secs(30),
    ));
    let exported: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rows = exported
        .as_array()
        .or_else(|| exported["results"].as_array())
        .unwrap_or_else(|| panic!("{exported}"));
    let mut cells: Vec<&str> = rows.iter().map(|r| r["cell"].as_str().unwrap()).collect();
    cells.sort();
    let mut want = plan_cells(&plan);
    want.sort();
    assert_eq!(cells, want.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(rows.iter().all(|r| r["status"] == "ok"), "{text}");
    let md = ok(&run_with_deadline(
        cmd(&tag, &bin, &["open", s]),
        Duration::from_secs(30),
    ));
    assert!(md.contains("p-a") || md.contains("| a"), "{md}");

    let html = ok(&run_with_deadline(
        cmd(&tag, &bin, &["report", s, "-o", "-"]),
        Duration::from_secs(30),
    ));
    assert!(html.contains("<html") && html.contains("spread"), "{html}");
    // A finished sweep followed as lines: it says so and ends.
    let text = ok(&run_with_deadline(
        cmd(&tag, &bin, &["attach", s, "--headless"]),
        Duration::from_secs(30),
    ));
    assert!(text.contains("sweep finished"), "{text}");
    // Nothing runs: a command for the sweep has nowhere to go.
    let out = run_with_deadline(
        cmd(&tag, &bin, &["attach", s, "--send", "pause"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}
