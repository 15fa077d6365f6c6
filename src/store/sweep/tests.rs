use super::*;
use crate::model::{CellRecord, Status};

fn record(cell: &str, finished_ms: i64, status: Status) -> CellRecord {
    let mut r = crate::model::sample_record(cell, status, "stopped");
    r.finished_at = Timestamp::from_unix_ms(finished_ms);
    r
}

fn append(dir: &Path, r: &CellRecord) {
    use std::io::Write;
    fs::create_dir_all(dir).unwrap();
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(super::super::RESULTS))
        .unwrap();
    writeln!(f, "{}", serde_json::to_string(r).unwrap()).unwrap();
}

#[test]
fn shards_merge_into_one_set_of_results_the_last_record_winning() {
    let d = std::env::temp_dir().join(format!("sweeptop-sweep-merge-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    let meta = SweepMeta {
        plan: "p".into(),
        shards: 2,
        created_at: Timestamp::from_unix_ms(0),
        sweeptop: "/bin/sweeptop".into(),
        submissions: vec![],
    };
    create_sweep(&d, "name = \"p\"\n", &meta).unwrap();
    assert!(is_sweep_dir(&d));
    assert_eq!(read_sweep(&d).unwrap(), meta);
    // A second create is refused.
    assert!(create_sweep(&d, "", &meta).is_err());
    append(&shard_dir(&d, 1), &record("a", 10, Status::Skipped));
    append(&shard_dir(&d, 2), &record("b", 20, Status::Skipped));
    // `a` measured again later, in another shard's directory.
    append(&shard_dir(&d, 2), &record("a", 30, Status::Skipped));
    append(&shard_dir(&d, 1), &record("c", 5, Status::Skipped));
    let r = super::super::read_results(&d).unwrap();
    let cells: Vec<(&str, i64)> = r
        .records
        .iter()
        .map(|r| (r.cell.as_str(), r.finished_at.unix_ms()))
        .collect();
    assert_eq!(cells, vec![("c", 5), ("a", 30), ("b", 20)]);
    // The generic reader dispatches to the merge.
    assert_eq!(super::super::read_results(&d).unwrap().records.len(), 3);
    assert_eq!(shard_state(&shard_dir(&d, 3)), ShardState::Pending);
    fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_shard_file_reads_back_and_a_bad_one_is_an_error() {
    let d = std::env::temp_dir().join(format!("sweeptop-shard-file-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    assert_eq!(read_shard(&d).unwrap(), None);
    write_shard(&d, ShardFile { index: 2, count: 3 }).unwrap();
    assert_eq!(
        read_shard(&d).unwrap(),
        Some(ShardFile { index: 2, count: 3 })
    );
    fs::write(d.join(SHARD), "{").unwrap();
    assert!(read_shard(&d).is_err());
    // A heartbeat of another machine is alive while fresh, if the run
    // says it is running.
    fs::write(
        d.join(super::super::META),
        r#"{"plan":"p","started_at":"2026-12-03T08:16:24.123Z","sweeptop_version":"0","state":"running","pid":1}"#,
    )
    .unwrap();
    beat(
        &d,
        &Heartbeat {
            host: "elsewhere-node".into(),
            pid: 1,
            at: Timestamp::now(),
            slurm_job: None,
        },
    );
    assert!(shard_alive(&d));
    assert_eq!(
        shard_state(&d),
        ShardState::Running {
            host: "elsewhere-node".into()
        }
    );
    fs::write(
        d.join(super::super::META),
        r#"{"plan":"p","started_at":"2026-12-03T08:16:24.123Z","sweeptop_version":"0","state":"finished","pid":1}"#,
    )
    .unwrap();
    assert!(!shard_alive(&d));
    assert_eq!(shard_state(&d), ShardState::Finished);
    // Recorded as running, on this machine, by a process that is gone
    // (its beat still fresh): died, and where.
    fs::write(
        d.join(super::super::META),
        r#"{"plan":"p","started_at":"2026-12-03T08:16:24.123Z","sweeptop_version":"0","state":"running","pid":0}"#,
    )
    .unwrap();
    beat(
        &d,
        &Heartbeat {
            host: host_name(),
            pid: 0,
            at: Timestamp::now(),
            slurm_job: None,
        },
    );
    assert_eq!(
        shard_state(&d),
        ShardState::Died {
            host: Some(host_name())
        }
    );
    // Another machine's beat gone stale: died too.
    beat(
        &d,
        &Heartbeat {
            host: "elsewhere-node".into(),
            pid: 1,
            at: Timestamp::now(),
            slurm_job: None,
        },
    );
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(120);
    fs::File::options()
        .write(true)
        .open(d.join(HEARTBEAT))
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert!(!shard_alive(&d));
    assert!(matches!(shard_state(&d), ShardState::Died { .. }));
    fs::remove_dir_all(&d).unwrap();
}
