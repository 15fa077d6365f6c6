//! Surviving SSH: a detached sweep is listed, steered and stopped from other
//! terminals through its control socket.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;

fn sweeptop_in(dir: &Path, tag: &str, args: &[&str]) -> std::process::Output {
    let mut cmd = sweeptop(tag);
    cmd.current_dir(dir).args(args);
    run_with_deadline(cmd, Duration::from_secs(60))
}

#[test]
fn detached_demo_is_listed_paused_resumed_and_stopped_from_elsewhere() {
    let dir = scratch("attach");
    let tag = format!("attach-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let out = sweeptop_in(&dir, &tag, &["demo", "--detach", "--out", "runs/d"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("sweeptop attach runs/d"), "{text}");
    let run = dir.join("runs/d");
    // The socket is private to its owner.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(run.join("control.sock"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);

    let ls = sweeptop_in(&dir, &tag, &["ls", "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&ls.stdout).unwrap();
    assert_eq!(runs[0]["state"], "running", "{runs}");
    assert_eq!(runs[0]["total"], 56);

    wait_until(Duration::from_secs(60), "a first result", || {
        !results(&run).is_empty()
    });
    assert!(sweeptop_in(&dir, &tag, &["attach", "--send", "pause"])
        .status
        .success());
    wait_until(Duration::from_secs(60), "the pause to take effect", || {
        events(&run).iter().any(|e| e["event"] == "paused")
    });
    let action = events(&run)
        .into_iter()
        .find(|e| e["event"] == "action")
        .unwrap();
    assert_eq!(action["action"], "pause");
    assert_eq!(action["source"], "script");
    // Paused after the running cell: once it is recorded, no new cell starts.
    let idle = || {
        let ev = events(&run);
        let started = ev.iter().filter(|e| e["event"] == "cell_started").count();
        let finished = ev.iter().filter(|e| e["event"] == "cell_finished").count();
        started == finished
    };
    wait_until(Duration::from_secs(60), "the running cell to end", idle);
    let held = results(&run).len();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(results(&run).len(), held, "a cell finished while paused");
    assert!(idle(), "a cell started while paused");
    // While paused: skip the rest of the current config and exclude the next one.
    // Both take effect even though no cell is running.
    let send = |what: &str| {
        assert!(sweeptop_in(&dir, &tag, &["attach", "--send", what])
            .status
            .success())
    };
    send("skip-config");
    send("exclude=tp1-dflash");
    assert!(
        sweeptop_in(&dir, &tag, &["attach", "runs/d", "--send", "resume"])
            .status
            .success()
    );
    wait_until(Duration::from_secs(60), "a cell of tp1-ddtree-b4", || {
        results(&run).iter().any(|r| r["config"] == "tp1-ddtree-b4")
    });
    let recorded = results(&run);
    let of = |config: &str| -> Vec<&serde_json::Value> {
        recorded.iter().filter(|r| r["config"] == config).collect()
    };
    assert_eq!(of("tp1-baseline").len(), 7, "every baseline cell recorded");
    assert!(of("tp1-baseline")
        .iter()
        .skip(held)
        .all(|r| r["status"] == "skipped"));
    assert_eq!(of("tp1-dflash").len(), 7);
    assert!(
        of("tp1-dflash").iter().all(|r| r["status"] == "skipped"),
        "an excluded config's cells are recorded skipped"
    );
    assert!(sweeptop_in(&dir, &tag, &["attach", "--send", "quit"])
        .status
        .success());
    wait_until(Duration::from_secs(60), "the sweep to stop", || {
        events(&run)
            .iter()
            .any(|e| e["event"] == "sweep_interrupted")
    });
    wait_until(Duration::from_secs(30), "every process to end", || {
        tagged_processes(&tag).is_empty()
    });
    let ls = sweeptop_in(&dir, &tag, &["ls", "--json"]);
    let runs: serde_json::Value = serde_json::from_slice(&ls.stdout).unwrap();
    assert_eq!(runs[0]["state"], "interrupted", "{runs}");
    assert_eq!(runs[0]["command"], "sweeptop run --resume runs/d");
    assert!(!run.join("control.sock").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
