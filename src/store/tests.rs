//! The run directory, written and read back: results appended and fsynced,
//! torn tails repaired, `run.json` rebuilt, one sweep per directory.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use super::lock::lock;
use super::meta::META_TMP;
use super::*;
use crate::model::{CellRecord, RunState, Status, Timestamp};

fn record(cell: &str, status: Status) -> CellRecord {
    CellRecord {
        cell: cell.into(),
        config: "c".into(),
        phase: "p".into(),
        workload: "w".into(),
        context_tokens: 1024,
        concurrency: 1,
        status,
        failure: None,
        metrics: None,
        started_at: Timestamp::from_unix_ms(0),
        finished_at: Timestamp::from_unix_ms(1000),
        warnings: Vec::new(),
        repetitions: Vec::new(),
        spread: None,
        beside: Vec::new(),
        gpus: Vec::new(),
    }
}

#[test]
fn appends_reads_and_repairs_a_torn_tail() {
    let dir = std::env::temp_dir().join(format!("sweeptop-store-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let mut run = RunDir::create(&dir, "demo", "name = \"demo\"\n").unwrap();
    run.append_result(&record("a", Status::Skipped)).unwrap();
    run.append_result(&record("b", Status::Skipped)).unwrap();
    drop(run);
    // A crash mid-write leaves half a line.
    let mut f = OpenOptions::new()
        .append(true)
        .open(dir.join(RESULTS))
        .unwrap();
    f.write_all(b"{\"cell\":\"c\",\"sta").unwrap();
    drop(f);
    let r = read_results(&dir).unwrap();
    assert_eq!(r.records.len(), 2);
    assert_eq!(r.problems.len(), 1);
    assert!(r.problems[0].contains("torn last line"), "{:?}", r.problems);

    let mut run = RunDir::reopen(&dir).unwrap();
    run.append_result(&record("c", Status::Skipped)).unwrap();
    let r = read_results(&dir).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    let cells: Vec<_> = r.records.iter().map(|r| r.cell.as_str()).collect();
    assert_eq!(cells, ["a", "b", "c"]);
    // Creating over an existing run is refused.
    assert!(RunDir::create(&dir, "demo", "").is_err());
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_full_disk_is_a_clear_error_naming_the_file() {
    let dir = std::env::temp_dir().join(format!("sweeptop-store3-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let mut run = RunDir::create(&dir, "demo", "").unwrap();
    run.append_result(&record("a", Status::Skipped)).unwrap();
    drop(run);
    // Stand in for a full disk: /dev/full fails every write with ENOSPC.
    let kept = fs::read(dir.join(RESULTS)).unwrap();
    fs::rename(dir.join(RESULTS), dir.join("kept.jsonl")).unwrap();
    std::os::unix::fs::symlink("/dev/full", dir.join(RESULTS)).unwrap();
    let mut run = RunDir::open_files(&dir, lock(&dir).unwrap(), None).unwrap();
    let err = run
        .append_result(&record("b", Status::Skipped))
        .unwrap_err()
        .to_string();
    assert!(err.contains("results.jsonl"), "{err}");
    assert!(err.to_lowercase().contains("no space"), "{err}");
    // What was recorded before is untouched.
    assert_eq!(fs::read(dir.join("kept.jsonl")).unwrap(), kept);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn last_record_per_cell_wins() {
    let dir = std::env::temp_dir().join(format!("sweeptop-store2-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let mut run = RunDir::create(&dir, "demo", "").unwrap();
    run.append_result(&record("a", Status::Skipped)).unwrap();
    run.append_result(&record("a", Status::Failed)).unwrap();
    let r = read_results(&dir).unwrap();
    assert_eq!(r.records.len(), 1);
    assert_eq!(r.records[0].status, Status::Failed);
    let _ = fs::remove_dir_all(&dir);
}

fn fresh(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sweeptop-store-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[test]
fn a_missing_or_corrupt_run_json_is_rebuilt_on_resume() {
    for damage in ["missing", "corrupt", "empty"] {
        let dir = fresh(&format!("meta-{damage}"));
        let mut run = RunDir::create(&dir, "demo", "name = \"demo\"\n").unwrap();
        let mut r = record("a", Status::Skipped);
        r.started_at = Timestamp::from_unix_ms(1_000_000);
        run.append_result(&r).unwrap();
        drop(run);
        // As a kill -9 before the first rename left it.
        fs::write(dir.join(META_TMP), "{\"plan\":").unwrap();
        match damage {
            "missing" => fs::remove_file(dir.join(META)).unwrap(),
            "corrupt" => fs::write(dir.join(META), "{\"plan\": 12").unwrap(),
            _ => fs::write(dir.join(META), "").unwrap(),
        }
        // Listed as a run still, with what the directory tells.
        let seen = run_meta(&dir).expect("a run");
        assert_eq!(seen.plan, "demo");
        assert_eq!(seen.state, RunState::Interrupted);
        let run = RunDir::reopen(&dir).unwrap();
        assert_eq!(run.repairs.len(), 1, "{damage}: {:?}", run.repairs);
        assert!(run.repairs[0].contains("rebuilt"), "{:?}", run.repairs);
        assert!(!dir.join(META_TMP).exists());
        let meta = read_meta(&dir).unwrap();
        assert_eq!(meta.plan, "demo");
        assert_eq!(meta.state, RunState::Running);
        assert!(meta.started_at <= Timestamp::from_unix_ms(1_000_000));
        run.set_state(RunState::Finished).unwrap();
        assert_eq!(read_meta(&dir).unwrap().state, RunState::Finished);
        let _ = fs::remove_dir_all(&dir);
    }
}

#[test]
fn a_new_run_refuses_a_foreign_directory_and_keeps_the_users_permissions() {
    use std::os::unix::fs::PermissionsExt;
    // Something else's directory: refused, untouched.
    let dir = fresh("foreign");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("notes.txt"), "mine").unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o1777)).unwrap();
    let err = RunDir::create(&dir, "demo", "").err().unwrap().to_string();
    assert!(
        err.contains("not empty") && err.contains("notes.txt"),
        "{err}"
    );
    assert_eq!(mode(&dir), 0o1777);
    assert!(!dir.join(PLAN).exists());
    // An empty one the user made: used, its permissions kept (a shared
    // temporary directory keeps its sticky bit and world access).
    fs::remove_file(dir.join("notes.txt")).unwrap();
    let run = RunDir::create(&dir, "demo", "").unwrap();
    assert_eq!(mode(&dir), 0o1777);
    drop(run);
    let _ = fs::remove_dir_all(&dir);
    // One made here is its owner's alone.
    let dir = fresh("made");
    let run = RunDir::create(&dir.join("run"), "demo", "").unwrap();
    assert_eq!(mode(&dir.join("run")), 0o700);
    drop(run);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn one_sweep_per_directory_and_the_loser_writes_nothing() {
    let dir = fresh("lock");
    let run = RunDir::create(&dir, "demo", "").unwrap();
    assert!(is_locked(&dir));
    let meta_before = fs::read(dir.join(META)).unwrap();
    // No control socket is needed for the guard: the lock is held.
    let err = RunDir::reopen(&dir).err().unwrap().to_string();
    assert!(err.contains("already running"), "{err}");
    let err = RunDir::create(&dir, "demo", "").err().unwrap().to_string();
    assert!(err.contains("already holds a run"), "{err}");
    assert_eq!(fs::read(dir.join(META)).unwrap(), meta_before);
    // The owner gone (however it died), the directory can be resumed.
    drop(run);
    assert!(released(&dir), "the lock outlived its owner");
    let again = RunDir::reopen(&dir).unwrap();
    assert!(is_locked(&dir));
    drop(again);
    let _ = fs::remove_dir_all(&dir);
}

/// Whether the directory's lock is let go of within the time `lock` waits
/// for it: another test's child, forked while the lock was held and not yet
/// at its exec, holds a copy of the descriptor for that moment.
fn released(dir: &Path) -> bool {
    let until = std::time::Instant::now() + super::lock::LINGER;
    while is_locked(dir) {
        if std::time::Instant::now() > until {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    true
}

#[test]
fn resuming_a_finished_run_that_records_nothing_keeps_its_end() {
    let dir = fresh("finished");
    let mut run = RunDir::create(&dir, "demo", "").unwrap();
    run.append_result(&record("a", Status::Skipped)).unwrap();
    run.set_state(RunState::Finished).unwrap();
    drop(run);
    let before = read_meta(&dir).unwrap();
    let run = RunDir::reopen(&dir).unwrap();
    assert_eq!(read_meta(&dir).unwrap().state, RunState::Running);
    run.set_state(RunState::Finished).unwrap();
    assert_eq!(read_meta(&dir).unwrap(), before);
    drop(run);
    // A resume that records a cell has a new end.
    let mut run = RunDir::reopen(&dir).unwrap();
    run.append_result(&record("b", Status::Skipped)).unwrap();
    run.set_state(RunState::Finished).unwrap();
    assert_ne!(read_meta(&dir).unwrap().finished_at, before.finished_at);
    drop(run);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn an_ok_without_tokens_and_foreign_cells_are_not_results() {
    let dir = fresh("invalid");
    let mut run = RunDir::create(&dir, "demo", "").unwrap();
    run.append_result(&record("a", Status::Skipped)).unwrap();
    // A hand edit: "ok" with no metrics.
    run.append_result(&record("b", Status::Ok)).unwrap();
    run.append_result(&record("elsewhere", Status::Skipped))
        .unwrap();
    let mut r = read_results(&dir).unwrap();
    let cells: Vec<_> = r.records.iter().map(|r| r.cell.as_str()).collect();
    assert_eq!(cells, ["a", "elsewhere"]);
    assert!(
        r.problems[0].contains("ok without tokens"),
        "{:?}",
        r.problems
    );
    r.only_cells(["a", "b"]);
    let cells: Vec<_> = r.records.iter().map(|r| r.cell.as_str()).collect();
    assert_eq!(cells, ["a"]);
    assert!(r.problems[1].contains("1 record(s)"), "{:?}", r.problems);
    drop(run);
    let _ = fs::remove_dir_all(&dir);
}
