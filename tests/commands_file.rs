//! Steering through the filesystem: a sweep whose control socket cannot be
//! reached (as from another machine) is paused and stopped through its
//! `commands.jsonl`, and a resumed sweep does not replay old commands.

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::*;

#[test]
fn a_sweep_is_paused_and_stopped_through_its_commands_file() {
    let dir = scratch("cmdfile");
    let tag = format!("cmdfile-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        two_config_plan("cmdfile", 15, &[64, 128, 256], 4, 12),
    )
    .unwrap();
    let run = dir.join("run");
    let mut cmd = headless_run(&tag, &plan, &run);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    wait_until(Duration::from_secs(60), "a first result", || {
        !results(&run).is_empty()
    });
    // The socket is out of reach (as it is from another machine); the run is
    // alive by its lock and heartbeat.
    std::fs::remove_file(run.join("control.sock")).unwrap();
    let send = |what: &str| {
        let mut c = sweeptop(&tag);
        c.arg("attach").arg(&run).args(["--send", what]);
        let out = run_with_deadline(c, Duration::from_secs(30));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success() && text.contains("sent through"),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    send("pause");
    wait_until(Duration::from_secs(30), "the pause to take effect", || {
        events(&run).iter().any(|e| e["event"] == "paused")
    });
    let action = events(&run)
        .into_iter()
        .find(|e| e["event"] == "action")
        .unwrap();
    assert_eq!(action["action"], "pause");
    let source = action["source"].as_str().unwrap();
    assert!(source.starts_with("file (from script@"), "{source}");
    send("quit");
    let out = wait_output(child, Duration::from_secs(60));
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let ev = events(&run);
    assert!(ev.iter().any(|e| e["event"] == "action"
        && e["action"] == "quit"
        && e["source"].as_str().unwrap().starts_with("file (from ")));
    let recorded = results(&run).len();
    assert!(recorded < 6, "the sweep stopped early: {recorded} of 6");

    // The quit is still in the file: a resumed sweep must not obey it again.
    let mut resume = sweeptop(&tag);
    resume
        .arg("run")
        .arg("--resume")
        .arg(&run)
        .args(["--headless", "--no-gpu"]);
    let out = run_with_deadline(resume, Duration::from_secs(120));
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let by = by_cell(&results(&run));
    assert_eq!(by.len(), 6, "every cell recorded after the resume");
    assert!(by.values().all(|r| r.last().unwrap()["status"] == "ok"));
    let _ = std::fs::remove_dir_all(&dir);
}
