//! The NVML source: one `Nvml` handle, opened lazily and reopened after failures,
//! read into [`GpuSample`]s with every metric optional.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::{Device, Nvml};

use super::{process_name, GpuProcess, GpuSample, GpuStatus};

/// How long to wait before trying `nvmlInit` again after it failed: the driver may
/// be loaded later, but retrying every sample would just spin.
const INIT_RETRY: Duration = Duration::from_secs(5);

/// More devices than any machine has: a guard against a garbage count.
const MAX_DEVICES: u32 = 1024;

const MIB: u64 = 1024 * 1024;

/// An NVML session owned by one thread.
pub(crate) struct NvmlProbe {
    lib_path: Option<PathBuf>,
    nvml: Option<Nvml>,
    driver: Option<String>,
    cuda: Option<String>,
    /// The status from the last failed init and when to try again.
    failed: Option<(GpuStatus, Instant)>,
}

impl NvmlProbe {
    pub(crate) fn new(lib_path: Option<PathBuf>) -> NvmlProbe {
        NvmlProbe {
            lib_path,
            nvml: None,
            driver: None,
            cuda: None,
            failed: None,
        }
    }

    pub(crate) fn sample(&mut self, ours: &dyn Fn(u32) -> bool) -> (GpuStatus, Vec<GpuSample>) {
        if self.nvml.is_none() {
            if let Some((status, retry_at)) = &self.failed {
                if Instant::now() < *retry_at {
                    return (status.clone(), Vec::new());
                }
            }
            match self.open() {
                Ok(nvml) => {
                    self.driver = nvml.sys_driver_version().ok();
                    // 12040 → 12.4
                    self.cuda = nvml
                        .sys_cuda_driver_version()
                        .ok()
                        .map(|v| format!("{}.{}", v / 1000, (v % 1000) / 10));
                    self.nvml = Some(nvml);
                    self.failed = None;
                }
                Err(status) => {
                    self.failed = Some((status.clone(), Instant::now() + INIT_RETRY));
                    return (status, Vec::new());
                }
            }
        }
        let Some(nvml) = self.nvml.as_ref() else {
            return (
                GpuStatus::Error {
                    detail: "NVML handle missing".to_string(),
                },
                Vec::new(),
            );
        };
        match nvml.device_count() {
            Ok(0) => (GpuStatus::NoGpus, Vec::new()),
            Ok(count) => {
                let gpus = (0..count.min(MAX_DEVICES))
                    .map(|index| sample_device(nvml, index, ours))
                    .collect();
                (
                    GpuStatus::Nvml {
                        driver: self.driver.clone(),
                        cuda: self.cuda.clone(),
                    },
                    gpus,
                )
            }
            Err(err) => {
                // The handle may be stale (driver reloaded, GPU lost): drop it and
                // open a fresh one on a later sample.
                let status = GpuStatus::Error {
                    detail: format!("device count: {err}"),
                };
                self.nvml = None;
                self.failed = Some((status.clone(), Instant::now() + INIT_RETRY));
                (status, Vec::new())
            }
        }
    }

    fn open(&self) -> Result<Nvml, GpuStatus> {
        let result = match &self.lib_path {
            Some(path) => Nvml::builder().lib_path(path.as_os_str()).init(),
            None => Nvml::init(),
        };
        result.map_err(|err| init_error_status(&err, self.lib_path.as_ref()))
    }
}

fn init_error_status(err: &NvmlError, lib_path: Option<&PathBuf>) -> GpuStatus {
    let lib = lib_path
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "libnvidia-ml.so.1".to_string());
    match err {
        NvmlError::LibloadingError(e) => GpuStatus::LibraryNotFound {
            detail: e.to_string(),
        },
        NvmlError::LibraryNotFound => GpuStatus::LibraryNotFound {
            detail: format!("{lib}: {err}"),
        },
        NvmlError::FailedToLoadSymbol(e) => GpuStatus::LibraryNotFound {
            detail: format!("{lib} is not a usable NVML library ({e})"),
        },
        NvmlError::DriverNotLoaded => GpuStatus::DriverNotLoaded {
            detail: err.to_string(),
        },
        other => GpuStatus::Error {
            detail: format!("init: {other}"),
        },
    }
}

/// Reads one device; any metric that fails is `None`. A panic inside the wrapper
/// (it does arithmetic on driver-supplied counts) costs this sample, not the thread.
fn sample_device(nvml: &Nvml, index: u32, ours: &dyn Fn(u32) -> bool) -> GpuSample {
    let device = match nvml.device_by_index(index) {
        Ok(device) => device,
        Err(_) => return GpuSample::unknown(index),
    };
    catch_unwind(AssertUnwindSafe(|| read_device(&device, index, ours)))
        .unwrap_or_else(|_| GpuSample::unknown(index))
}

fn read_device(device: &Device<'_>, index: u32, ours: &dyn Fn(u32) -> bool) -> GpuSample {
    let memory = device.memory_info().ok();
    GpuSample {
        index,
        name: device.name().unwrap_or_else(|_| "unknown".to_string()),
        util_pct: device.utilization_rates().ok().map(|u| u.gpu),
        mem_used_mib: memory.as_ref().map(|m| m.used / MIB),
        mem_total_mib: memory.as_ref().map(|m| m.total / MIB),
        temp_c: device.temperature(TemperatureSensor::Gpu).ok(),
        power_w: device.power_usage().ok().map(milliwatts_to_watts),
        power_limit_w: device.enforced_power_limit().ok().map(milliwatts_to_watts),
        sm_clock_mhz: device.clock_info(Clock::SM).ok(),
        processes: read_processes(device, ours),
    }
}

fn read_processes(device: &Device<'_>, ours: &dyn Fn(u32) -> bool) -> Vec<GpuProcess> {
    let infos = device.running_compute_processes().unwrap_or_default();
    let mut processes: Vec<GpuProcess> = Vec::with_capacity(infos.len());
    for info in infos {
        let used_mib = match info.used_gpu_memory {
            UsedGpuMemory::Used(bytes) => Some(bytes / MIB),
            UsedGpuMemory::Unavailable => None,
        };
        // With MIG a process shows once per instance: one row per pid, memory summed.
        if let Some(seen) = processes.iter_mut().find(|p| p.pid == info.pid) {
            seen.used_mib = match (seen.used_mib, used_mib) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                (a, b) => a.or(b),
            };
            continue;
        }
        processes.push(GpuProcess {
            pid: info.pid,
            name: process_name(info.pid),
            used_mib,
            ours: ours(info.pid),
        });
    }
    processes
}

fn milliwatts_to_watts(mw: u32) -> f64 {
    f64::from(mw) / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_maps_to_library_not_found() {
        let mut probe = NvmlProbe::new(Some(PathBuf::from("/nonexistent/libnvidia-ml.so.1")));
        let (status, gpus) = probe.sample(&|_| false);
        assert!(gpus.is_empty());
        match status {
            GpuStatus::LibraryNotFound { detail } => {
                assert!(
                    detail.contains("/nonexistent/libnvidia-ml.so.1"),
                    "{detail}"
                )
            }
            other => panic!("expected LibraryNotFound, got {other:?}"),
        }
        // A second sample inside the retry window answers from the remembered failure.
        let (again, _) = probe.sample(&|_| false);
        assert!(matches!(again, GpuStatus::LibraryNotFound { .. }));
    }

    #[test]
    fn driver_errors_map_to_states() {
        assert!(matches!(
            init_error_status(&NvmlError::DriverNotLoaded, None),
            GpuStatus::DriverNotLoaded { .. }
        ));
        assert!(matches!(
            init_error_status(&NvmlError::NoPermission, None),
            GpuStatus::Error { .. }
        ));
        assert_eq!(milliwatts_to_watts(612_345), 612.345);
    }
}
