//! What preflight asks of a snapshot: which GPUs a config may use, who else holds
//! memory on them, and whether our own server left anything behind.

use super::{GpuProcess, GpuSnapshot};

/// Parses `CUDA_VISIBLE_DEVICES`. `Some(list)` is the device indices (empty for ""
/// or "-1": no GPU visible); `None` means the value names devices by UUID or MIG id
/// (or is otherwise unreadable), so the caller should assume every GPU.
///
/// Like CUDA, the list ends at the first negative or empty entry; duplicates count
/// once. The indices are CUDA's, which match NVML's only with
/// `CUDA_DEVICE_ORDER=PCI_BUS_ID` (what servers in a sweep normally set).
pub fn parse_visible_devices(value: &str) -> Option<Vec<u32>> {
    let mut devices = Vec::new();
    for entry in value.trim().split(',') {
        let entry = entry.trim();
        if entry.is_empty() {
            break;
        }
        match entry.parse::<i64>() {
            Ok(n) if n < 0 => break,
            Ok(n) => {
                let index = u32::try_from(n).ok()?;
                if !devices.contains(&index) {
                    devices.push(index);
                }
            }
            // "GPU-8f3c…", "MIG-…", or something we cannot map to an index.
            Err(_) => return None,
        }
    }
    Some(devices)
}

/// Compute processes that are not the sweep's and hold memory on the given GPUs
/// (`None` = all GPUs). A process whose memory the driver does not report counts:
/// we cannot tell it is harmless.
pub fn foreign_processes(snap: &GpuSnapshot, gpus: Option<&[u32]>) -> Vec<(u32, GpuProcess)> {
    processes_on(snap, gpus, |p| !p.ours && p.used_mib != Some(0))
}

/// The sweep's own processes still present on the given GPUs (`None` = all): what a
/// server that was told to stop left behind.
pub fn own_leftovers(snap: &GpuSnapshot, gpus: Option<&[u32]>) -> Vec<(u32, GpuProcess)> {
    processes_on(snap, gpus, |p| p.ours)
}

fn processes_on(
    snap: &GpuSnapshot,
    gpus: Option<&[u32]>,
    keep: impl Fn(&GpuProcess) -> bool,
) -> Vec<(u32, GpuProcess)> {
    snap.gpus
        .iter()
        .filter(|g| match gpus {
            Some(set) => set.contains(&g.index),
            None => true,
        })
        .flat_map(|g| {
            g.processes
                .iter()
                .filter(|p| keep(p))
                .map(move |p| (g.index, p.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_devices() {
        assert_eq!(parse_visible_devices("0,1,2,3"), Some(vec![0, 1, 2, 3]));
        assert_eq!(parse_visible_devices(" 2, 5 "), Some(vec![2, 5]));
        assert_eq!(parse_visible_devices(""), Some(vec![]));
        assert_eq!(parse_visible_devices("-1"), Some(vec![]));
        assert_eq!(parse_visible_devices("0,1,-1,2"), Some(vec![0, 1]));
        assert_eq!(parse_visible_devices("1,1,0"), Some(vec![1, 0]));
        assert_eq!(
            parse_visible_devices("GPU-8f3c2a1b-0000-1111-2222-333344445555"),
            None
        );
        assert_eq!(parse_visible_devices("MIG-GPU-8f3c/1/0"), None);
        assert_eq!(parse_visible_devices("0,GPU-8f3c"), None);
    }
}
