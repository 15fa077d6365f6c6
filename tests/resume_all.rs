//! After a reboot, one command: a sweep killed mid-cell whose prepared
//! model vanished (tmpfs emptied) is found by `sweeptop resume --all`, its
//! prepare step run again, and finished in the background with every cell
//! recorded exactly once and no process left.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;

/// A copier that writes `$2` files of 1 MB into `$1`, slowly, and counts
/// its runs in `$1.runs`.
fn copier(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("copier.sh");
    std::fs::write(
        &path,
        "#!/bin/sh\nmkdir -p \"$1\"\necho run >> \"$1.runs\"\ni=0\nwhile [ $i -lt $2 ]; do\n  \
         head -c 1000000 /dev/zero > \"$1/part-$i.bin\"\n  echo \"copied part $i\"\n  \
         i=$((i+1))\n  sleep 0.2\ndone\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn plan(copier: &Path, target: &Path) -> String {
    format!(
        r#"
name = "reboot"
config_id = "{{method}}"
[server]
kind = "sglang"
command = "{{sweeptop}} sim-server --flavor sglang --port {{port}} --model m --max-model-len 4096 --startup-ms 100"
port = "auto"
requires = ["{target}"]
ready = {{ timeout_s = 30 }}
[[prepare]]
id = "model"
command = "{copier} {target} 6"
creates = ["{target}"]
expect_bytes = 6000000
[[workloads]]
id = "w"
contexts = [256, 512, 1024]
concurrency = [1, 2]
requests = 3
max_tokens = 48
[[phases]]
id = "p"
matrix = {{ method = ["a", "b"] }}
"#,
        copier = copier.display(),
        target = target.display()
    )
}

fn state(run: &Path) -> String {
    std::fs::read_to_string(run.join("run.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|m| m["state"].as_str().map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn a_reboot_mid_sweep_is_recovered_by_one_command() {
    let dir = scratch("resume-all");
    let runs = dir.join("runs");
    let run = runs.join("r1");
    let target = dir.join("shm").join("model");
    let copier = copier(&dir);
    let plan_path = dir.join("plan.toml");
    std::fs::write(&plan_path, plan(&copier, &target)).unwrap();
    let tag = format!("resume-all-{}", std::process::id());

    let mut cmd = sweeptop(&tag);
    cmd.args(["run", "--headless", "--no-gpu", "--out"])
        .arg(&run)
        .arg(&plan_path)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    wait_until(Duration::from_secs(120), "3 recorded cells", || {
        results(&run).len() >= 3
    });
    wait_until(Duration::from_secs(60), "a running server", || {
        run.join("server.pid").exists()
    });
    // The reboot: the sweep dies at once, and the tmpfs is emptied.
    child.kill().unwrap();
    child.wait().unwrap();
    let before = results(&run).len();
    std::fs::remove_dir_all(&target).unwrap();

    // What it would do, and nothing done.
    let events_before = events(&run).len();
    let mut cmd = sweeptop(&tag);
    cmd.args(["resume", "--all", "--dry-run", "--no-gpu"])
        .arg(&runs);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("would resume 1 run(s)"), "{said}");
    assert!(said.contains(&run.display().to_string()), "{said}");
    assert!(said.contains("prepare model first"), "{said}");
    assert!(said.contains("is missing"), "{said}");
    assert_eq!(results(&run).len(), before);
    assert_eq!(events(&run).len(), events_before);
    assert!(!target.exists());

    // The one command.
    let mut cmd = sweeptop(&tag);
    cmd.args(["resume", "--all", "--no-gpu"]).arg(&runs);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("resuming in the background"), "{said}");
    wait_until(
        Duration::from_secs(240),
        "the resumed run to finish",
        || state(&run) == "finished",
    );
    wait_until(Duration::from_secs(60), "every process to end", || {
        tagged_processes(&tag).is_empty()
    });

    let results = results(&run);
    let cells = by_cell(&results);
    let planned = plan_cells(&run.join("plan.toml"));
    assert_eq!(planned.len(), 12);
    assert_eq!(results.len(), planned.len(), "one line per cell");
    for id in &planned {
        let recorded = cells.get(id).map(Vec::len);
        assert_eq!(recorded, Some(1), "cell {id}");
        assert_eq!(cells[id][0]["status"], "ok", "{}", cells[id][0]);
    }
    // The step ran again after the reboot, before any config of the resume.
    let runs_of_copier = std::fs::read_to_string(target.with_extension("runs")).unwrap();
    assert_eq!(runs_of_copier.lines().count(), 2);
    let evs = events(&run);
    let resumed = evs
        .iter()
        .rposition(|e| e["event"] == "sweep_started")
        .unwrap();
    let after: Vec<&serde_json::Value> = evs[resumed..].iter().collect();
    let ended = after
        .iter()
        .position(|e| e["event"] == "prepare_ended" && e["outcome"] == "done")
        .expect("the step ran again");
    let first_start = after
        .iter()
        .position(|e| e["event"] == "config_starting")
        .unwrap();
    assert!(ended < first_start);
    assert_eq!(after[ended]["bytes"], 6_000_000);
    let log = std::fs::read_to_string(runs.join("resume.log")).unwrap();
    assert!(log.contains("finished"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn resume_all_says_what_makes_it_automatic() {
    let dir = scratch("resume-print");
    let runs = dir.join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let tag = format!("resume-print-{}", std::process::id());
    let abs = std::fs::canonicalize(&runs).unwrap();

    let mut cmd = sweeptop(&tag);
    cmd.args(["resume", "--print-systemd"]).arg(&abs);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    let unit = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{unit}");
    let exec = format!("ExecStart={} resume --all {}", bin(), abs.display());
    assert!(unit.contains(&exec), "{unit}");
    for line in [
        "[Service]",
        "Type=oneshot",
        "KillMode=process",
        "WantedBy=default.target",
    ] {
        assert!(unit.contains(line), "{line} in {unit}");
    }

    let mut cmd = sweeptop(&tag);
    cmd.args(["resume", "--print-cron", "--no-gpu"]).arg(&abs);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    let cron = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{cron}");
    let line = cron
        .lines()
        .find(|l| l.starts_with("@reboot "))
        .expect(&cron);
    assert!(
        line.contains(&format!(
            "{} resume --all {} --no-gpu",
            bin(),
            abs.display()
        )),
        "{line}"
    );
    assert!(line.contains("resume.log"), "{line}");

    // Nothing to do is said, and is no error.
    let mut cmd = sweeptop(&tag);
    cmd.args(["resume", "--all"]).arg(&runs);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to resume"));

    // Without --all it says what to write.
    let mut cmd = sweeptop(&tag);
    cmd.args(["resume"]).arg(&runs);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("resume --all"));
    let _ = std::fs::remove_dir_all(&dir);
}
