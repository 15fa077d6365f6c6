//! What preflight asks of a snapshot: who else holds memory on a config's GPUs, and whether our own server left anything behind.

use super::{GpuProcess, GpuSnapshot};

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
