//! GPU telemetry for a sweep: runs the sampler, publishes snapshots as events,
//! hands each to a keeper (the run directory's `gpu.jsonl`) and folds the
//! samples of the running cell into its `gpu_mem_peak_mib` / `gpu_util_mean`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::broadcast;

use super::{spawn_sampler, CellGpuAgg, GpuSnapshot, GpuSource, SamplePoint, Sampler, SimGpus};
use crate::model::{Event, Timestamp};

struct Shared {
    latest: Option<GpuSnapshot>,
    /// The running cells (several when configs run side by side), each
    /// folding the samples of its own GPUs.
    cells: HashMap<String, CellSamples>,
}

/// A running cell's samples of its GPUs: each kept with its time (a few
/// dozen bytes a sample), so its figures can be taken over the windows its
/// requests were measured in.
struct CellSamples {
    /// Which GPUs, and everything folded (the figures when no window is
    /// known).
    all: CellGpuAgg,
    points: Vec<SamplePoint>,
}

/// The samples whose interval's middle (`half` ms before each) falls in one
/// of `windows`.
fn over_windows(points: &[SamplePoint], windows: &[(u64, u64)], half: u64) -> CellGpuAgg {
    let mut agg = CellGpuAgg::new(None);
    for p in points {
        let middle = p.at_ms.saturating_sub(half);
        if windows.iter().any(|&(a, b)| (a..=b).contains(&middle)) {
            agg.add_point(p);
        }
    }
    agg
}

/// The most samples a cell keeps with their times (a day at 500 ms); past
/// it the cell's figures are over every sample.
const MOST_POINTS: usize = 172_800;

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
                for c in s.cells.values_mut() {
                    if let Some(p) = c.all.point(&snap) {
                        c.all.add_point(&p);
                        if c.points.len() < MOST_POINTS {
                            c.points.push(p);
                        }
                    }
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
            s.cells.insert(
                cell.to_string(),
                CellSamples {
                    all: CellGpuAgg::new(Some(gpus)),
                    points: Vec::new(),
                },
            );
        }
    }

    /// The cell ended: its peak memory and mean utilisation over the samples
    /// of its measured requests' `windows` (Unix ms; none given: every
    /// sample while it ran). A sample stands for the interval before it, so
    /// it counts when that interval's middle is in a window. A window
    /// shorter than the sampling interval may have none: its figures are
    /// then null, never borrowed from another moment.
    pub fn end_cell(
        &self,
        cell: &str,
        pgid: u32,
        windows: &[(u64, u64)],
    ) -> (Option<u64>, Option<f64>) {
        let every = self.interval.max(super::MIN_INTERVAL);
        let half = u64::try_from(every.as_millis() / 2).unwrap_or(0);
        let result = match self.shared.lock() {
            Ok(mut s) => match s.cells.remove(cell) {
                Some(c) if windows.is_empty() || c.points.len() >= MOST_POINTS => {
                    (c.all.gpu_mem_peak_mib(), c.all.gpu_util_mean())
                }
                Some(c) => {
                    let agg = over_windows(&c.points, windows, half);
                    (agg.gpu_mem_peak_mib(), agg.gpu_util_mean())
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GpuSample, GpuStatus};

    /// A cell at concurrency 8 as seen on an H200: ~1 s with the GPU idle
    /// (prompts, warm-up) before its requests ran it at ~89 %. Its figures
    /// are those of the requests' window, not the cell's (44 % there).
    #[test]
    fn gpu_figures_are_over_the_measured_window() {
        let all = CellGpuAgg::new(Some(&[0]));
        let at = |ms: u64, util: u32, mem: u64| {
            let mut g = GpuSample::unknown(0);
            (g.util_pct, g.mem_used_mib) = (Some(util), Some(mem));
            let mut snap = GpuSnapshot::now(GpuStatus::Simulated, vec![g]);
            snap.at_ms = ms;
            all.point(&snap).unwrap()
        };
        let points = [
            at(500, 0, 1000),
            at(1000, 0, 1000),
            at(1500, 90, 60_000),
            at(2000, 88, 61_000),
            at(2500, 89, 61_000),
            at(3000, 0, 2000),
        ];
        // Requests measured from 1,100 to 2,600 ms; samples every 500 ms.
        let agg = over_windows(&points, &[(1100, 2600)], 250);
        assert_eq!(agg.samples(), 3);
        assert_eq!(agg.gpu_util_mean(), Some(89.0));
        assert_eq!(agg.gpu_mem_peak_mib(), Some(61_000));
        // Two repetitions: both windows, nothing between them.
        let agg = over_windows(&points, &[(1100, 1400), (2100, 2400)], 250);
        assert_eq!(agg.samples(), 2);
        assert_eq!(agg.gpu_util_mean(), Some(89.5));
        // A window shorter than the interval, holding no sample's middle.
        assert_eq!(over_windows(&points, &[(1300, 1350)], 250).samples(), 0);
    }
}
