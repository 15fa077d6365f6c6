//! GPU telemetry: per-GPU utilisation, memory, temperature, power, clocks and
//! compute processes, from NVML, from a simulation (demo and tests), or not at all.
//!
//! Sampling runs on its own OS thread ([`spawn_sampler`]) that owns the NVML handle,
//! so a slow driver call never blocks the async runtime. Every metric is optional:
//! a metric the card does not support, or a call that fails, is `None` ("N/A") and
//! never fails the whole snapshot. NVML missing or the driver not loaded is a
//! [`GpuStatus`] to show, not an error to exit on.
//!
//! The snapshot types are in [`crate::model`]. The rest of the crate reads
//! snapshots through [`Telemetry`] (a sweep's sampler, per-cell
//! `gpu_mem_peak_mib` / `gpu_util_mean`), the preflight helpers
//! ([`foreign_processes`], [`own_leftovers`]) and [`render_table`] (`sweeptop gpus`).

mod agg;
mod nvml;
mod preflight;
mod sampler;
mod sim;
mod table;
mod telemetry;

use std::path::PathBuf;

use crate::model::{GpuProcess, GpuSample, GpuSnapshot, GpuStatus};

pub use agg::{CellGpuAgg, SamplePoint};
pub use preflight::{foreign_processes, own_leftovers};
pub use sampler::{sample_once, spawn_sampler, Sampler, MIN_INTERVAL};
pub use sim::SimGpus;
pub use table::render_table;
pub use telemetry::Telemetry;

/// Where the sampler reads from.
#[derive(Debug, Clone)]
pub enum GpuSource {
    /// The NVIDIA Management Library; `lib_path` overrides the default
    /// `libnvidia-ml.so.1` lookup (used by tests with the fake library).
    Nvml { lib_path: Option<PathBuf> },
    /// Plausible figures driven by the engine through [`SimGpus::set`].
    Simulated(SimGpus),
    /// `--no-gpu`: snapshots carry [`GpuStatus::Disabled`] and no GPUs.
    Disabled,
}

/// The process name as the kernel knows it, or "?" when it cannot be read
/// (gone, or in another PID namespace).
fn process_name(pid: u32) -> String {
    i32::try_from(pid)
        .ok()
        .and_then(|pid| procfs::process::Process::new(pid).ok())
        .and_then(|p| p.stat().ok())
        .map(|s| s.comm)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "?".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_name_is_read_from_proc() {
        let name = process_name(std::process::id());
        assert_ne!(name, "?");
        assert_eq!(process_name(u32::MAX), "?");
    }
}
