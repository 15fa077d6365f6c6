//! What a sweep directory's shards are: in a Slurm sweep, a symbolic link to
//! another run, a file or a misnamed entry in `shards/` is foreign (told,
//! never read, resumed into or counted); and shards run by hand into one
//! folder read as one sweep.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(120);

fn cmd(tag: &str, bin: &Path, args: &[&str]) -> std::process::Command {
    let mut c = sweeptop(tag);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    c.env("PATH", path).args(args);
    c
}

/// stdout and stderr, and whether it exited 0.
fn out(o: &std::process::Output) -> (String, String, Option<i32>) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        o.status.code(),
    )
}

fn ok(tag: &str, bin: &Path, args: &[&str]) -> (String, String) {
    let (stdout, stderr, code) = out(&run_with_deadline(cmd(tag, bin, args), LIMIT));
    assert_eq!(code, Some(0), "{args:?}\n{stdout}\n{stderr}");
    (stdout, stderr)
}

/// The cells an `export --format json` lists.
fn exported(text: &str) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_str(text).unwrap();
    let rows = v
        .as_array()
        .or_else(|| v["results"].as_array())
        .unwrap_or_else(|| panic!("{v}"));
    let mut cells: Vec<String> = rows
        .iter()
        .map(|r| r["cell"].as_str().unwrap().to_string())
        .collect();
    cells.sort();
    cells
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// One shard's run, as a person runs it on a machine of their own.
fn run_shard(tag: &str, plan: &Path, shard: &str, out_dir: &Path) {
    let mut c = headless_run(tag, plan, out_dir);
    c.args(["--shard", shard]);
    let (stdout, stderr, code) = out(&run_with_deadline(c, LIMIT));
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
}

#[test]
fn foreign_entries_in_a_sweeps_shards_are_told_and_never_counted_or_resumed() {
    let dir = scratch("shards-foreign");
    let tag = format!("shards-foreign-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let bin = dir.join("bin");
    fake_sbatch(&bin);
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, two_config_plan("spread", 1, &[64], 1, 4)).unwrap();
    let sweep = dir.join("sweep");
    let s = sweep.to_str().unwrap();
    ok(
        &tag,
        &bin,
        &[
            "slurm",
            plan.to_str().unwrap(),
            "--nodes",
            "2",
            "--out",
            s,
            "--run-arg=--no-gpu",
        ],
    );
    // Shard 1 runs as its task would; shard 2's place is taken by a link
    // to a finished run of another plan.
    run_shard(
        &tag,
        &sweep.join("plan.toml"),
        "1/2",
        &sweep.join("shards/1"),
    );
    let other_plan = dir.join("other.toml");
    std::fs::write(&other_plan, TINY_PLAN).unwrap();
    let other = dir.join("other");
    let o = run_with_deadline(headless_run(&tag, &other_plan, &other), LIMIT);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let other_results = std::fs::read(other.join("results.jsonl")).unwrap();
    std::os::unix::fs::symlink(&other, sweep.join("shards/2")).unwrap();
    // Strays: a file, a number with a leading zero, a link to itself.
    std::fs::write(sweep.join("shards/7"), "not a shard").unwrap();
    std::fs::create_dir(sweep.join("shards/02")).unwrap();
    std::os::unix::fs::symlink("loop", sweep.join("shards/loop")).unwrap();

    let shard1: Vec<String> = results(&sweep.join("shards/1"))
        .iter()
        .map(|r| r["cell"].as_str().unwrap().to_string())
        .collect();
    assert!(!shard1.is_empty());

    // ls: the sweep is not finished, shard 2 is foreign and counts nothing.
    let (text, _) = ok(&tag, &bin, &["ls", s, "--json"]);
    let runs: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_ne!(runs[0]["state"], "finished", "{runs}");
    assert_eq!(
        runs[0]["done"].as_u64(),
        Some(shard1.len() as u64),
        "{runs}"
    );
    assert_eq!(runs[0]["shards"][1]["state"], "foreign", "{runs}");
    assert_eq!(runs[0]["shards"][1]["done"], 0, "{runs}");
    let (text, _) = ok(&tag, &bin, &["ls", s]);
    for stray in ["shards/7", "shards/02", "shards/loop"] {
        assert!(text.contains(stray), "{stray}: {text}");
    }
    assert!(
        text.contains("shard 2: not this sweep's (a symbolic link"),
        "{text}"
    );

    // export, report and compare read the sweep's own shard, and say what
    // they ignored.
    let (text, err) = ok(&tag, &bin, &["export", s, "--format", "json"]);
    assert_eq!(exported(&text), sorted(shard1.clone()), "{err}");
    for stray in ["shards/2", "shards/7", "shards/02", "shards/loop"] {
        assert!(err.contains(stray), "{stray}: {err}");
    }
    let report = dir.join("report.html");
    ok(&tag, &bin, &["report", s, "-o", report.to_str().unwrap()]);
    ok(&tag, &bin, &["compare", s, s]);

    // Resuming the link is refused (exit 2), and the other run is untouched.
    let (stdout, stderr, code) = out(&run_with_deadline(
        cmd(
            &tag,
            &bin,
            &[
                "run",
                "--resume",
                &format!("{s}/shards/2"),
                "--headless",
                "--no-gpu",
            ],
        ),
        LIMIT,
    ));
    assert_eq!(code, Some(2), "{stdout}\n{stderr}");
    assert!(stderr.contains("not a shard of the sweep"), "{stderr}");
    assert_eq!(
        std::fs::read(other.join("results.jsonl")).unwrap(),
        other_results
    );

    // slurm --resume does not submit shard 2 again while the link is there.
    let calls = std::fs::read_to_string(bin.join("sbatch.calls")).unwrap();
    let (text, _) = ok(&tag, &bin, &["slurm", "--resume", s]);
    assert!(text.contains("shard 2/2: not this sweep's"), "{text}");
    assert!(text.contains("nothing to submit"), "{text}");
    assert_eq!(
        std::fs::read_to_string(bin.join("sbatch.calls")).unwrap(),
        calls
    );
}

#[test]
fn shards_run_by_hand_into_one_folder_read_as_one_sweep() {
    let dir = scratch("shards-by-hand");
    let tag = format!("shards-by-hand-{}", std::process::id());
    let _cleanup = KillTagged(tag.clone());
    let bin = dir.join("bin");
    let plan = dir.join("plan.toml");
    std::fs::write(&plan, two_config_plan("byhand", 1, &[64, 128], 1, 4)).unwrap();
    let shared = dir.join("shared");
    for i in 1..=2 {
        run_shard(
            &tag,
            &plan,
            &format!("{i}/2"),
            &shared.join(format!("shard-{i}")),
        );
    }
    let s = shared.to_str().unwrap();
    let want = sorted(plan_cells(&plan));

    let (text, _) = ok(&tag, &bin, &["export", s, "--format", "json"]);
    assert_eq!(exported(&text), want);
    let (text, _) = ok(&tag, &bin, &["ls", s, "--json"]);
    let runs: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(runs[0]["state"], "finished", "{runs}");
    assert_eq!(runs[0]["done"].as_u64(), Some(want.len() as u64), "{runs}");
    assert_eq!(runs[0]["total"].as_u64(), Some(want.len() as u64), "{runs}");
    assert_eq!(runs[0]["shards"].as_array().unwrap().len(), 2, "{runs}");
    let (md, _) = ok(&tag, &bin, &["open", s]);
    assert!(md.contains("byhand") || md.contains("| a"), "{md}");
    let report = dir.join("report.html");
    ok(&tag, &bin, &["report", s, "-o", report.to_str().unwrap()]);
    let (text, _) = ok(&tag, &bin, &["compare", s, s, "--format", "json"]);
    for cell in &want {
        assert!(text.contains(cell.as_str()), "{cell}: {text}");
    }
}
