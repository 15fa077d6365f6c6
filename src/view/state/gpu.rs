//! GPU telemetry as shown: the latest sample and a short utilisation history
//! per GPU, and which running config each GPU belongs to.

use std::collections::{BTreeMap, VecDeque};

use super::{shown, ConfigRun, ViewState};
use crate::model::{GpuSnapshot, GpuStatus};

/// GPU samples kept for the sparklines.
pub const GPU_HISTORY: usize = 240;

/// A history of percentages per GPU index (None: not reported at that
/// sample), the last [`GPU_HISTORY`] samples.
pub type History = BTreeMap<u32, VecDeque<Option<u8>>>;

/// GPU telemetry as shown: the latest snapshot and a short history per GPU.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuView {
    pub latest: Option<GpuSnapshot>,
    /// Utilisation history per GPU index (None: not reported at that sample).
    pub util: History,
    /// Memory in use, % of the GPU's, history per GPU index.
    pub mem: History,
    /// Samples seen per GPU index since the start (the histories keep the
    /// last [`GPU_HISTORY`]): where a chart's columns begin, so they stay put
    /// as samples come.
    pub seen: BTreeMap<u32, u64>,
}

impl GpuView {
    pub fn status(&self) -> Option<&GpuStatus> {
        self.latest.as_ref().map(|s| &s.status)
    }
}

impl ViewState {
    /// A sample, unless a newer one is shown; its names made safe to show.
    pub(super) fn gpu_sample(&mut self, snap: &GpuSnapshot) {
        if self
            .gpu
            .latest
            .as_ref()
            .is_some_and(|l| l.at_ms > snap.at_ms)
        {
            return;
        }
        let mut snap = snap.clone();
        for g in &mut snap.gpus {
            shown(&mut g.name);
            g.processes.iter_mut().for_each(|p| shown(&mut p.name));
            let mem_pct = match (g.mem_used_mib, g.mem_total_mib) {
                (Some(u), Some(t)) if t > 0 => Some((u.saturating_mul(100) / t).min(100) as u8),
                _ => None,
            };
            *self.gpu.seen.entry(g.index).or_default() += 1;
            for (histories, value) in [
                (&mut self.gpu.util, g.util_pct.map(|u| u.min(100) as u8)),
                (&mut self.gpu.mem, mem_pct),
            ] {
                let h = histories.entry(g.index).or_default();
                if h.len() == GPU_HISTORY {
                    h.pop_front();
                }
                h.push_back(value);
            }
        }
        self.gpu.latest = Some(snap);
    }

    /// The GPUs the running configs use (all when one does not say).
    pub fn active_gpus(&self) -> Option<Vec<u32>> {
        self.live_configs().next()?;
        let mut all: Vec<u32> = self.live_configs().flat_map(|c| self.gpus_of(c)).collect();
        all.sort_unstable();
        all.dedup();
        Some(all)
    }

    /// The GPUs a config runs on: as the engine said, else its plan's list,
    /// else all.
    pub fn gpus_of(&self, c: &ConfigRun) -> Vec<u32> {
        if !c.gpus.is_empty() {
            return c.gpus.clone();
        }
        match self
            .plan
            .as_ref()
            .and_then(|p| p.config(&c.id))
            .and_then(|p| p.gpus.clone())
        {
            Some(g) => g,
            None => self
                .gpu
                .latest
                .as_ref()
                .map(|s| s.gpus.iter().map(|g| g.index).collect())
                .unwrap_or_default(),
        }
    }

    /// The running config a GPU belongs to.
    pub fn owner_of(&self, gpu: u32) -> Option<&str> {
        self.live_configs()
            .find(|c| self.gpus_of(c).contains(&gpu))
            .map(|c| c.id.as_str())
    }
}
