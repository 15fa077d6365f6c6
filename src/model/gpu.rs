//! What GPU telemetry reports: one [`GpuSnapshot`] per sample, with a
//! [`GpuSample`] per GPU. Every metric is optional: `None` is N/A (not supported
//! by the card, or the call failed). Kept in `gpu.jsonl` and sent as events.

use serde::{Deserialize, Serialize};

use super::Timestamp;

/// One GPU at one instant. `None` means N/A: not supported by the card or the call failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    /// NVML device index (PCI bus order).
    pub index: u32,
    pub name: String,
    pub util_pct: Option<u32>,
    pub mem_used_mib: Option<u64>,
    pub mem_total_mib: Option<u64>,
    pub temp_c: Option<u32>,
    pub power_w: Option<f64>,
    pub power_limit_w: Option<f64>,
    pub sm_clock_mhz: Option<u32>,
    pub processes: Vec<GpuProcess>,
}

impl GpuSample {
    /// A GPU we know exists but could not read anything from.
    pub fn unknown(index: u32) -> GpuSample {
        GpuSample {
            index,
            name: "unknown".to_string(),
            util_pct: None,
            mem_used_mib: None,
            mem_total_mib: None,
            temp_c: None,
            power_w: None,
            power_limit_w: None,
            sm_clock_mhz: None,
            processes: Vec::new(),
        }
    }
}

/// A compute process holding a context on a GPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// From /proc/PID/comm; "?" when that is unreadable (another PID namespace, gone).
    pub name: String,
    /// `None` when the driver does not report it (e.g. some containers, WDDM).
    pub used_mib: Option<u64>,
    /// Whether the pid belongs to the sweep's server process group.
    pub ours: bool,
}

/// Where telemetry comes from and whether it works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum GpuStatus {
    Nvml {
        driver: Option<String>,
        /// The CUDA version the driver supports (`12.4`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cuda: Option<String>,
    },
    Simulated,
    Disabled,
    LibraryNotFound {
        detail: String,
    },
    DriverNotLoaded {
        detail: String,
    },
    NoGpus,
    Error {
        detail: String,
    },
}

impl GpuStatus {
    /// The one-line state shown above the GPU panel and by `sweeptop gpus`.
    pub fn label(&self) -> String {
        match self {
            GpuStatus::Nvml {
                driver: Some(driver),
                ..
            } => format!("NVML (driver {driver})"),
            GpuStatus::Nvml { driver: None, .. } => "NVML".to_string(),
            GpuStatus::Simulated => "simulated".to_string(),
            GpuStatus::Disabled => "GPU telemetry off (--no-gpu)".to_string(),
            GpuStatus::LibraryNotFound { detail } => format!("NVML not found: {detail}"),
            GpuStatus::DriverNotLoaded { .. } => "NVIDIA driver not loaded".to_string(),
            GpuStatus::NoGpus => "no GPUs".to_string(),
            GpuStatus::Error { detail } => format!("NVML error: {detail}"),
        }
    }

    /// True when the snapshot's GPU list reflects real (or simulated) devices.
    pub fn is_live(&self) -> bool {
        matches!(self, GpuStatus::Nvml { .. } | GpuStatus::Simulated)
    }
}

/// Everything sampled at one instant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuSnapshot {
    /// Unix time in milliseconds when the sample was taken.
    pub at_ms: u64,
    pub status: GpuStatus,
    pub gpus: Vec<GpuSample>,
}

impl GpuSnapshot {
    /// A snapshot stamped with the current time.
    pub fn now(status: GpuStatus, gpus: Vec<GpuSample>) -> GpuSnapshot {
        GpuSnapshot {
            at_ms: u64::try_from(Timestamp::now().unix_ms()).unwrap_or(0),
            status,
            gpus,
        }
    }

    pub fn gpu(&self, index: u32) -> Option<&GpuSample> {
        self.gpus.iter().find(|g| g.index == index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_serialises_with_a_state_tag() {
        let json = serde_json::to_string(&GpuStatus::Nvml {
            driver: Some("550.54.15".into()),
            cuda: None,
        })
        .unwrap();
        assert_eq!(json, r#"{"state":"nvml","driver":"550.54.15"}"#);
        let json = serde_json::to_string(&GpuStatus::NoGpus).unwrap();
        assert_eq!(json, r#"{"state":"no_gpus"}"#);
        let back: GpuStatus =
            serde_json::from_str(r#"{"state":"driver_not_loaded","detail":"x"}"#).unwrap();
        assert_eq!(back, GpuStatus::DriverNotLoaded { detail: "x".into() });
    }

    #[test]
    fn labels_read_as_states() {
        let nvml = GpuStatus::Nvml {
            driver: Some("550.54".into()),
            cuda: None,
        };
        assert_eq!(nvml.label(), "NVML (driver 550.54)");
        assert_eq!(GpuStatus::Disabled.label(), "GPU telemetry off (--no-gpu)");
        let missing = GpuStatus::LibraryNotFound {
            detail: "libnvidia-ml.so.1: cannot open".into(),
        };
        assert_eq!(
            missing.label(),
            "NVML not found: libnvidia-ml.so.1: cannot open"
        );
        assert_eq!(GpuStatus::NoGpus.label(), "no GPUs");
    }
}
