//! A file on a run directory's shared path that never ends (a FIFO put
//! where `commands.jsonl` belongs) is refused with a notice: the sweep
//! records every cell, exits when it is done, exits on SIGTERM, and a
//! resume of it is not held up either.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

/// Once the sweep made its run directory, a FIFO as its commands file.
fn fifo_once_the_run_starts(run: &Path) {
    wait_until(Duration::from_secs(60), "the run directory", || {
        run.join("plan.toml").exists()
    });
    mkfifo(&run.join("commands.jsonl"));
}

fn said(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_fifo_as_the_commands_file_is_a_notice_and_the_sweep_finishes() {
    let dir = scratch("fifo-finish");
    let tag = format!("fifo-finish-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, two_config_plan("fifo", 15, &[64, 128, 256], 4, 12)).unwrap();
    let run = dir.join("run");
    let child = headless_run(&tag, &plan, &run)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    fifo_once_the_run_starts(&run);
    let out = wait_output(child, Duration::from_secs(120));
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    let by = by_cell(&results(&run));
    assert_eq!(by.len(), 6, "every cell recorded: {text}");
    assert!(by.values().all(|r| r.last().unwrap()["status"] == "ok"));
    let notices: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("commands.jsonl") && l.contains("FIFO"))
        .collect();
    // Said once; on a busy machine a read may also outlast its deadline
    // once (stuck, then refused again): a few lines, never one per poll.
    assert!(
        (1..=3).contains(&notices.len()),
        "one notice, not one per poll: {text}"
    );

    // A resume finds the FIFO still there, and is not held up by it.
    let mut resume = sweeptop(&tag);
    resume
        .arg("run")
        .arg("--resume")
        .arg(&run)
        .args(["--headless", "--no-gpu"]);
    let out = run_with_deadline(resume, Duration::from_secs(120));
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(by_cell(&results(&run)).len(), 6);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_sweep_with_a_fifo_as_its_commands_file_exits_on_sigterm() {
    let dir = scratch("fifo-term");
    let tag = format!("fifo-term-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let plan = dir.join("plan.toml");
    std::fs::write(
        &plan,
        two_config_plan("fifo-term", 15, &[64, 128, 256, 512, 1024], 8, 12),
    )
    .unwrap();
    let run = dir.join("run");
    let child = headless_run(&tag, &plan, &run)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    fifo_once_the_run_starts(&run);
    wait_until(Duration::from_secs(60), "a first result", || {
        !results(&run).is_empty()
    });
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = wait_output(child, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(130), "{}", said(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run directory whose results file stops answering (the first result's
/// write hangs, as on a dead mount): the sweep goes on measuring and says
/// so, a SIGTERM still ends it promptly saying what was not written, and a
/// resume records every cell exactly once.
#[test]
fn a_results_write_that_hangs_holds_no_cell_and_a_signal_still_ends_the_sweep() {
    use std::io::BufRead;
    let dir = scratch("stalled-results");
    let tag = format!("stalled-results-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, two_config_plan("stall", 15, &[64, 128, 256], 4, 12)).unwrap();
    let run = dir.join("run");
    let mut child = headless_run(&tag, &plan, &run)
        // Ten minutes: longer than this test may take.
        .env("SWEEPTOP_STALL_AT", "results.write:1:600000")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Every cell is measured and told while the first result's write hangs,
    // and the hang is said.
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut seen = Vec::new();
    let cell_lines = |seen: &[String]| {
        seen.iter()
            .filter(|l| l.contains("/w-ctx") && l.contains("  ok  "))
            .count()
    };
    let said_hang = |seen: &[String]| {
        seen.iter()
            .any(|l| l.contains("results.jsonl") && l.contains("has not returned"))
    };
    while cell_lines(&seen) < 6 || !said_hang(&seen) {
        match lines.recv_timeout(Duration::from_secs(120)) {
            Ok(line) => seen.push(line),
            Err(e) => panic!("{e}: {}", seen.join("\n")),
        }
    }
    assert!(
        results(&run).is_empty(),
        "nothing is written while the write hangs"
    );
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = wait_output(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("did not answer") && stderr.contains("6 result(s) not written"),
        "{stderr}"
    );
    // The results never written run again on resume, each once.
    let mut resume = sweeptop(&tag);
    resume
        .args(["run", "--headless", "--no-gpu", "--resume"])
        .arg(&run);
    let out = run_with_deadline(resume, Duration::from_secs(120));
    assert!(out.status.success(), "{}", said(&out));
    let by = by_cell(&results(&run));
    assert_eq!(by.len(), 6);
    assert!(by.values().all(|r| r.len() == 1 && r[0]["status"] == "ok"));
    let _ = std::fs::remove_dir_all(&dir);
}
