//! The simulated and disabled sources, the sampler thread's lifecycle, and the
//! per-cell aggregates.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sweeptop as crate_under_test;

use crate_under_test::gpu::{
    render_table, sample_once, spawn_sampler, CellGpuAgg, GpuSource, SimGpus,
};
use crate_under_test::model::{GpuSample, GpuSnapshot, GpuStatus};

const SERVER_PID: u32 = 4_000_123;

#[test]
fn simulated_gpus_follow_the_engine() {
    let sim = SimGpus::new(2);
    let source = GpuSource::Simulated(sim.clone());
    let ours = |pid: u32| pid == SERVER_PID;

    let idle = sample_once(&source, &ours);
    assert_eq!(idle.status, GpuStatus::Simulated);
    assert_eq!(idle.gpus.len(), 2);
    for gpu in &idle.gpus {
        assert_eq!(gpu.util_pct, Some(0));
        assert_eq!(gpu.mem_used_mib, Some(0));
        assert_eq!(gpu.mem_total_mib, Some(143_771));
        assert!(gpu.processes.is_empty());
    }

    // Server on GPU 0 with a cell in flight: memory climbs to ~75 %, util 85–99.
    sim.set(SERVER_PID, &[0], true);
    let mut last = idle;
    for _ in 0..12 {
        last = sample_once(&source, &ours);
        let util = last.gpus[0].util_pct.unwrap();
        assert!((85..=99).contains(&util), "util {util}");
        assert_eq!(last.gpus[1].util_pct, Some(0));
    }
    let gpu0 = &last.gpus[0];
    let used = gpu0.mem_used_mib.unwrap();
    assert!((105_000..=110_000).contains(&used), "used {used}");
    assert!(gpu0.temp_c.unwrap() > 60, "{:?}", gpu0.temp_c);
    assert!(gpu0.power_w.unwrap() > 500.0, "{:?}", gpu0.power_w);
    assert!(gpu0.power_w <= gpu0.power_limit_w);
    assert_eq!(gpu0.processes.len(), 1);
    assert_eq!(gpu0.processes[0].pid, SERVER_PID);
    assert!(gpu0.processes[0].ours);
    assert!(last.gpus[1].processes.is_empty());

    // Between cells: memory stays, util drops to ~0.
    sim.set(SERVER_PID, &[0], false);
    let between = sample_once(&source, &ours);
    assert!(between.gpus[0].util_pct.unwrap() <= 1);
    assert!(between.gpus[0].mem_used_mib.unwrap() > 100_000);

    // Server stopped: memory freed at once, process gone.
    sim.remove(SERVER_PID);
    let after = sample_once(&source, &ours);
    assert_eq!(after.gpus[0].mem_used_mib, Some(0));
    assert!(after.gpus[0].processes.is_empty());
}

#[test]
fn disabled_source_reports_disabled() {
    let snap = sample_once(&GpuSource::Disabled, &|_| false);
    assert_eq!(snap.status, GpuStatus::Disabled);
    assert!(snap.gpus.is_empty());
    assert_eq!(
        render_table(&snap),
        "GPU telemetry: GPU telemetry off (--no-gpu)\n"
    );
}

#[test]
fn sampler_stops_promptly_when_dropped() {
    let (tx, rx) = mpsc::channel();
    let sampler = spawn_sampler(
        GpuSource::Simulated(SimGpus::new(1)),
        Duration::from_secs(60),
        Arc::new(|_| false),
        Box::new(move |snap| tx.send(snap).is_ok()),
    );
    let first = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("first sample at once");
    assert_eq!(first.status, GpuStatus::Simulated);
    assert!(!sampler.is_finished());

    let started = Instant::now();
    drop(sampler);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // The thread is gone: its sink (and so the sender) has been dropped.
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(1)),
        Err(mpsc::RecvTimeoutError::Disconnected)
    );
}

#[test]
fn sampler_stop_and_sink_refusal_end_the_thread() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = calls.clone();
    let sampler = spawn_sampler(
        GpuSource::Disabled,
        Duration::from_millis(1),
        Arc::new(|_| false),
        Box::new(move |_| counter.fetch_add(1, Ordering::SeqCst) < 2),
    );
    // The interval is clamped to 250 ms: three samples take about half a second.
    let started = Instant::now();
    while !sampler.is_finished() && started.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(sampler.is_finished());
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(
        started.elapsed() >= Duration::from_millis(450),
        "{:?}",
        started.elapsed()
    );
    assert!(sampler.spawn_error().is_none());

    let sampler = spawn_sampler(
        GpuSource::Disabled,
        Duration::from_secs(60),
        Arc::new(|_| false),
        Box::new(|_| true),
    );
    let started = Instant::now();
    sampler.stop();
    assert!(started.elapsed() < Duration::from_secs(2));
}

fn gpu(index: u32, util: Option<u32>, used: Option<u64>) -> GpuSample {
    let mut gpu = GpuSample::unknown(index);
    gpu.util_pct = util;
    gpu.mem_used_mib = used;
    gpu.mem_total_mib = Some(143_771);
    gpu
}

fn snap(at_ms: u64, gpus: Vec<GpuSample>) -> GpuSnapshot {
    GpuSnapshot {
        at_ms,
        status: GpuStatus::Simulated,
        gpus,
    }
}

#[test]
fn cell_aggregates_peak_memory_and_mean_util_over_the_config_gpus() {
    let snaps = [
        snap(
            1_000,
            vec![
                gpu(0, Some(90), Some(100_000)),
                gpu(1, Some(80), Some(101_000)),
                gpu(2, Some(0), Some(140_000)),
            ],
        ),
        snap(
            2_000,
            vec![
                gpu(0, Some(100), Some(102_500)),
                gpu(1, None, None),
                gpu(2, Some(0), Some(140_000)),
            ],
        ),
        snap(
            3_000,
            vec![
                gpu(0, Some(70), Some(99_000)),
                gpu(1, Some(60), Some(100_000)),
                gpu(2, Some(0), Some(140_000)),
            ],
        ),
        // Outside the cell's window.
        snap(
            9_000,
            vec![
                gpu(0, Some(0), Some(143_000)),
                gpu(1, Some(0), Some(143_000)),
            ],
        ),
    ];
    let agg = CellGpuAgg::over_window(Some(&[0, 1]), &snaps, 1_000, 3_000);
    assert_eq!(agg.samples(), 3);
    // Peak of any one config GPU, not a sum; GPU 2 is not the config's.
    assert_eq!(agg.gpu_mem_peak_mib(), Some(102_500));
    // (90 + 80 + 100 + 70 + 60) / 5: the N/A reading does not count as 0.
    assert_eq!(agg.gpu_util_mean(), Some(80.0));

    let mut all = CellGpuAgg::new(None);
    for s in &snaps[..3] {
        all.add(s);
    }
    assert_eq!(all.gpu_mem_peak_mib(), Some(140_000));
    assert_eq!(all.gpu_util_mean(), Some(400.0 / 8.0));

    // Nothing to aggregate: both None, never 0.
    let empty = CellGpuAgg::over_window(Some(&[0]), &snaps, 10_000, 20_000);
    assert_eq!(
        (empty.gpu_mem_peak_mib(), empty.gpu_util_mean()),
        (None, None)
    );
    let mut na_only = CellGpuAgg::new(Some(&[1]));
    na_only.add(&snaps[1]);
    na_only.add(&snap(4_000, vec![]));
    assert_eq!(na_only.samples(), 0);
    assert_eq!(
        (na_only.gpu_mem_peak_mib(), na_only.gpu_util_mean()),
        (None, None)
    );
}

#[test]
fn snapshots_round_trip_through_json() {
    let sim = SimGpus::new(1);
    sim.set(SERVER_PID, &[0], true);
    let snap = sample_once(&GpuSource::Simulated(sim), &|_| true);
    let json = serde_json::to_string(&snap).unwrap();
    assert!(json.contains(r#""status":{"state":"simulated"}"#), "{json}");
    let back: GpuSnapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(back, snap);
}
