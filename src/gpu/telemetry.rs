//! GPU telemetry for a sweep: runs the sampler, publishes snapshots as events,
//! hands each to a keeper (the run directory's `gpu.jsonl`) and folds the
//! samples of the running cell into its `gpu_mem_peak_mib` / `gpu_util_mean`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;

use super::{spawn_sampler, CellGpuAgg, GpuSnapshot, GpuSource, Sampler, SimGpus};
use crate::model::{Event, Timestamp};

struct Shared {
    latest: Option<GpuSnapshot>,
    /// The running cells (several when configs run side by side), each
    /// folding the samples of its own GPUs.
    cells: HashMap<String, CellGpuAgg>,
}

pub struct Telemetry {
    _sampler: Option<Sampler>,
    shared: Arc<Mutex<Shared>>,
    /// The process groups of the sweep's running servers.
    servers: Arc<Mutex<Vec<u32>>>,
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
            cells: HashMap::new(),
        }));
        let servers: Arc<Mutex<Vec<u32>>> = Arc::default();
        let sim = match &source {
            GpuSource::Simulated(s) => Some(s.clone()),
            _ => None,
        };
        if matches!(source, GpuSource::Disabled) {
            return Telemetry {
                _sampler: None,
                shared,
                servers,
                sim,
                interval,
            };
        }
        let groups = servers.clone();
        let ours: Arc<dyn Fn(u32) -> bool + Send + Sync> = Arc::new(move |pid| {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(-1));
            let Ok(group) = nix::unistd::getpgid(Some(pid)) else {
                return false;
            };
            let group = u32::try_from(group.as_raw()).unwrap_or(0);
            group != 0 && groups.lock().is_ok_and(|g| g.contains(&group))
        });
        let sink_shared = shared.clone();
        let sink = Box::new(move |snap: GpuSnapshot| {
            keep(&snap);
            if let Ok(mut s) = sink_shared.lock() {
                for agg in s.cells.values_mut() {
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
            servers,
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

    /// A server of the sweep started on these GPUs (its process group, for
    /// telling its processes from foreign ones).
    pub fn add_server(&self, pgid: u32, gpus: &[u32]) {
        if let Ok(mut s) = self.servers.lock() {
            if !s.contains(&pgid) {
                s.push(pgid);
            }
        }
        if let Some(sim) = &self.sim {
            sim.set(pgid, gpus, false);
        }
    }

    /// The server stopped.
    pub fn remove_server(&self, pgid: u32) {
        if let Ok(mut s) = self.servers.lock() {
            s.retain(|&g| g != pgid);
        }
        if let Some(sim) = &self.sim {
            sim.remove(pgid);
        }
    }

    /// A cell starts on a server's GPUs: its figures fold the samples of
    /// those GPUs until [`Telemetry::end_cell`].
    pub fn begin_cell(&self, cell: &str, pgid: u32, gpus: &[u32]) {
        if let Some(sim) = &self.sim {
            sim.busy(pgid, true);
        }
        if let Ok(mut s) = self.shared.lock() {
            s.cells
                .insert(cell.to_string(), CellGpuAgg::new(Some(gpus)));
        }
    }

    /// The cell ended: its peak memory and mean utilisation over the samples
    /// taken while it ran. A cell shorter than the sampling interval may have
    /// none: its figures are then null, never borrowed from another moment.
    pub fn end_cell(&self, cell: &str, pgid: u32) -> (Option<u64>, Option<f64>) {
        let result = match self.shared.lock() {
            Ok(mut s) => match s.cells.remove(cell) {
                Some(agg) => (agg.gpu_mem_peak_mib(), agg.gpu_util_mean()),
                None => (None, None),
            },
            Err(_) => (None, None),
        };
        if let Some(sim) = &self.sim {
            sim.busy(pgid, false);
        }
        result
    }
}
