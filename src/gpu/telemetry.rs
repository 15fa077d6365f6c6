//! GPU telemetry for a sweep: runs the sampler, publishes snapshots as events,
//! hands each to a keeper (the run directory's `gpu.jsonl`) and folds the
//! samples of the running cell into its `gpu_mem_peak_mib` / `gpu_util_mean`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;

use super::{spawn_sampler, CellGpuAgg, GpuSnapshot, GpuSource, Sampler, SimGpus};
use crate::model::{Event, Timestamp};

struct Shared {
    latest: Option<GpuSnapshot>,
    cell: Option<CellGpuAgg>,
}

pub struct Telemetry {
    _sampler: Option<Sampler>,
    shared: Arc<Mutex<Shared>>,
    server_pgid: Arc<AtomicU32>,
    sim: Option<SimGpus>,
    interval: Duration,
}

impl Telemetry {
    /// Start sampling `source` every `interval`. Snapshots go to `events` and
    /// to `keep` (on the sampler's thread).
    pub fn start(
        source: GpuSource,
        interval: Duration,
        events: broadcast::Sender<Event>,
        mut keep: Box<dyn FnMut(&GpuSnapshot) + Send>,
    ) -> Telemetry {
        let shared = Arc::new(Mutex::new(Shared {
            latest: None,
            cell: None,
        }));
        let server_pgid = Arc::new(AtomicU32::new(0));
        let sim = match &source {
            GpuSource::Simulated(s) => Some(s.clone()),
            _ => None,
        };
        if matches!(source, GpuSource::Disabled) {
            return Telemetry {
                _sampler: None,
                shared,
                server_pgid,
                sim,
                interval,
            };
        }
        let pg = server_pgid.clone();
        let ours: Arc<dyn Fn(u32) -> bool + Send + Sync> = Arc::new(move |pid| {
            let group = pg.load(Ordering::Relaxed);
            let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(-1));
            group != 0
                && nix::unistd::getpgid(Some(pid))
                    .is_ok_and(|g| i64::from(g.as_raw()) == i64::from(group))
        });
        let sink_shared = shared.clone();
        let sink = Box::new(move |snap: GpuSnapshot| {
            keep(&snap);
            if let Ok(mut s) = sink_shared.lock() {
                if let Some(agg) = s.cell.as_mut() {
                    agg.add(&snap);
                }
                s.latest = Some(snap.clone());
            }
            let _ = events.send(Event::Gpu { snapshot: snap });
            true
        });
        let sampler = spawn_sampler(source, interval, ours, sink);
        Telemetry {
            _sampler: Some(sampler),
            shared,
            server_pgid,
            sim,
            interval,
        }
    }

    /// The first snapshot taken after `after`, waiting at most two sampling
    /// intervals: preflight must not judge the GPUs by a sample taken while
    /// the previous server still ran.
    pub async fn fresh_after(&self, after: Timestamp) -> Option<GpuSnapshot> {
        let after_ms = u64::try_from(after.unix_ms()).unwrap_or(0);
        self._sampler.as_ref()?;
        let deadline = tokio::time::Instant::now()
            + self.interval.max(super::MIN_INTERVAL) * 2
            + Duration::from_millis(200);
        loop {
            if let Some(s) = self.latest().filter(|s| s.at_ms > after_ms) {
                return Some(s);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn latest(&self) -> Option<GpuSnapshot> {
        self.shared.lock().ok().and_then(|s| s.latest.clone())
    }

    /// The server's process group (0 when none runs), for process attribution.
    pub fn set_server(&self, pgid: u32, gpus: &[u32]) {
        self.server_pgid.store(pgid, Ordering::Relaxed);
        if let Some(sim) = &self.sim {
            sim.set(gpus, false, (pgid != 0).then_some(pgid));
        }
    }

    /// A cell starts on these GPUs (`None`: all).
    pub fn begin_cell(&self, gpus: Option<&[u32]>, active: &[u32]) {
        if let Some(sim) = &self.sim {
            let pgid = self.server_pgid.load(Ordering::Relaxed);
            sim.set(active, true, (pgid != 0).then_some(pgid));
        }
        if let Ok(mut s) = self.shared.lock() {
            s.cell = Some(CellGpuAgg::new(gpus));
        }
    }

    /// The cell ended: its peak memory and mean utilisation over the samples
    /// taken while it ran. A cell shorter than the sampling interval may have
    /// none: its figures are then null, never borrowed from another moment.
    pub fn end_cell(&self, active: &[u32]) -> (Option<u64>, Option<f64>) {
        let result = match self.shared.lock() {
            Ok(mut s) => match s.cell.take() {
                Some(agg) => (agg.gpu_mem_peak_mib(), agg.gpu_util_mean()),
                None => (None, None),
            },
            Err(_) => (None, None),
        };
        if let Some(sim) = &self.sim {
            let pgid = self.server_pgid.load(Ordering::Relaxed);
            sim.set(active, false, (pgid != 0).then_some(pgid));
        }
        result
    }
}
