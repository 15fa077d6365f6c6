//! What the command line says when something is wrong: a user's mistake is one
//! plain line and exit 2, an internal error names its causes without a
//! backtrace or colour codes, and output cut short by a closed pipe ends quietly.

use crate::common;
use crate::pty;

use std::io::Read;
use std::process::Stdio;
use std::time::Duration;

use common::*;

/// One line, `error: …`, no colour codes, no backtrace.
#[track_caller]
fn assert_one_plain_line(stderr: &[u8]) -> String {
    let err = String::from_utf8_lossy(stderr).into_owned();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: "), "{err}");
    assert!(!err.contains('\x1b'), "colour codes: {err:?}");
    assert!(
        !err.contains("Location") && !err.contains("backtrace"),
        "{err}"
    );
    err
}

#[test]
fn user_mistakes_are_one_line_and_exit_2() {
    let dir = scratch("cli-user");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "export".into(),
                dir.join("nope").display().to_string(),
                "--format".into(),
                "csv".into(),
            ],
            "has no results.jsonl",
        ),
        (
            vec!["open".into(), dir.join("nope").display().to_string()],
            "is not a run directory",
        ),
        (
            vec![
                "attach".into(),
                dir.display().to_string(),
                "--send".into(),
                "jump".into(),
            ],
            "unknown command `jump`",
        ),
        (
            vec![
                "attach".into(),
                dir.display().to_string(),
                "--send".into(),
                "pause".into(),
            ],
            "no sweep answers",
        ),
        (
            vec!["run".into(), dir.join("missing.toml").display().to_string()],
            "cannot read plan",
        ),
        (
            vec!["run".into(), "--resume".into(), dir.display().to_string()],
            "plan.toml",
        ),
        (
            vec!["run".into(), "--resume".into(), {
                // A run whose frozen plan was damaged.
                let run = dir.join("damaged");
                std::fs::create_dir_all(&run).unwrap();
                std::fs::write(run.join("plan.toml"), "name = \n").unwrap();
                run.display().to_string()
            }],
            "plan.toml:1:",
        ),
        (
            vec![
                "classify".into(),
                dir.join("missing.log").display().to_string(),
            ],
            "cannot read",
        ),
    ];
    for (args, says) in cases {
        let mut cmd = sweeptop("cli-user");
        cmd.args(&args).env("NO_COLOR", "");
        let out = run_with_deadline(cmd, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = assert_one_plain_line(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run directory with `n` recorded (skipped) cells.
fn run_dir_with(name: &str, n: usize) -> std::path::PathBuf {
    let dir = scratch(name);
    let mut lines = String::new();
    for i in 0..n {
        lines.push_str(&format!(
            r#"{{"cell":"c{i}/code-ctx1024-c1","config":"c{i}","phase":"p","workload":"code","context_tokens":1024,"concurrency":1,"status":"skipped","failure":null,"metrics":null,"started_at":"2026-12-03T08:00:00.000Z","finished_at":"2026-12-03T08:00:01.000Z"}}"#
        ));
        lines.push('\n');
    }
    std::fs::write(dir.join("results.jsonl"), lines).unwrap();
    dir
}

/// `export` into a directory that does not exist: an internal error.
fn export_into_nowhere(dir: &std::path::Path, backtrace: bool) -> std::process::Output {
    let mut cmd = sweeptop("cli-internal");
    if backtrace {
        cmd.env("RUST_BACKTRACE", "1").arg("-v");
    } else {
        cmd.env_remove("RUST_BACKTRACE");
    }
    cmd.arg("export")
        .arg(dir)
        .args(["--format", "csv", "-o"])
        .arg(dir.join("no/such/dir/out.csv"));
    run_with_deadline(cmd, Duration::from_secs(30))
}

#[test]
fn internal_errors_name_their_causes_without_a_backtrace() {
    let dir = run_dir_with("cli-internal", 3);
    let out = export_into_nowhere(&dir, false);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 2, "{err}");
    assert!(lines[0].starts_with("error: cannot write "), "{err}");
    assert!(lines[1].starts_with("  caused by: No such file"), "{err}");
    assert!(!err.contains('\x1b'), "{err:?}");
    // Asked for: the backtrace, still without colour codes into a pipe.
    let out = export_into_nowhere(&dir, true);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("No such file"), "{err}");
    assert!(err.lines().count() > 2, "{err}");
    assert!(!err.contains('\x1b'), "{err:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_closed_pipe_ends_quietly() {
    // Far more than a pipe holds, so the writer meets the closed end.
    let dir = run_dir_with("cli-pipe", 2000);
    let mut child = sweeptop("cli-pipe")
        .arg("export")
        .arg(&dir)
        .args(["--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The read end is dropped here, as `| head -c 10` does.
    let out = wait_output(child, Duration::from_secs(30));
    assert_eq!(&first[..1], b"[");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    // `check --json | true`: the reader is gone before a byte is written.
    let plan = dir.join("check.toml");
    std::fs::write(&plan, "name = \"p\"\n[server]\ncommand = \"x {port}\"\nport = \"auto\"\n[[workloads]]\nid = \"w\"\ncontexts = [64]\nconcurrency = [1]\n[[phases]]\nid = \"p\"\n").unwrap();
    let mut child = sweeptop("cli-pipe")
        .args(["check", "--json"])
        .arg(&plan)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = wait_output(child, Duration::from_secs(30));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert_eq!(out.status.code(), Some(0));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_command_that_does_not_reach_the_sweep_is_an_error() {
    // A socket that accepts and hangs up at once: the command was not
    // delivered, and a script must hear so (a closed pipe here is not stdout's).
    let dir = scratch("cli-send");
    let listener = std::os::unix::net::UnixListener::bind(dir.join("control.sock")).unwrap();
    let server = std::thread::spawn(move || {
        for conn in listener.incoming().take(1) {
            drop(conn);
        }
    });
    let mut cmd = sweeptop("cli-send");
    cmd.arg("attach")
        .arg(&dir)
        .args(["--send", "quit"])
        .env_remove("RUST_BACKTRACE");
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    let _ = server.join();
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("error: "), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gpus_require_gates_a_script_on_the_gpus_it_got() {
    let gpus = |require: &str| {
        let mut cmd = sweeptop("cli-gpus");
        cmd.args(["gpus", "--sim-gpus", "2", "--require", require]);
        run_with_deadline(cmd, Duration::from_secs(30))
    };
    let enough = gpus("2");
    assert_eq!(enough.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&enough.stdout).contains("GPU"));
    let short = gpus("4");
    assert_eq!(short.status.code(), Some(1));
    // The table is still printed; the reason is one line on stderr.
    assert!(String::from_utf8_lossy(&short.stdout).contains("GPU"));
    let err = String::from_utf8_lossy(&short.stderr);
    assert!(err.contains("4 GPUs required, NVML shows 2"), "{err}");
}

#[test]
fn check_shows_gpus_exclusions_missing_paths_and_no_debug_text() {
    let dir = scratch("cli-check");
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        r#"name = "c"
[server]
command = "sim {port} {budget}"
port = "auto"
requires = ["/dev/shm/sweeptop-no-such-model"]
env = { CUDA_VISIBLE_DEVICES = "{gpus}" }
[[workloads]]
id = "w"
contexts = [1024]
concurrency = [1]
[[phases]]
id = "p"
vars = { gpus = "2,3" }
matrix = { budget = [4, 8, 12] }
  # budget 12 crashes this build
  [[phases.exclude]]
  budget = 12
"#,
    )
    .unwrap();
    // The GPUs this machine has do not matter here.
    let mut cmd = sweeptop("cli-check");
    cmd.arg("check").arg(&plan).arg("--no-gpu");
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("GPUs 2,3"), "{text}");
    let excluded = text
        .lines()
        .find(|l| l.contains("excluded"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(excluded.contains("12"), "{excluded}");
    assert!(
        excluded.contains("line 16: budget 12 crashes this build"),
        "{excluded}"
    );
    assert!(
        text.contains("warning: required path /dev/shm/sweeptop-no-such-model does not exist")
            && text.contains("vanish on reboot"),
        "{text}"
    );
    assert!(text.contains("overflow clamp"), "{text}");
    // No Rust debug formatting of enums.
    for debug in ["Clamp", "Cold", "Some(", "None"] {
        assert!(!text.contains(debug), "{debug} in {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compare_puts_two_runs_side_by_side() {
    let dir = scratch("cli-compare");
    let tag = format!("cli-compare-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let a = dir.join("a");
    let b = dir.join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let (run_a, _) = run_plan(&a, &tag, TINY_PLAN, Duration::from_secs(120));
    let (run_b, _) = run_plan(&b, &tag, TINY_PLAN, Duration::from_secs(120));
    // A third run whose plan asks its workload for more tokens.
    let c = dir.join("c");
    std::fs::create_dir_all(&c).unwrap();
    let longer = TINY_PLAN.replace("max_tokens = 8", "max_tokens = 16");
    let (run_c, _) = run_plan(&c, &tag, &longer, Duration::from_secs(120));
    let cell = results(&run_a)[0]["cell"].as_str().unwrap().to_string();
    for (format, want) in [
        ("table", format!("{cell}  ")),
        ("md", format!("| {cell} |")),
        ("json", "\"rows\"".to_string()),
    ] {
        let mut cmd = sweeptop(&tag);
        cmd.arg("compare").arg(&run_a).arg(&run_b).args([
            "--format",
            format,
            "--value",
            "ttft_ms_p50",
        ]);
        let out = run_with_deadline(cmd, Duration::from_secs(30));
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(text.contains(&want), "{format}: {text}");
        assert!(format == "json" || text.contains("TTFT p50"), "{text}");
        assert!(!text.contains("plans differ"), "{text}");
    }
    // Runs of plans whose workload asked for something else: said at the
    // top with both values, no change given unless forced.
    for (force, want) in [(false, "≠ workload"), (true, "%")] {
        let mut cmd = sweeptop(&tag);
        cmd.arg("compare").arg(&run_a).arg(&run_c);
        if force {
            cmd.arg("--force");
        }
        let out = run_with_deadline(cmd, Duration::from_secs(30));
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{text}");
        assert!(text.contains("The plans differ"), "{text}");
        assert!(text.contains("workload w: max_tokens 8 in"), "{text}");
        let row = text.lines().find(|l| l.starts_with(&cell)).unwrap_or("");
        assert!(row.contains(want), "{force}: {text}");
    }
    // A metric that does not exist is one plain line, exit 2.
    let mut cmd = sweeptop(&tag);
    cmd.arg("compare")
        .arg(&run_a)
        .arg(&run_b)
        .args(["--value", "speed"]);
    let out = run_with_deadline(cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    let err = assert_one_plain_line(&out.stderr);
    assert!(err.contains("output_tok_s"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn gpus_watch_on_a_terminal_leaves_on_q() {
    let mut cmd = std::process::Command::new(bin());
    cmd.args(["gpus", "--watch", "--sim-gpus", "2"])
        .env("TERM", "xterm-256color");
    let mut term = pty::Pty::spawn(cmd, 100, 30);
    term.wait_for("GPU", Duration::from_secs(60));
    term.send("q");
    let status = term.wait_exit(Duration::from_secs(30));
    assert!(status.success(), "{status:?}");
}

#[test]
fn attach_to_a_run_that_ended_points_to_open_or_resume() {
    for (state, says) in [
        ("finished", "sweeptop open"),
        ("interrupted", "sweeptop run --resume"),
    ] {
        let dir = run_dir_with(&format!("cli-attach-{state}"), 1);
        std::fs::write(dir.join("plan.toml"), "name = \"p\"\n").unwrap();
        std::fs::write(
            dir.join("run.json"),
            format!(
                r#"{{"plan":"p","started_at":"2026-12-03T08:00:00.000Z","sweeptop_version":"0","state":"{state}","pid":1,"finished_at":"2026-12-03T08:01:00.000Z"}}"#
            ),
        )
        .unwrap();
        let mut cmd = sweeptop("cli-attach");
        cmd.arg("attach").arg(&dir).arg("--headless");
        let out = run_with_deadline(cmd, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(2));
        let err = assert_one_plain_line(&out.stderr);
        assert!(err.contains(state) || err.contains("has finished"), "{err}");
        assert!(err.contains(says), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
