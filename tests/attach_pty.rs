//! Surviving SSH with the dashboard: a detached demo, attached from a
//! pseudo-terminal, paused, left with `d`, attached again, resumed, and stopped
//! from the quit question; the sweep ends cleanly and no server remains.

use crate::common;
use crate::pty;

use std::process::Command;
use std::time::Duration;

use common::*;
use pty::Pty;

fn attach(tag: &str, dir: &std::path::Path) -> Pty {
    let mut c = Command::new(bin());
    c.current_dir(dir)
        .args(["attach", "runs/d"])
        .env("SWEEPTOP_TEST_TAG", tag)
        .env("TERM", "xterm-256color")
        .env("LANG", "C.UTF-8")
        .env_remove("LC_ALL")
        .env_remove("LC_CTYPE")
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"));
    Pty::spawn(c, 120, 40)
}

#[test]
fn attach_pause_detach_reattach_resume_and_stop() {
    let dir = scratch("attach-pty");
    let tag = format!("attach-pty-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let mut cmd = sweeptop(&tag);
    cmd.current_dir(&dir)
        .args(["demo", "--detach", "--out", "runs/d"]);
    let out = run_with_deadline(cmd, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = dir.join("runs/d");

    let mut term = attach(&tag, &dir);
    term.wait_for("tp1-ddtree-b8", Duration::from_secs(30));
    term.wait_for(" RUNNING", Duration::from_secs(30));
    // The view says it watches a sweep running elsewhere, and how to leave.
    term.wait_for("ATTACHED", Duration::from_secs(10));
    term.wait_for(" detach ", Duration::from_secs(10));
    term.send("p");
    term.wait_until(Duration::from_secs(60), "the paused state", |s| {
        s.contains(" PAUSED") && s.contains("by you")
    });
    wait_until(Duration::from_secs(10), "the pause in events.jsonl", || {
        events(&run)
            .iter()
            .any(|e| e["event"] == "action" && e["action"] == "toggle_pause")
    });
    // Leave the view: the sweep keeps running (paused).
    term.send("d");
    assert!(term.wait_exit(Duration::from_secs(20)).success());
    let left = term.screen();
    assert!(
        left.contains(
            "detached: the sweep is still running; reattach with `sweeptop attach runs/d`"
        ),
        "{left}"
    );
    assert!(
        !tagged_processes(&tag).is_empty(),
        "detaching must not stop the sweep"
    );

    let mut term = attach(&tag, &dir);
    // A later view knows who paused: a viewer that is not this one.
    term.wait_until(Duration::from_secs(30), "the paused sweep", |s| {
        s.contains(" PAUSED") && s.contains("by another viewer")
    });
    let held = results(&run).len();
    term.send("p");
    term.wait_until(Duration::from_secs(60), "running again", |s| {
        s.contains(" RUNNING")
    });
    wait_until(Duration::from_secs(60), "progress after resume", || {
        results(&run).len() > held
    });
    term.send("q");
    term.wait_for("Stop the sweep, or only detach?", Duration::from_secs(10));
    term.send("y");
    term.wait_exit(Duration::from_secs(60));
    wait_until(Duration::from_secs(60), "the sweep to end", || {
        events(&run)
            .iter()
            .any(|e| e["event"] == "sweep_interrupted")
    });
    wait_until(Duration::from_secs(30), "no process left", || {
        tagged_processes(&tag).is_empty()
    });
    // Every recorded cell is intact and unique.
    let recorded = results(&run);
    let cells = by_cell(&recorded);
    assert_eq!(cells.len(), recorded.len());
    let _ = std::fs::remove_dir_all(&dir);
}
