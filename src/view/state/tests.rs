//! The fold's promises: order and duplicates do not matter, pauses leave the
//! ETA alone, the log and GPU history stay bounded, untrusted text is made safe.

use super::log::LOG_LINES;
use super::*;
use crate::model::{CellRecord, Event, GpuSnapshot, GpuStatus, Level, LogMark, Status, Timestamp};

fn at(s: u32) -> Timestamp {
    Timestamp::from_unix_ms(1_748_772_000_000 + i64::from(s) * 1000)
}

fn rec(cell: &str, config: &str, status: Status, finished: u32) -> CellRecord {
    CellRecord {
        config: config.into(),
        metrics: None,
        started_at: at(finished.saturating_sub(1)),
        finished_at: at(finished),
        ..crate::model::sample_record(cell, status, "boom")
    }
}

fn finished(r: CellRecord) -> Event {
    Event::CellFinished {
        at: r.finished_at,
        record: Box::new(r),
    }
}

fn started(t: u32, done: usize) -> Event {
    Event::SweepStarted {
        at: at(t),
        plan: "demo".into(),
        run_dir: "runs/demo".into(),
        configs: 2,
        cells: 4,
        already_done: done,
    }
}

fn cell_started(t: u32, cell: &str, config: &str) -> Event {
    Event::CellStarted {
        at: at(t),
        cell: cell.into(),
        config: config.into(),
    }
}

fn fold(events: &[Event]) -> ViewState {
    let mut v = ViewState::new(None);
    for e in events {
        v.apply(e);
    }
    v
}

#[test]
fn a_sweep_runs_pauses_and_finishes() {
    let mut v = fold(&[started(0, 0), cell_started(1, "a", "c1")]);
    assert_eq!(v.shown(), Shown::Running);
    assert_eq!(v.running.first().map(|r| r.cell.as_str()), Some("a"));
    v.apply(&Event::Paused { at: at(2) });
    assert_eq!(v.shown(), Shown::Paused);
    v.apply(&finished(rec("a", "c1", Status::Ok, 3)));
    assert!(v.running.is_empty());
    assert_eq!(v.done(), 1);
    v.apply(&Event::Resumed { at: at(4) });
    assert_eq!(v.shown(), Shown::Running);
    v.apply(&Event::Action {
        at: at(5),
        action: "quit".into(),
        target: None,
        source: "key".into(),
    });
    assert_eq!(v.shown(), Shown::Stopping);
    v.apply(&Event::SweepInterrupted {
        at: at(6),
        reason: "quit".into(),
    });
    assert_eq!(v.shown(), Shown::Interrupted);
    // Elapsed and ETA come from the events' clock, and the clock stops
    // when the sweep ends: a dashboard left open does not count on.
    assert_eq!(v.elapsed_s(at(5)), Some(5));
    assert_eq!(v.elapsed_s(at(100)), Some(6));
    // A resumed sweep counts again from its new start.
    v.apply(&started(200, 0));
    assert_eq!(v.elapsed_s(at(210)), Some(10));
}

#[test]
fn a_retried_cell_is_queued_until_it_is_recorded_again() {
    let failed = |t| finished(rec("a", "c1", Status::Failed, t));
    let retry = |t, target: &str| Event::Action {
        at: at(t),
        action: "retry".into(),
        target: Some(target.into()),
        source: "command line (--retry failed)".into(),
    };
    let mut v = fold(&[
        started(0, 0),
        failed(1),
        finished(rec("b", "c1", Status::Ok, 2)),
    ]);
    assert_eq!(v.done(), 2);
    // `run --resume --retry failed`: queued, and not done while it waits.
    v.apply(&started(10, 2));
    v.apply(&retry(10, "a"));
    assert!(v.retry_waits("a", "c1"));
    assert_eq!(v.done(), 1, "a queued retry is left to do");
    // It fails again without a start of its own (a crashed config's rest is
    // recorded without running): its new record ends the wait.
    v.apply(&failed(12));
    assert!(!v.retry_waits("a", "c1"));
    assert_eq!(v.done(), 2);
    // A whole config queued waits for each of its cells' next record.
    v.apply(&retry(20, "c1"));
    assert!(v.retry_waits("a", "c1") && v.retry_waits("b", "c1"));
    v.apply(&finished(rec("b", "c1", Status::Ok, 21)));
    assert!(v.retry_waits("a", "c1") && !v.retry_waits("b", "c1"));
}

/// A cell that ran from `from` to `to` (seconds into the sweep).
fn ran(cell: &str, config: &str, from: u32, to: u32) -> Event {
    finished(CellRecord {
        started_at: at(from),
        ..rec(cell, config, Status::Ok, to)
    })
}

#[test]
fn eta_waits_until_cells_were_measured() {
    // One cell 6 s in: a server start spread over one cell is no pace.
    let mut v = fold(&[started(0, 0), ran("a", "c1", 4, 6)]);
    assert_eq!(v.eta_s(at(6)), None);
    assert_eq!(v.eta_s(at(30)), None);
    // Cells recorded without running (a crashed config's rest) are no
    // measurement either.
    for cell in ["b", "c"] {
        v.apply(&finished(CellRecord {
            started_at: at(6),
            ..rec(cell, "c1", Status::Failed, 6)
        }));
    }
    assert_eq!(v.eta_s(at(30)), None);
}

#[test]
fn eta_comes_from_measured_cell_durations() {
    let v = fold(&[
        started(0, 0),
        ran("a", "c1", 4, 6),
        ran("b", "c1", 6, 8),
        ran("c", "c1", 8, 10),
    ]);
    // Three cells measured at 2 s each, one left: 2 s, however long the
    // first server took to start.
    assert_eq!(v.eta_s(at(10)), Some(2));
    // Configs side by side: their cells' times overlap, counted once.
    let v = fold(&[
        started(0, 0),
        ran("a", "c1", 0, 4),
        ran("b", "c2", 0, 4),
        ran("c", "c1", 4, 6),
    ]);
    assert_eq!(v.eta_s(at(10)), Some(2));
}

#[test]
fn eta_adds_for_each_config_left_what_a_config_took_besides_its_cells() {
    let plan = Arc::new(
        crate::plan::Plan::parse(
            std::path::Path::new(crate::plan::DEMO_PATH),
            crate::plan::DEMO_PLAN,
        )
        .unwrap(),
    );
    let mut v = ViewState::new(Some(plan.clone()));
    v.apply(&Event::SweepStarted {
        at: at(0),
        plan: plan.name.clone(),
        run_dir: "runs/demo".into(),
        configs: plan.configs.len(),
        cells: plan.cells.len(),
        already_done: 0,
    });
    // The first config's server took 6 s to start, its cells 2 s each.
    let first = &plan.configs[0].id;
    let cells: Vec<_> = plan.cells_of(first).map(|c| c.id.clone()).collect();
    for (i, c) in cells.iter().enumerate() {
        let from = 6 + 2 * i as u32;
        v.apply(&ran(c, first, from, from + 2));
    }
    let left = (plan.cells.len() - cells.len()) as u64;
    let configs_left = (plan.configs.len() - 1) as u64;
    let eta = Some(left * 2 + configs_left * 6);
    assert_eq!(v.eta_s(at(20)), eta);
    // The next server starting takes no cell's time: the ETA holds.
    assert_eq!(v.eta_s(at(30)), eta);
}

#[test]
fn the_alert_keeps_the_worst_failure_and_counts_each_kind() {
    let crash = rec("a/c1", "a", Status::Failed, 5);
    let overflow = |cell: &str, t| {
        let mut r = rec(cell, "b", Status::Failed, t);
        if let Some(f) = r.failure.as_mut() {
            f.kind = crate::model::FailureKind::ContextOverflow;
        }
        r
    };
    let mut v = fold(&[started(0, 0), finished(crash)]);
    assert_eq!(
        v.alert().as_deref(),
        Some("a: CUDA illegal instruction — 1 cell failed")
    );
    // Later, routine overflows: the crash stays, with the count of each kind.
    v.apply(&finished(overflow("b/c1", 9)));
    v.apply(&finished(overflow("b/c2", 12)));
    assert_eq!(
        v.alert().as_deref(),
        Some("a: CUDA illegal instruction — 1 cell failed")
    );
    assert_eq!(
        v.failure_kinds().as_deref(),
        Some("in all 1 ILL-INSTR, 2 CTX 400")
    );
    // The crashed cell retried fine: the overflow is the headline now.
    v.apply(&finished(rec("a/c1", "a", Status::Ok, 20)));
    assert_eq!(
        v.alert().as_deref(),
        Some("b: context overflow — 2 cells failed")
    );
}

#[test]
fn eta_leaves_paused_time_out() {
    let mut v = fold(&[
        started(0, 0),
        ran("a", "c1", 0, 2),
        ran("b", "c1", 2, 4),
        Event::Paused { at: at(4) },
    ]);
    // Paused before the pace is known: working time only counts once resumed.
    assert_eq!(v.eta_s(at(500)), None);
    v.apply(&Event::Resumed { at: at(500) });
    v.apply(&ran("c", "c1", 500, 506));
    // 10 working seconds (496 paused); 3 cells in 10 s of cell time, one
    // left: 3 s.
    assert_eq!(v.eta_s(at(506)), Some(3));
    // While paused the ETA stands still, however long the pause.
    v.apply(&Event::Paused { at: at(506) });
    v.apply(&Event::Paused { at: at(600) });
    assert_eq!(v.eta_s(at(700)), Some(3));
    v.apply(&Event::Resumed { at: at(700) });
    assert_eq!(v.eta_s(at(700)), Some(3));
}

#[test]
fn a_duplicate_finished_cell_changes_nothing() {
    let a = rec("a", "c1", Status::Failed, 5);
    let once = fold(&[started(0, 0), finished(a.clone())]);
    let twice = fold(&[started(0, 0), finished(a.clone()), finished(a)]);
    assert_eq!(once.records, twice.records);
    assert_eq!(once.finished_since_start, twice.finished_since_start);
    assert_eq!(once.alert(), twice.alert());
    assert!(twice.alert().unwrap().ends_with(" — 1 cell failed"));
}

#[test]
fn a_retry_replaces_the_record_and_an_older_one_never_does() {
    let failed = rec("a", "c1", Status::Failed, 5);
    let ok = rec("a", "c1", Status::Ok, 50);
    // In order: the retry wins.
    let v = fold(&[
        started(0, 0),
        finished(failed.clone()),
        finished(ok.clone()),
    ]);
    assert_eq!(v.records["a"].status, Status::Ok);
    assert_eq!(v.alert(), None);
    // Replayed out of order (resume re-reading events): still the retry.
    let v = fold(&[finished(ok.clone()), started(0, 0), finished(failed)]);
    assert_eq!(v.records["a"].status, Status::Ok);
    assert_eq!(v.records.len(), 1);
}

#[test]
fn the_running_cell_ignores_stale_starts() {
    // A start older than the cell's record (replayed after resume) is not running.
    let v = fold(&[
        finished(rec("a", "c1", Status::Ok, 10)),
        cell_started(9, "a", "c1"),
    ]);
    assert!(v.running.is_empty());
    // A retry of a recorded cell is running again.
    let v = fold(&[
        finished(rec("a", "c1", Status::Failed, 10)),
        cell_started(20, "a", "c1"),
    ]);
    assert_eq!(v.running.first().map(|r| r.cell.as_str()), Some("a"));
    // An older start does not replace a newer one.
    let v = fold(&[cell_started(20, "b", "c1"), cell_started(10, "a", "c1")]);
    assert_eq!(v.running.first().map(|r| r.cell.as_str()), Some("b"));
}

#[test]
fn resuming_after_an_interrupt_starts_afresh_and_old_events_do_not_undo_it() {
    let first_run = [
        started(0, 0),
        finished(rec("a", "c1", Status::Ok, 10)),
        Event::Paused { at: at(11) },
        cell_started(12, "b", "c1"),
        Event::Action {
            at: at(13),
            action: "quit".into(),
            target: None,
            source: "key".into(),
        },
        Event::SweepInterrupted {
            at: at(14),
            reason: "quit".into(),
        },
    ];
    let resumed = [started(100, 1), cell_started(101, "b", "c1")];
    let mut in_order: Vec<Event> = first_run.to_vec();
    in_order.extend(resumed.iter().cloned());
    let v = fold(&in_order);
    assert_eq!(v.shown(), Shown::Running);
    assert_eq!(v.running.first().map(|r| r.since), Some(at(101)));
    // The old run's events arriving after the new ones change nothing.
    let mut shuffled: Vec<Event> = resumed.to_vec();
    shuffled.extend(first_run.iter().cloned());
    let w = fold(&shuffled);
    assert_eq!(w.shown(), Shown::Running);
    assert_eq!(w.running, v.running);
    assert_eq!(w.records, v.records);
    assert_eq!(w.started, Some(at(100)));
    assert_eq!(w.finished_since_start, 0);
}

#[test]
fn actions_mark_excluded_configs_and_queued_retries() {
    let v = fold(&[
        started(0, 0),
        Event::Action {
            at: at(1),
            action: "exclude".into(),
            target: Some("c2".into()),
            source: "key".into(),
        },
        Event::Action {
            at: at(2),
            action: "retry".into(),
            target: Some("a".into()),
            source: "key".into(),
        },
    ]);
    assert!(v.excluded.contains("c2"));
    assert!(v.retry_queued.contains_key("a"));
    let mut v = v;
    v.apply(&cell_started(3, "a", "c1"));
    assert!(!v.retry_queued.contains_key("a"));
}

#[test]
fn gpu_history_is_kept_in_order_and_bounded() {
    use crate::model::GpuSample;
    let snap = |t: u64, util: Option<u32>| Event::Gpu {
        snapshot: GpuSnapshot {
            at_ms: t,
            status: GpuStatus::Simulated,
            gpus: vec![GpuSample {
                util_pct: util,
                ..GpuSample::unknown(0)
            }],
        },
    };
    let mut v = ViewState::new(None);
    for t in 0..(GPU_HISTORY as u64 + 10) {
        v.apply(&snap(t, Some((t % 100) as u32)));
    }
    v.apply(&snap(3, None)); // late sample: dropped
    let h = &v.gpu.util[&0];
    assert_eq!(h.len(), GPU_HISTORY);
    assert_eq!(
        h.back(),
        Some(&Some(((GPU_HISTORY as u64 + 9) % 100) as u8))
    );
    assert_eq!(
        v.gpu.latest.as_ref().map(|s| s.at_ms),
        Some(GPU_HISTORY as u64 + 9)
    );
}

#[test]
fn log_lines_keep_their_marks_and_the_tail_is_bounded() {
    let mut v = ViewState::new(None);
    for i in 0..(LOG_LINES + 5) {
        v.apply(&Event::Log {
            config: "c1".into(),
            line: format!("line {i}"),
            mark: if i.is_multiple_of(2) {
                LogMark::Plain
            } else {
                LogMark::Failure
            },
        });
    }
    assert_eq!(v.log.lines.len(), LOG_LINES);
    assert_eq!(v.log.pushed, (LOG_LINES + 5) as u64);
    let last = v.log.lines.back().unwrap();
    assert_eq!(last.text, format!("line {}", LOG_LINES + 4));
    let marked = v
        .log
        .lines
        .iter()
        .filter(|l| l.kind == LineKind::Failure)
        .count();
    assert_eq!(marked, LOG_LINES / 2);
}

/// Server text reaches every view through this model: whatever a log
/// line, a failure or a notice carried, what is kept to be shown has no
/// control, escape or direction character.
#[test]
fn untrusted_text_is_kept_as_it_may_be_shown() {
    let dangerous = |s: &str| {
        s.chars()
            .any(|c| c.is_control() || ('\u{202A}'..='\u{202E}').contains(&c))
    };
    let mut v = ViewState::default();
    for (i, hostile) in crate::model::text::HOSTILE.iter().enumerate() {
        v.apply(&Event::Log {
            config: "a".into(),
            line: hostile.to_string(),
            mark: LogMark::Failure,
        });
        v.apply(&Event::Notice {
            at: at(i as u32),
            level: Level::Warn,
            message: hostile.to_string(),
        });
        let mut r = rec(&format!("a/c{i}"), "a", Status::Failed, i as u32);
        r.failure = Some(
            crate::model::Failure::new(
                crate::model::FailureKind::CudaIllegalInstruction,
                crate::model::FailureSource::ServerLog,
                *hostile,
            )
            .with_evidence(vec![hostile.to_string()]),
        );
        v.apply(&Event::CellFinished {
            at: at(i as u32),
            record: Box::new(r),
        });
        let f = v.records[&format!("a/c{i}")].failure.clone().unwrap();
        assert!(
            !dangerous(&f.message) && !dangerous(&f.evidence[0]),
            "{hostile:?} → {f:?}"
        );
        assert!(
            !dangerous(&v.last_notice.as_ref().unwrap().1),
            "{hostile:?}"
        );
    }
    for line in &v.log.lines {
        assert!(!dangerous(&line.text), "{:?}", line.text);
    }
    assert!(v
        .log
        .lines
        .iter()
        .any(|l| l.text.contains("real cause fake: all fine")));
}
