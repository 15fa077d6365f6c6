//! Per-cell GPU aggregates for the result line: `gpu_mem_peak_mib` and
//! `gpu_util_mean` over the snapshots taken while a cell ran.

use super::GpuSnapshot;

/// One snapshot's figures for a cell's GPUs, kept with its time so the
/// cell's figures can be taken over the window its requests were measured in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplePoint {
    /// When it was sampled (Unix ms): the GPU's figures over the interval
    /// before.
    pub at_ms: u64,
    mem_peak_mib: Option<u64>,
    util_sum: f64,
    util_count: u64,
}

/// Folds snapshots over a cell's time window for the config's GPUs.
///
/// - `gpu_mem_peak_mib`: the highest used MiB of any one of those GPUs in any sample.
/// - `gpu_util_mean`: the mean utilisation over every (sample, GPU) pair that had one.
///
/// Both are `None` when no sample carried that metric for those GPUs.
#[derive(Debug, Clone, PartialEq)]
pub struct CellGpuAgg {
    gpus: Option<Vec<u32>>,
    mem_peak_mib: Option<u64>,
    util_sum: f64,
    util_count: u64,
    samples: u64,
}

impl CellGpuAgg {
    /// `gpus`: the config's GPU indices, `None` for all GPUs in each snapshot.
    pub fn new(gpus: Option<&[u32]>) -> CellGpuAgg {
        CellGpuAgg {
            gpus: gpus.map(<[u32]>::to_vec),
            mem_peak_mib: None,
            util_sum: 0.0,
            util_count: 0,
            samples: 0,
        }
    }

    /// Aggregates over the snapshots taken in `[start_ms, end_ms]`.
    pub fn over_window<'a>(
        gpus: Option<&[u32]>,
        snapshots: impl IntoIterator<Item = &'a GpuSnapshot>,
        start_ms: u64,
        end_ms: u64,
    ) -> CellGpuAgg {
        let mut agg = CellGpuAgg::new(gpus);
        for snap in snapshots {
            if (start_ms..=end_ms).contains(&snap.at_ms) {
                agg.add(snap);
            }
        }
        agg
    }

    pub fn add(&mut self, snap: &GpuSnapshot) {
        if let Some(p) = self.point(snap) {
            self.add_point(&p);
        }
    }

    /// One snapshot's figures for these GPUs, with its time; `None` when it
    /// carried none for them.
    pub fn point(&self, snap: &GpuSnapshot) -> Option<SamplePoint> {
        let mut p = SamplePoint {
            at_ms: snap.at_ms,
            mem_peak_mib: None,
            util_sum: 0.0,
            util_count: 0,
        };
        let mut had_data = false;
        for gpu in &snap.gpus {
            if let Some(set) = &self.gpus {
                if !set.contains(&gpu.index) {
                    continue;
                }
            }
            if let Some(used) = gpu.mem_used_mib {
                p.mem_peak_mib = Some(p.mem_peak_mib.map_or(used, |peak| peak.max(used)));
                had_data = true;
            }
            if let Some(util) = gpu.util_pct {
                p.util_sum += f64::from(util);
                p.util_count += 1;
                had_data = true;
            }
        }
        had_data.then_some(p)
    }

    pub fn add_point(&mut self, p: &SamplePoint) {
        if let Some(used) = p.mem_peak_mib {
            self.mem_peak_mib = Some(self.mem_peak_mib.map_or(used, |peak| peak.max(used)));
        }
        self.util_sum += p.util_sum;
        self.util_count += p.util_count;
        self.samples += 1;
    }

    /// Snapshots that carried any data for the selected GPUs.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    pub fn gpu_mem_peak_mib(&self) -> Option<u64> {
        self.mem_peak_mib
    }

    pub fn gpu_util_mean(&self) -> Option<f64> {
        (self.util_count > 0).then(|| self.util_sum / self.util_count as f64)
    }
}
