//! What an adversarial user broke, end to end through the binary: run
//! directories without `run.json`, a second sweep on a live directory whose
//! socket was removed, `--out` on a directory that is not ours, signals that
//! used to kill sweeptop and leave its server running, numbers out of range,
//! and `--send` targets the plan does not have.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use common::*;

/// Two configs of three cells of about a second each: long enough to act on
/// while it runs.
const SLOW: &str = r#"
name = "slow"
[server]
command = "{sweeptop} sim-server --port {port} --startup-ms 50 --ttft-ms 5 --itl-ms 4"
port = "auto"
stop_grace_s = 1
[limits]
context = 4096
[[workloads]]
id = "w"
contexts = [64, 128, 256]
concurrency = [1]
requests = 4
max_tokens = 64
[[phases]]
id = "p"
[phases.matrix]
tp = [1, 2]
"#;

fn meta(run: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap()
}

fn resume(tag: &str, run: &Path) -> std::process::Output {
    let mut cmd = sweeptop(tag);
    cmd.args(["run", "--headless", "--no-gpu", "--resume"])
        .arg(run);
    run_with_deadline(cmd, Duration::from_secs(120))
}

fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

#[test]
fn a_run_without_a_readable_run_json_resumes_to_the_end_and_is_listed() {
    let dir = scratch("hard-meta");
    let tag = format!("hard-meta-{}", std::process::id());
    let (run, _) = run_plan(&dir, &tag, TINY_PLAN, Duration::from_secs(120));
    let finished = results(&run);
    assert_eq!(finished.len(), 1);
    // As a kill -9 just after the start leaves it: a temporary file, no run.json.
    std::fs::remove_file(run.join("run.json")).unwrap();
    std::fs::write(run.join(".run.json.tmp"), "{\"plan\":").unwrap();

    let ls = run_with_deadline(
        {
            let mut c = sweeptop(&tag);
            c.arg("ls").arg(&dir);
            c
        },
        Duration::from_secs(30),
    );
    assert!(text(&ls.stdout).contains("tiny"), "{}", text(&ls.stdout));
    assert!(
        text(&ls.stdout).contains("interrupted"),
        "{}",
        text(&ls.stdout)
    );

    let out = resume(&tag, &run);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("sweep finished"));
    assert!(
        text(&out.stdout).contains("rebuilt"),
        "{}",
        text(&out.stdout)
    );
    let m = meta(&run);
    assert_eq!(m["state"], "finished");
    assert_eq!(m["plan"], "tiny");
    assert!(!run.join(".run.json.tmp").exists());
    // Nothing ran twice.
    assert_eq!(results(&run), finished);

    // Resuming a finished run again changes nothing, its end included.
    let out = resume(&tag, &run);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(meta(&run), m);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_live_sweep_is_guarded_by_its_lock_not_by_its_socket() {
    let dir = scratch("hard-lock");
    let tag = format!("hard-lock-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let plan = dir.join("slow.toml");
    std::fs::write(&plan, SLOW).unwrap();
    let run = dir.join("run");
    let mut cmd = headless_run(&tag, &plan, &run);
    let first = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(60), "the first result", || {
        !results(&run).is_empty() && run.join("control.sock").exists()
    });
    // Someone tidies up the socket: the directory is still the live sweep's.
    std::fs::remove_file(run.join("control.sock")).unwrap();
    let meta_before = std::fs::read(run.join("run.json")).unwrap();
    let second = resume(&tag, &run);
    assert_eq!(second.status.code(), Some(2), "{}", text(&second.stderr));
    assert!(
        text(&second.stderr).contains("already running"),
        "{}",
        text(&second.stderr)
    );
    assert_eq!(std::fs::read(run.join("run.json")).unwrap(), meta_before);
    // A new run over it is refused too.
    let again = run_with_deadline(headless_run(&tag, &plan, &run), Duration::from_secs(30));
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));

    // The first sweep finishes on its own, every cell recorded once.
    let out = wait_output(first, Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let cells = by_cell(&results(&run));
    assert_eq!(cells.len(), 6);
    assert!(cells.values().all(|v| v.len() == 1), "{cells:?}");
    assert_eq!(meta(&run)["state"], "finished");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn out_refuses_a_foreign_directory_and_keeps_the_permissions_of_the_users() {
    let dir = scratch("hard-out");
    let tag = format!("hard-out-{}", std::process::id());
    let plan = dir.join("tiny.toml");
    std::fs::write(&plan, TINY_PLAN).unwrap();
    let shared = dir.join("shared-tmp");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(shared.join("someone-elses.txt"), "x").unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;

    let cmd = headless_run(&tag, &plan, &shared);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not empty"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(mode(&shared), 0o1777);
    assert!(!shared.join("plan.toml").exists());
    // In the background too, before anything is written into it.
    let mut cmd = sweeptop(&tag);
    cmd.arg("run")
        .arg(&plan)
        .args(["--detach", "--no-gpu", "--out"])
        .arg(&shared);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let entries: Vec<_> = std::fs::read_dir(&shared).unwrap().flatten().collect();
    assert_eq!(entries.len(), 1, "{entries:?}");

    // An empty directory of the user's is used as it is.
    let empty = dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cmd = headless_run(&tag, &plan, &empty);
    let out = run_with_deadline(cmd, Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(mode(&empty), 0o755);
    // One sweeptop makes is private.
    let made = dir.join("made");
    let cmd = headless_run(&tag, &plan, &made);
    let out = run_with_deadline(cmd, Duration::from_secs(120));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(mode(&made), 0o700);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn signals_that_would_kill_sweeptop_stop_its_server_first() {
    for (name, sig) in [("SIGQUIT", libc::SIGQUIT), ("SIGUSR1", libc::SIGUSR1)] {
        let dir = scratch(&format!("hard-sig-{name}"));
        let tag = format!("hard-sig-{name}-{}", std::process::id());
        let _cleanup = KillTagged(tag.clone());
        let plan = dir.join("slow.toml");
        std::fs::write(&plan, SLOW).unwrap();
        let run = dir.join("run");
        let mut cmd = headless_run(&tag, &plan, &run);
        let child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        // A cell is running on a live server.
        wait_until(Duration::from_secs(60), "a running cell", || {
            events(&run).iter().any(|e| e["event"] == "cell_started")
                && tagged_processes(&tag).len() >= 2
        });
        // SAFETY: signalling our own child.
        unsafe { libc::kill(pid as i32, sig) };
        let out = wait_output(child, Duration::from_secs(60));
        assert_eq!(
            out.status.code(),
            Some(130),
            "{name}: {}",
            text(&out.stderr)
        );
        assert!(
            tagged_processes(&tag).is_empty(),
            "{name}: the server outlived sweeptop"
        );
        assert_eq!(meta(&run)["state"], "interrupted", "{name}");
        assert!(
            events(&run)
                .iter()
                .any(|e| e["event"] == "action" && e["source"] == format!("signal {name}")),
            "{name}: the stop is recorded with its source"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn numbers_out_of_range_are_refused_before_anything_starts() {
    let dir = scratch("hard-numbers");
    let tag = format!("hard-numbers-{}", std::process::id());
    let cases: &[&[&str]] = &[
        &["demo", "--headless", "--gpu-interval-ms", "0"],
        &["demo", "--headless", "--gpu-interval-ms", "100"],
        &["demo", "--headless", "--gpu-interval-ms", "99999999999"],
        &["demo", "--headless", "--sim-gpus", "0"],
        &["gpus", "--gpu-interval-ms", "1"],
        &["loadtest", "http://127.0.0.1:9", "--concurrency", "0"],
        &["loadtest", "http://127.0.0.1:9", "--requests", "0"],
        &["loadtest", "http://127.0.0.1:9", "--max-tokens", "0"],
        &["loadtest", "http://127.0.0.1:9", "--prompt-tokens", "0"],
        &["loadtest", "http://127.0.0.1:9", "--rate", "1e300"],
        &["loadtest", "http://127.0.0.1:9", "--rate", "nan"],
        &["loadtest", "http://127.0.0.1:9", "--duration", "-1"],
    ];
    for args in cases {
        let mut cmd = sweeptop(&tag);
        cmd.current_dir(&dir).args(*args);
        let out = run_with_deadline(cmd, Duration::from_secs(30));
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
        assert!(!dir.join("runs").exists(), "{args:?} started a run");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn send_refuses_targets_the_plan_does_not_have() {
    let dir = scratch("hard-send");
    let tag = format!("hard-send-{}", std::process::id());
    let (run, _) = run_plan(&dir, &tag, TINY_PLAN, Duration::from_secs(120));
    let huge = format!("retry={}", "a".repeat(60_000));
    for send in [
        "retry=",
        "exclude=",
        "retry=../../etc/passwd",
        "exclude=nope",
        huge.as_str(),
    ] {
        let mut cmd = sweeptop(&tag);
        cmd.arg("attach").arg(&run).args(["--send", send]);
        let out = run_with_deadline(cmd, Duration::from_secs(30));
        let err = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}: {err}",
            &send[..send.len().min(40)]
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.len() < 400,
            "the message repeats a huge target: {}",
            err.len()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that prints hostile text (escape sequences, C1 controls, a `\r`
/// that would hide its line, backspaces, a right-to-left override and a
/// spreadsheet formula) in the line that names its crash, then dies.
const HOSTILE_SERVER: &str = r#"
name = "hostile"
[server]
shell = true
command = '''printf 'loading \033]0;pwned\007 weights\r  fake: all fine\n'; printf '=cmd|\047 /C calc\047!A0 RuntimeError: CUDA error: an illegal instruction was encountered \302\233 31m \010\010\177 \342\200\256 exe.txt\n'; exit 1'''
port = "auto"
stop_grace_s = 1
ready = { timeout_s = 20 }
[[workloads]]
id = "w"
contexts = [64]
concurrency = [1]
requests = 1
max_tokens = 8
[[phases]]
id = "p"
"#;

/// What must never reach a terminal or a spreadsheet as is.
fn dangerous(c: char) -> bool {
    c.is_control() && c != '\n' || ('\u{202A}'..='\u{202E}').contains(&c)
}

#[test]
fn server_text_reaches_no_terminal_and_no_spreadsheet_as_is() {
    let dir = scratch("hard-text");
    let tag = format!("hard-text-{}", std::process::id());
    let (run, stdout) = run_plan(&dir, &tag, HOSTILE_SERVER, Duration::from_secs(120));
    // The crash is recorded with the server's words, data unchanged.
    let records = results(&run);
    assert_eq!(records.len(), 1);
    let message = records[0]["failure"]["message"].as_str().unwrap();
    assert!(
        message.contains("illegal instruction") && message.contains("\u{9b}"),
        "{message:?}"
    );
    assert_eq!(records[0]["failure"]["kind"], "cuda_illegal_instruction");
    // The data files carry those characters only as JSON escapes.
    let raw = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    assert!(!raw.chars().any(dangerous), "{raw:?}");
    assert!(raw.contains("\\u009b") && raw.contains("\\u202e"), "{raw}");
    // Headless progress: the crash is named, nothing hostile passes.
    assert!(stdout.contains("FAILED ILL-INSTR"), "{stdout}");
    assert!(!stdout.chars().any(dangerous), "{stdout:?}");
    for (format, name) in [("csv", "csv"), ("md", "md"), ("json", "json")] {
        let mut cmd = sweeptop(&tag);
        cmd.args(["export", "--format", format]).arg(&run);
        let out = run_with_deadline(cmd, Duration::from_secs(30));
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.chars().any(dangerous), "{name}: {text:?}");
        assert!(text.contains("illegal instruction"), "{name}: {text}");
        if format == "csv" {
            let mut rows = csv_rows(&text);
            let header = rows.remove(0);
            let col = |n: &str| header.iter().position(|h| h == n).unwrap();
            let row = &rows[0];
            // No cell a spreadsheet would run.
            for cell in row {
                assert!(
                    !cell.trim_start().starts_with(['=', '+', '-', '@']),
                    "{cell:?}"
                );
            }
            assert!(row[col("failure_message")].contains("=cmd|' /C calc'!A0 RuntimeError"));
        }
        if format == "json" {
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(back[0]["failure"]["message"].as_str().unwrap(), message);
        }
    }
}

/// A CSV's rows (quoted fields may hold commas, quotes and newlines).
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    let mut rows = vec![vec![String::new()]];
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let row = rows.last_mut().unwrap();
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                row.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => row.push(String::new()),
            ('\n', false) => rows.push(vec![String::new()]),
            (c, _) => row.last_mut().unwrap().push(c),
        }
    }
    rows.retain(|r| r.len() > 1);
    rows
}
