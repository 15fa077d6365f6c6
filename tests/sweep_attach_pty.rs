//! The dashboard over a sweep directory: two shards running as Slurm array
//! tasks would (the batch script run here with its task id), watched as one
//! grid through their files, paused and stopped from the keys, which reach
//! each shard through its `commands.jsonl`.

use crate::common;
use crate::pty;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use pty::Pty;

#[test]
fn a_sweep_directory_is_watched_paused_and_stopped_from_the_keys() {
    let dir = scratch("sweep-pty");
    let tag = format!("sweep-pty-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let fake_bin = dir.join("bin");
    fake_sbatch(&fake_bin);
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        two_config_plan("spread-pty", 20, &[64, 128, 256, 512, 1024], 4, 30),
    )
    .unwrap();
    let sweep = dir.join("sweep");
    let mut c = sweeptop(&tag);
    c.env(
        "PATH",
        format!(
            "{}:{}",
            fake_bin.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
    )
    .arg("slurm")
    .arg(&plan)
    .args(["--nodes", "2", "--run-arg=--sim-gpus=2", "--out"])
    .arg(&sweep);
    let out = run_with_deadline(c, Duration::from_secs(30));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tasks: Vec<_> = (1..=2)
        .map(|i| {
            Command::new("bash")
                .arg(sweep.join("sweep.sbatch"))
                .env("SWEEPTOP_TEST_TAG", &tag)
                .env("SLURM_ARRAY_TASK_ID", i.to_string())
                .env("SLURMD_NODENAME", format!("node{i}"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let shard = |i: u32| sweep.join(format!("shards/{i}"));
    wait_until(Duration::from_secs(60), "both shards to run a cell", || {
        (1..=2).all(|i| {
            events(&shard(i))
                .iter()
                .any(|e| e["event"] == "cell_started")
        })
    });

    let mut c = Command::new(bin());
    c.arg("attach")
        .arg(&sweep)
        .env("SWEEPTOP_TEST_TAG", &tag)
        .env("TERM", "xterm-256color")
        .env("LANG", "C.UTF-8")
        .env_remove("LC_ALL")
        .env_remove("LC_CTYPE")
        .env("HOME", &dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"));
    let mut term = Pty::spawn(c, 120, 40);
    term.wait_for(" RUNNING", Duration::from_secs(30));
    term.wait_until(Duration::from_secs(30), "both configs in the grid", |s| {
        // A config's row, marked ▶ while it runs.
        let row = |c: &str| {
            s.lines()
                .any(|l| l.contains(&format!(" {c} ")) || l.contains(&format!("▶{c} ")))
        };
        row("a") && row("b")
    });
    // One GPU panel, grouped by host: each shard's GPUs named with its node
    // and owned by the config that shard runs.
    term.wait_until(
        Duration::from_secs(30),
        "both hosts' GPUs, each its own config's",
        |s| {
            let owns = |c: &str, node: &str| s.contains(&format!("{c} · {node} Simulated H200"));
            (owns("a", "node1") && owns("b", "node2")) || (owns("b", "node1") && owns("a", "node2"))
        },
    );
    term.send("p");
    // Each shard is paused, by a command from its commands file.
    wait_until(Duration::from_secs(30), "both shards to pause", || {
        (1..=2).all(|i| events(&shard(i)).iter().any(|e| e["event"] == "paused"))
    });
    for i in 1..=2 {
        let ev = events(&shard(i));
        let action = ev.iter().find(|e| e["event"] == "action").unwrap();
        assert_eq!(action["action"], "pause", "{action}");
        let source = action["source"].as_str().unwrap();
        assert!(source.starts_with("file (from "), "{source}");
    }
    term.wait_for(" PAUSED", Duration::from_secs(30));
    term.send("q");
    term.wait_for("Stop the sweep, or only detach?", Duration::from_secs(10));
    term.send("y");
    for mut t in tasks {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = t.try_wait().unwrap() {
                break s;
            }
            assert!(std::time::Instant::now() < deadline, "a shard did not stop");
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(status.code(), Some(130), "a stopped shard exits 130");
    }
    term.wait_exit(Duration::from_secs(30));
    for i in 1..=2 {
        assert!(events(&shard(i))
            .iter()
            .any(|e| e["event"] == "action" && e["action"] == "quit"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
