//! The dashboard end to end: the real binary runs the demo on a pseudo-terminal;
//! the test reads the screen like a person, presses keys, and checks the run
//! directory and the processes afterwards.

use crate::common;
use crate::pty;

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use common::*;
use pty::Pty;

fn dashboard(tag: &str, home: &std::path::Path, args: &[&str]) -> Command {
    let mut c = Command::new(bin());
    c.args(args)
        .env("SWEEPTOP_TEST_TAG", tag)
        .env("TERM", "xterm-256color")
        .env("LANG", "C.UTF-8")
        .env_remove("LC_ALL")
        .env_remove("LC_CTYPE")
        .env_remove("NO_COLOR")
        // No user keymap or theme from the machine running the test.
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join(".config"));
    c
}

#[test]
fn demo_on_a_terminal_shows_the_crash_and_obeys_pause_skip_export_quit() {
    let dir = scratch("tui-pty");
    let run = dir.join("run");
    let tag = format!("tui-pty-{}", std::process::id());
    let cmd = dashboard(&tag, &dir, &["demo", "--out", run.to_str().unwrap()]);
    let mut term = Pty::spawn(cmd, 120, 40);

    // The crash is flagged on screen as it happens.
    term.wait_for("ILL-INSTR", Duration::from_secs(240));
    term.wait_for(
        "CUDA illegal instruction — 7 cells failed",
        Duration::from_secs(30),
    );

    term.send("p");
    term.wait_until(Duration::from_secs(60), "the paused state", |s| {
        s.contains(" PAUSED ") || s.contains(" PAUSING ")
    });
    // A skip cannot be undone: it asks first, naming the config.
    term.send("s");
    term.wait_for("Skip the rest of", Duration::from_secs(20));
    term.send("y");
    wait_until(Duration::from_secs(20), "the skip in events.jsonl", || {
        events(&run)
            .iter()
            .any(|e| e["event"] == "action" && e["action"] == "skip_config")
    });
    term.send("e");
    term.wait_for("exported", Duration::from_secs(20));
    let screen = term.screen();
    assert!(screen.contains("results.csv"), "{screen}");
    assert!(screen.contains("results.md"), "{screen}");

    term.send("q");
    term.wait_for("Quit the sweep?", Duration::from_secs(10));
    term.send("y");
    let status = term.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(130), "an interrupted sweep exits 130");

    // The terminal was given back: alternate screen left, cursor shown.
    let bytes = term.out.lock().unwrap().bytes.clone();
    let tail = String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(4096)..]).to_string();
    assert!(tail.contains("\x1b[?1049l"), "alternate screen not left");
    assert!(tail.contains("\x1b[?25h"), "cursor not shown again");
    assert!(tail.contains("sweep interrupted"), "{tail:?}");

    // Every key was recorded as an action, in order, from the keyboard.
    let evs = events(&run);
    let actions: Vec<&str> = evs
        .iter()
        .filter(|e| e["event"] == "action")
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["toggle_pause", "skip_config", "quit"], "{evs:?}");
    assert!(evs
        .iter()
        .filter(|e| e["event"] == "action")
        .all(|e| e["source"] == "key"));
    assert!(evs.iter().any(|e| e["event"] == "paused"));
    assert_eq!(
        evs.last().map(|e| e["event"].clone()),
        Some("sweep_interrupted".into())
    );

    // Every recorded cell is whole; the export holds what was recorded then.
    let results = results(&run);
    assert!(!results.is_empty());
    let mut status_of: HashMap<String, String> = HashMap::new();
    for r in &results {
        assert_result_line(r);
        if r["status"] == "ok" {
            assert!(r["metrics"]["output_tok_s"].as_f64().unwrap() > 0.0, "{r}");
        }
        status_of.insert(
            r["cell"].as_str().unwrap().into(),
            r["status"].as_str().unwrap().into(),
        );
    }
    let crashed: Vec<_> = results
        .iter()
        .filter(|r| r["config"] == "tp1-ddtree-b8")
        .collect();
    assert_eq!(crashed.len(), 7);
    assert!(crashed
        .iter()
        .all(|r| r["failure"]["kind"] == "cuda_illegal_instruction"));
    let csv = std::fs::read_to_string(run.join("results.csv")).unwrap();
    let md = std::fs::read_to_string(run.join("results.md")).unwrap();
    assert!(md.contains("tp1-ddtree-b8"), "{md}");
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let (cell_at, status_at) = (
        header.iter().position(|h| *h == "cell").unwrap(),
        header.iter().position(|h| *h == "status").unwrap(),
    );
    assert!(csv.lines().count() > 20, "{csv}");
    for line in csv.lines().skip(1) {
        let fields: Vec<&str> = line.split(',').collect();
        let cell = fields[cell_at];
        assert_eq!(
            status_of.get(cell).map(String::as_str),
            Some(fields[status_at]),
            "{cell}"
        );
    }

    // Nothing of the sweep is left running.
    wait_until(Duration::from_secs(10), "no server left", || {
        tagged_processes(&tag).is_empty()
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn open_shows_a_recorded_run_read_only_and_a_bad_keys_file_is_refused() {
    let dir = scratch("tui-open");
    let run = dir.join("run");
    // A short recorded run: the demo stopped early by SIGTERM.
    let tag = format!("tui-open-{}", std::process::id());
    let mut cmd = sweeptop(&tag);
    cmd.args(["demo", "--headless", "--out"]).arg(&run);
    let child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(120), "a few results", || {
        results(&run).len() >= 8
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    wait_output(child, Duration::from_secs(60));

    let mut term = Pty::spawn(
        dashboard(&tag, &dir, &["open", run.to_str().unwrap()]),
        100,
        30,
    );
    term.wait_for("READ-ONLY", Duration::from_secs(20));
    term.wait_for("CTX 400", Duration::from_secs(5));
    term.send("p");
    term.wait_for("read-only", Duration::from_secs(5));
    term.send("q");
    let status = term.wait_exit(Duration::from_secs(10));
    assert!(status.success());
    // Nothing was sent to a sweep: no action recorded.
    assert!(!events(&run)
        .iter()
        .any(|e| e["event"] == "action" && e["source"] == "key"));

    // A keys file with a typo: a clear error and a non-zero exit, before drawing.
    let config = dir.join(".config/sweeptop");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("keys.toml"), "paws = \"p\"\n").unwrap();
    let mut term = Pty::spawn(
        dashboard(&tag, &dir, &["open", run.to_str().unwrap()]),
        100,
        30,
    );
    let status = term.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(2));
    let bytes = term.out.lock().unwrap().bytes.clone();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.contains("keys.toml: unknown action \"paws\""),
        "{text}"
    );
    assert!(!text.contains("\x1b[?1049h"), "drew before failing");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_stops_the_sweep_and_gives_the_terminal_back() {
    let dir = scratch("tui-term");
    let run = dir.join("run");
    let tag = format!("tui-term-{}", std::process::id());
    let mut term = Pty::spawn(
        dashboard(&tag, &dir, &["demo", "--out", run.to_str().unwrap()]),
        80,
        24,
    );
    term.wait_for(" RUNNING ", Duration::from_secs(60));
    term.wait_until(Duration::from_secs(60), "a running cell", |s| {
        s.contains(" run ")
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(term.child.id() as i32, libc::SIGTERM) };
    let status = term.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(130));
    let bytes = term.out.lock().unwrap().bytes.clone();
    let tail = String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(2048)..]).to_string();
    assert!(tail.contains("\x1b[?1049l"), "alternate screen not left");
    let evs = events(&run);
    assert!(evs
        .iter()
        .any(|e| e["event"] == "action" && e["source"] == "signal SIGTERM"));
    wait_until(Duration::from_secs(10), "no server left", || {
        tagged_processes(&tag).is_empty()
    });
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn after_a_hangup_the_sweep_carries_on_without_a_view() {
    let dir = scratch("tui-hup");
    let run = dir.join("run");
    let tag = format!("tui-hup-{}", std::process::id());
    let mut term = Pty::spawn(
        dashboard(&tag, &dir, &["demo", "--out", run.to_str().unwrap()]),
        120,
        40,
    );
    term.wait_for(" RUNNING ", Duration::from_secs(60));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(term.child.id() as i32, libc::SIGHUP) };
    wait_until(Duration::from_secs(10), "progress.log", || {
        run.join("progress.log").exists()
    });
    std::thread::sleep(Duration::from_millis(500));
    let drawn = term.out.lock().unwrap().bytes.len();
    let status = term.wait_exit(Duration::from_secs(300));
    assert_eq!(status.code(), Some(0), "the sweep finished");
    // Nothing more was drawn after the hangup.
    assert_eq!(term.out.lock().unwrap().bytes.len(), drawn);
    let progress = std::fs::read_to_string(run.join("progress.log")).unwrap();
    assert!(progress.contains("sweep finished"), "{progress}");
    let cells = by_cell(&results(&run));
    assert_eq!(cells.len(), 56);
    assert!(cells.values().all(|v| v.len() == 1));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The view's threads of a process still running, by name.
fn thread_names(pid: u32) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| {
            tasks
                .flatten()
                .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
                .map(|c| c.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_closed_terminal_stops_the_view_and_the_sweep_goes_on() {
    // An SSH link that drops closes the terminal (not only SIGHUP): the key
    // reader must end rather than spin on the dead terminal for the rest of
    // the sweep; the view goes on writing progress.log.
    let dir = scratch("tui-closed");
    let run = dir.join("run");
    let tag = format!("tui-closed-{}", std::process::id());
    let mut term = Pty::spawn(
        dashboard(&tag, &dir, &["demo", "--out", run.to_str().unwrap()]),
        120,
        40,
    );
    term.wait_for(" RUNNING ", Duration::from_secs(60));
    // The key reader's name, as the kernel cuts it to 15 bytes.
    let keys = "sweeptop-tui-ke";
    let pid = term.child.id();
    assert!(thread_names(pid).iter().any(|t| t == keys));
    term.hang_up();
    wait_until(Duration::from_secs(10), "the key reader to end", || {
        !thread_names(pid).iter().any(|t| t == keys)
    });
    let status = term.wait_exit(Duration::from_secs(300));
    assert_eq!(status.code(), Some(0), "the sweep finished");
    let progress = std::fs::read_to_string(run.join("progress.log")).unwrap();
    assert!(progress.contains("sweep finished"), "{progress}");
    assert_eq!(by_cell(&results(&run)).len(), 56);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_terminal_closed_after_the_sweep_finished_lets_the_process_end() {
    // A finished sweep's dashboard waits for the user; when the terminal goes
    // instead, the process ends (it used to wait forever, its key reader
    // spinning on the dead terminal).
    let dir = scratch("tui-closed-end");
    let run = dir.join("run");
    let plan = dir.join("tiny.toml");
    std::fs::write(&plan, TINY_PLAN).unwrap();
    let tag = format!("tui-closed-end-{}", std::process::id());
    let mut term = Pty::spawn(
        dashboard(
            &tag,
            &dir,
            &[
                "run",
                plan.to_str().unwrap(),
                "--out",
                run.to_str().unwrap(),
            ],
        ),
        120,
        40,
    );
    term.wait_for(" FINISHED ", Duration::from_secs(60));
    term.hang_up();
    let status = term.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_closes_the_dashboard_of_a_finished_sweep() {
    let dir = scratch("tui-term-end");
    let run = dir.join("run");
    let plan = dir.join("tiny.toml");
    std::fs::write(&plan, TINY_PLAN).unwrap();
    let tag = format!("tui-term-end-{}", std::process::id());
    let mut term = Pty::spawn(
        dashboard(
            &tag,
            &dir,
            &[
                "run",
                plan.to_str().unwrap(),
                "--out",
                run.to_str().unwrap(),
            ],
        ),
        120,
        40,
    );
    term.wait_for(" FINISHED ", Duration::from_secs(60));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(term.child.id() as i32, libc::SIGTERM) };
    let status = term.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "the sweep had finished");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn after_the_end_shift_r_in_open_asks_then_runs_the_retry_in_place() {
    let dir = scratch("tui-pty-retry");
    let tag = format!("tui-pty-retry-{}", std::process::id());
    let (run, _) = run_plan(
        &dir,
        &tag,
        &tiny_plan_with_crash(&["ok"]),
        Duration::from_secs(120),
    );
    let before = results(&run).len();
    let failed: Vec<String> = results(&run)
        .iter()
        .filter(|r| r["status"] == "failed")
        .map(|r| r["cell"].as_str().unwrap().to_string())
        .collect();
    assert!(!failed.is_empty());
    let cmd = dashboard(&tag, &dir, &["open", run.to_str().unwrap()]);
    let mut term = Pty::spawn(cmd, 120, 40);
    term.wait_for("FINISHED", Duration::from_secs(30));
    term.send("R");
    term.wait_for(
        "Retry all 1 failed cell on a fresh server?",
        Duration::from_secs(20),
    );
    term.send("y");
    // The retry's own dashboard takes the terminal, runs, and says so.
    wait_until(Duration::from_secs(120), "the retry's records", || {
        results(&run).len() == before + failed.len()
    });
    wait_until(
        Duration::from_secs(60),
        "the retry recorded as asked",
        || {
            events(&run).iter().any(|e| {
                e["event"] == "action"
                    && e["action"] == "retry"
                    && e["source"] == "command line (--retry failed)"
            })
        },
    );
    term.wait_for("FINISHED", Duration::from_secs(60));
    term.send("q");
    let status = term.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
    let again: Vec<String> = results(&run)[before..]
        .iter()
        .map(|r| r["cell"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(again, failed);
    wait_until(Duration::from_secs(30), "no process left", || {
        tagged_processes(&tag).is_empty()
    });
    let _ = std::fs::remove_dir_all(&dir);
}
