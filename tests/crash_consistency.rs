//! Crash consistency: a sweep killed with SIGKILL at many points (the worst
//! moments of writing `run.json`, `results.jsonl` and `events.jsonl`, between
//! a server's start and its recording, and at random times), then resumed,
//! ends with every cell of the plan recorded exactly once, `run.json` saying
//! finished, and no server left running.
//!
//! The named points are reached through `SWEEPTOP_CRASH_AT=POINT:N` (the
//! binary kills itself the N-th time it gets there); the random ones are a
//! plain `kill -9` after a delay drawn from a fixed seed.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;

/// Two configs of two short cells each: about a second from start to end.
const PLAN: &str = r#"
name = "cc"
[server]
command = "{sweeptop} sim-server --port {port} --startup-ms 20 --ttft-ms 5 --itl-ms 2"
port = "auto"
stop_grace_s = 1
[limits]
context = 4096
[[workloads]]
id = "w"
contexts = [64, 128]
concurrency = [1]
requests = 2
max_tokens = 8
[[phases]]
id = "p"
[phases.matrix]
tp = [1, 2]
"#;

const CELLS: [&str; 4] = [
    "tp1/w-ctx64-c1",
    "tp1/w-ctx128-c1",
    "tp2/w-ctx64-c1",
    "tp2/w-ctx128-c1",
];

/// Where a run is killed, then where its first resume is killed (if at all).
const NAMED: &[(&str, Option<&str>)] = &[
    ("created.plan_unrenamed", None),
    ("created.plan", None),
    ("meta.renaming:1", None),
    ("meta.renaming:2", None),
    ("events.torn:1", None),
    ("events.torn:4", None),
    ("events.torn:9", None),
    ("events.torn:14", None),
    ("results.torn:1", None),
    ("results.torn:2", None),
    ("results.torn:4", None),
    ("results.unsynced:1", None),
    ("results.unsynced:3", None),
    ("results.synced:2", None),
    ("results.synced:4", None),
    ("server.unrecorded:1", None),
    ("server.unrecorded:2", None),
    // Killed again while resuming.
    ("results.torn:2", Some("server.unrecorded:1")),
    ("server.unrecorded:2", Some("meta.renaming:1")),
    ("results.synced:1", Some("results.torn:2")),
];

/// Random kills: this many trials, each killed after 0–1.2 s, its resume
/// killed too in every other trial.
const RANDOM_TRIALS: u64 = 16;

enum Kill {
    At(&'static str),
    After(Duration),
}

/// Start the sweep (new, or resumed) and kill it as told. Returns whether it
/// was killed (a late random kill may find it finished).
fn killed_run(plan: &Path, run: &Path, tag: &str, resume: bool, kill: Kill) -> bool {
    let mut cmd = sweeptop(tag);
    cmd.arg("run");
    if resume {
        cmd.arg("--resume").arg(run);
    } else {
        cmd.arg(plan).arg("--out").arg(run);
    }
    cmd.args(["--headless", "--no-gpu"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Kill::At(point) = kill {
        cmd.env("SWEEPTOP_CRASH_AT", point);
    }
    let mut child = cmd.spawn().unwrap();
    if let Kill::After(delay) = kill {
        std::thread::sleep(delay);
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(libc::SIGKILL)
}

/// Resume until the sweep says it finished; then check the directory. A
/// sweep killed before its plan was recorded ran nothing: resuming it says
/// so, and it is started again in the same directory.
fn finish_and_check(plan: &Path, run: &Path, tag: &str, what: &str) {
    let mut cmd = sweeptop(tag);
    cmd.args(["run", "--headless", "--no-gpu"]);
    if run.join("plan.toml").exists() {
        cmd.arg("--resume").arg(run);
    } else if !run.exists() {
        // Killed before it made its directory.
        cmd.arg(plan).arg("--out").arg(run);
    } else {
        let mut resume = sweeptop(tag);
        resume
            .args(["run", "--headless", "--no-gpu", "--resume"])
            .arg(run);
        let out = run_with_deadline(resume, Duration::from_secs(120));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("holds no run") && stderr.contains("--out"),
            "{what}: {stderr}"
        );
        cmd.arg(plan).arg("--out").arg(run);
    }
    let out = run_with_deadline(cmd, Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A run killed after it recorded its end has nothing left: it says so.
    assert!(
        stdout.contains("sweep finished") || stdout.contains("nothing left to run"),
        "{what}: {stdout}"
    );
    // Every line is whole, and every cell is there exactly once.
    let text = std::fs::read_to_string(run.join("results.jsonl")).unwrap();
    let mut seen: Vec<String> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value =
                serde_json::from_str(l).unwrap_or_else(|e| panic!("{what}: torn line {l:?}: {e}"));
            v["cell"].as_str().unwrap().to_string()
        })
        .collect();
    seen.sort();
    let mut want: Vec<String> = CELLS.iter().map(|c| c.to_string()).collect();
    want.sort();
    assert_eq!(seen, want, "{what}: cells recorded");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["state"], "finished", "{what}");
    assert!(!run.join("server.pid").exists(), "{what}");
    assert!(
        tagged_processes(tag).is_empty(),
        "{what}: a server or a sweep was left running"
    );
}

/// xorshift: the random kill times, the same on every run of the test.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn killed_anywhere_then_resumed_every_cell_is_recorded_exactly_once() {
    let dir = scratch("crash");
    let plan = dir.join("cc.toml");
    std::fs::write(&plan, PLAN).unwrap();
    let mut trials: Vec<(String, Kill, Option<Kill>)> = NAMED
        .iter()
        .map(|(first, then)| {
            (
                format!("{first} then {then:?}"),
                Kill::At(first),
                then.map(Kill::At),
            )
        })
        .collect();
    let mut seed = 0x5eed_cafe_u64;
    for i in 0..RANDOM_TRIALS {
        let first = Duration::from_millis(next(&mut seed) % 1200);
        let then = (i % 2 == 1).then(|| Duration::from_millis(next(&mut seed) % 1200));
        trials.push((
            format!("kill -9 after {first:?}, then {then:?}"),
            Kill::After(first),
            then.map(Kill::After),
        ));
    }
    let total = trials.len();
    // Two at a time: the machine's cores, and half the wall time.
    let (left, right) = trials.split_at(total / 2);
    let mut killed = 0;
    std::thread::scope(|s| {
        let plan = &plan;
        let dir = &dir;
        let handles: Vec<_> = [left, right]
            .into_iter()
            .enumerate()
            .map(|(lane, trials)| {
                s.spawn(move || {
                    let mut killed = 0;
                    for (i, (what, first, then)) in trials.iter().enumerate() {
                        let name = format!("t{lane}-{i}");
                        let run = dir.join(&name);
                        let tag = format!("crash-{name}-{}", std::process::id());
                        let _cleanup = KillTagged(tag.clone());
                        let copy = |k: &Kill| match k {
                            Kill::At(p) => Kill::At(p),
                            Kill::After(d) => Kill::After(*d),
                        };
                        let mut attempt = |resume: bool, kill: &Kill| {
                            let was = killed_run(plan, &run, &tag, resume, copy(kill));
                            // A named point never reached would test nothing.
                            if let Kill::At(point) = kill {
                                assert!(was, "{what}: {point} was never reached");
                            }
                            killed += usize::from(was);
                        };
                        attempt(false, first);
                        if let Some(then) = then {
                            attempt(true, then);
                        }
                        finish_and_check(plan, &run, &tag, what);
                    }
                    killed
                })
            })
            .collect();
        for h in handles {
            killed += h.join().unwrap();
        }
    });
    println!("{total} trials, {killed} processes killed at a crash point or at random");
    let _ = std::fs::remove_dir_all(&dir);
}
