//! Durability: a sweep killed with SIGKILL resumes where it stopped, every cell
//! recorded exactly once, and no server left behind.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::*;

#[test]
fn sigkill_mid_demo_then_resume_records_every_cell_once() {
    let dir = scratch("resume");
    let out_dir = dir.join("run");
    let tag = format!("resume-{}", std::process::id());
    let mut cmd = sweeptop(&tag);
    cmd.args(["demo", "--headless", "--out"])
        .arg(&out_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    // Kill while a server is up, a few cells in.
    wait_until(Duration::from_secs(120), "10 recorded cells", || {
        results(&out_dir).len() >= 10
    });
    wait_until(Duration::from_secs(60), "a running server", || {
        out_dir.join("server.pid").exists()
    });
    let before = results(&out_dir).len();
    child.kill().unwrap();
    child.wait().unwrap();
    // The server group survives its parent's SIGKILL (that is what resume cleans up).
    let leftovers = tagged_processes(&tag);
    assert!(
        !leftovers.is_empty(),
        "expected the server to outlive a SIGKILLed sweeptop"
    );

    let mut cmd = sweeptop(&tag);
    cmd.args(["run", "--resume"])
        .arg(&out_dir)
        .arg("--headless");
    let out = run_with_deadline(cmd, Duration::from_secs(180));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("({before} already recorded)"))
            || stdout.contains("already recorded"),
        "{stdout}"
    );
    assert!(stdout.contains("left by an earlier run"), "{stdout}");

    let results = results(&out_dir);
    let cells = by_cell(&results);
    let planned = plan_cells(&out_dir.join("plan.toml"));
    assert_eq!(results.len(), planned.len(), "one line per cell");
    for id in &planned {
        assert_eq!(cells.get(id).map(Vec::len), Some(1), "cell {id}");
    }
    assert!(
        tagged_processes(&tag).is_empty(),
        "a server process outlived the resumed sweep"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ctrl_c_stops_the_server_keeps_results_and_exits_nonzero() {
    let dir = scratch("sigint");
    let out_dir = dir.join("run");
    let tag = format!("sigint-{}", std::process::id());
    let mut cmd = sweeptop(&tag);
    cmd.args(["demo", "--headless", "--out"])
        .arg(&out_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    wait_until(Duration::from_secs(120), "3 recorded cells", || {
        results(&out_dir).len() >= 3
    });
    wait_until(Duration::from_secs(60), "a running server", || {
        out_dir.join("server.pid").exists()
    });
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = wait_output(child, Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let recorded = results(&out_dir);
    assert!(recorded.len() >= 3);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["state"], "interrupted");
    // The clock its chunks were timed on.
    assert_eq!(meta["timing_clock"], "wire", "{meta}");
    assert!(!out_dir.join("server.pid").exists());
    assert!(
        tagged_processes(&tag).is_empty(),
        "the server group must be stopped"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_finished_run_says_nothing_is_left_and_retries_what_it_is_told() {
    let dir = scratch("resume-retry");
    let tag = format!("resume-retry-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    // Two configs: one healthy, one whose server crashes on its first request.
    let plan = tiny_plan_with_crash(&["ok"]);
    let (run, _) = run_plan(&dir, &tag, &plan, Duration::from_secs(120));
    let before = results(&run);
    let failed: Vec<String> = before
        .iter()
        .filter(|r| r["status"] == "failed")
        .map(|r| r["cell"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(failed.len(), 1, "{before:?}");
    assert_eq!(before.len(), 2);

    // Resuming a complete run runs nothing and says how to retry.
    let mut cmd = sweeptop(&tag);
    cmd.args(["run", "--headless", "--no-gpu", "--resume"])
        .arg(&run);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("nothing left to run"), "{said}");
    assert!(said.contains("--retry failed"), "{said}");
    assert_eq!(results(&run).len(), 2);

    // An unknown target is refused before anything runs.
    let mut cmd = sweeptop(&tag);
    cmd.args(["run", "--headless", "--no-gpu", "--resume"])
        .arg(&run)
        .args(["--retry", "nope"]);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`nope`"));

    // --retry failed measures the failed cell again, and only it.
    let mut cmd = sweeptop(&tag);
    cmd.args(["run", "--headless", "--no-gpu", "--resume"])
        .arg(&run)
        .args(["--retry", "failed"]);
    let out = run_with_deadline(cmd, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let after = results(&run);
    assert_eq!(after.len(), 3, "{after:?}");
    assert_eq!(after[2]["cell"], failed[0].as_str());
    // Recorded like a key press, with where it came from.
    assert!(events(&run).iter().any(|e| e["event"] == "action"
        && e["action"] == "retry"
        && e["target"] == failed[0].as_str()
        && e["source"] == "command line (--retry failed)"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A batch scheduler's stop (scancel, a time limit) sends SIGTERM to the
/// sweep and its server at once: the server's death is the stop's, not the
/// config's, so the cell it cut short stays unrecorded for the resume and no
/// cell is marked failed.
#[test]
fn a_stop_that_also_kills_the_server_records_no_failure() {
    let dir = scratch("sigterm-both");
    let tag = format!("sigterm-both-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    // Two configs of slow cells (about 2 s each).
    let plan_text = format!("{TINY_PLAN}matrix = {{ k = [\"a\", \"b\"] }}\n")
        .replace("--itl-ms 2", "--itl-ms 120")
        .replace("concurrency = [1]", "concurrency = [1, 2]")
        .replace("max_tokens = 8", "max_tokens = 16");
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, plan_text).unwrap();
    let out_dir = dir.join("run");
    let child = headless_run(&tag, &plan, &out_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(60), "a cell in flight", || {
        events(&out_dir)
            .iter()
            .any(|e| e["event"] == "cell_started")
    });
    let server = std::fs::read_to_string(out_dir.join("server.pid")).unwrap();
    let server: i32 = server.split_whitespace().next().unwrap().parse().unwrap();
    // The server hears it first (as when the scheduler signals the step's
    // processes one by one), the sweep a moment later, while the server's
    // death is still being looked into.
    // SAFETY: plain kill(2) of our own child and of its server's group.
    unsafe { libc::kill(-server, libc::SIGTERM) };
    std::thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = wait_output(child, Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let failed: Vec<_> = results(&out_dir)
        .into_iter()
        .filter(|r| r["status"] == "failed")
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
