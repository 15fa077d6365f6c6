//! Which GPUs a config gets: its own list, the free ones picked for
//! `server.gpus = "auto:N"`, or (saying nothing) all of them; and whether it
//! can start now beside the configs already running.

use crate::model::Failure;
use crate::model::{GpuSnapshot, GpuStatus};
use crate::plan::Config;

/// Memory in use on a GPU no process of ours holds above which it is taken
/// (another user's job, or a process NVML does not list).
const BUSY_MIB: u64 = 2048;

/// Where a config may run.
#[derive(Debug, PartialEq)]
pub(super) enum Place {
    /// On these GPUs, now.
    Now(Vec<u32>),
    /// Not beside what runs now; when something ends.
    Later,
    /// Never on this machine.
    Never(Failure),
}

/// `held`: the GPUs of the configs running now (an empty list for one that
/// takes them all). `snapshot`: what the GPUs look like (`None`: no telemetry).
pub(super) fn place(config: &Config, held: &[Vec<u32>], snapshot: Option<&GpuSnapshot>) -> Place {
    let in_use = |g: &u32| held.iter().any(|h| h.is_empty() || h.contains(g));
    let all: Vec<u32> =
        snapshot.map_or_else(Vec::new, |s| s.gpus.iter().map(|g| g.index).collect());
    match (&config.gpus, config.gpu_count) {
        (Some(list), _) => {
            if let Some(missing) = missing_gpus(list, snapshot) {
                return Place::Never(super::preflight::failure(missing.to_string()));
            }
            if list.iter().any(in_use) {
                Place::Later
            } else {
                Place::Now(list.clone())
            }
        }
        (None, Some(n)) => {
            let Some(snap) = snapshot else {
                return Place::Never(super::preflight::failure(format!(
                    "server.gpus = \"auto:{n}\" picks free GPUs by what NVML shows, and GPU telemetry is off (--no-gpu, or no NVML): give the GPUs as a list"
                )));
            };
            if n as usize > all.len() {
                return Place::Never(super::preflight::failure(format!(
                    "server.gpus = \"auto:{n}\" but this machine shows {} GPU{}",
                    all.len(),
                    if all.len() == 1 { "" } else { "s" }
                )));
            }
            let free: Vec<u32> = snap
                .gpus
                .iter()
                .filter(|g| !in_use(&g.index) && !taken(g))
                .map(|g| g.index)
                .take(n as usize)
                .collect();
            if free.len() == n as usize {
                Place::Now(free)
            } else {
                Place::Later
            }
        }
        // Every GPU: alone.
        (None, None) if held.is_empty() => Place::Now(all),
        (None, None) => Place::Later,
    }
}

/// Why a config's own list of GPUs cannot run here: it names GPUs the
/// machine does not have, as NVML (or the simulated GPUs) shows them. `None`
/// when every one is there, or when nothing shows the GPUs (no telemetry,
/// no NVML): then the list is the user's word.
pub fn missing_gpus(list: &[u32], snapshot: Option<&GpuSnapshot>) -> Option<MissingGpus> {
    let snap = snapshot?;
    if !matches!(snap.status, GpuStatus::Nvml { .. } | GpuStatus::Simulated) {
        return None;
    }
    let missing: Vec<u32> = list
        .iter()
        .copied()
        .filter(|g| !snap.gpus.iter().any(|s| s.index == *g))
        .collect();
    let shown = snap.gpus.len();
    (!missing.is_empty()).then_some(MissingGpus { missing, shown })
}

/// GPUs a config names that this machine does not show.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "server.gpus names GPU {} but this machine shows {shown} GPU{}",
    list(missing),
    if *shown == 1 { "" } else { "s" }
)]
pub struct MissingGpus {
    pub missing: Vec<u32>,
    /// How many GPUs the machine shows.
    pub shown: usize,
}

fn list(gpus: &[u32]) -> String {
    let words: Vec<String> = gpus.iter().map(u32::to_string).collect();
    words.join(", ")
}

/// A GPU someone else uses: a process not ours, or memory no process of ours holds.
fn taken(g: &crate::model::GpuSample) -> bool {
    g.processes.iter().any(|p| !p.ours && p.used_mib != Some(0))
        || g.mem_used_mib.is_some_and(|m| m > BUSY_MIB)
}

/// Why a config that waited for free GPUs with nothing else running got none.
pub(super) fn none_free(config: &Config, snapshot: Option<&GpuSnapshot>) -> Failure {
    let busy: Vec<String> = snapshot
        .map(|s| {
            s.gpus
                .iter()
                .filter(|g| taken(g))
                .map(|g| {
                    format!(
                        "GPU {} ({} MiB used)",
                        g.index,
                        g.mem_used_mib.map_or_else(|| "?".into(), |m| m.to_string())
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    super::preflight::failure(format!(
        "no {} free GPU{} for {}: other processes hold {}",
        config.gpu_count.unwrap_or(1),
        if config.gpu_count == Some(1) { "" } else { "s" },
        config.id,
        if busy.is_empty() {
            "them".to_string()
        } else {
            busy.join(", ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GpuSample;

    fn snap(mem: &[u64]) -> GpuSnapshot {
        GpuSnapshot {
            at_ms: 0,
            status: GpuStatus::Simulated,
            gpus: mem
                .iter()
                .enumerate()
                .map(|(i, &m)| GpuSample {
                    index: i as u32,
                    name: "gpu".into(),
                    util_pct: Some(0),
                    mem_used_mib: Some(m),
                    mem_total_mib: Some(143_771),
                    temp_c: None,
                    power_w: None,
                    power_limit_w: None,
                    sm_clock_mhz: None,
                    processes: Vec::new(),
                })
                .collect(),
        }
    }

    fn config(gpus: Option<Vec<u32>>, count: Option<u32>) -> Config {
        let plan = crate::plan::Plan::parse(
            std::path::Path::new(crate::plan::DEMO_PATH),
            crate::plan::DEMO_PLAN,
        )
        .unwrap();
        Config {
            gpus,
            gpu_count: count,
            ..plan.configs[0].clone()
        }
    }

    #[test]
    fn a_list_waits_for_its_own_gpus_only() {
        let c = config(Some(vec![2, 3]), None);
        let s = snap(&[0; 8]);
        assert_eq!(place(&c, &[vec![0, 1]], Some(&s)), Place::Now(vec![2, 3]));
        assert_eq!(place(&c, &[vec![3]], Some(&s)), Place::Later);
        // One that takes every GPU blocks everything.
        assert_eq!(place(&c, &[vec![]], Some(&s)), Place::Later);
    }

    #[test]
    fn auto_picks_the_lowest_free_gpus_and_leaves_taken_ones() {
        let c = config(None, Some(2));
        // GPU 1 holds 40 GB of someone else's.
        let s = snap(&[0, 40_000, 0, 0, 0]);
        assert_eq!(place(&c, &[vec![0]], Some(&s)), Place::Now(vec![2, 3]));
        assert_eq!(place(&c, &[vec![0, 2, 3]], Some(&s)), Place::Later);
        assert!(matches!(
            place(&config(None, Some(8)), &[], Some(&s)),
            Place::Never(_)
        ));
        assert!(matches!(place(&c, &[], None), Place::Never(_)));
        assert!(none_free(&c, Some(&s))
            .message
            .contains("GPU 1 (40000 MiB used)"));
    }

    #[test]
    fn a_list_naming_a_gpu_the_machine_lacks_never_runs() {
        let s = snap(&[0; 2]);
        let Place::Never(f) = place(&config(Some(vec![5]), None), &[], Some(&s)) else {
            panic!("GPU 5 on a 2-GPU machine was placed");
        };
        assert!(
            f.message.contains("GPU 5") && f.message.contains("2 GPUs"),
            "{}",
            f.message
        );
        assert!(matches!(
            place(&config(Some(vec![1, 2]), None), &[], Some(&s)),
            Place::Never(_)
        ));
        assert_eq!(
            place(&config(Some(vec![1]), None), &[], Some(&s)),
            Place::Now(vec![1])
        );
        // Nothing shows the GPUs: the list is taken as given.
        assert_eq!(
            place(&config(Some(vec![5]), None), &[], None),
            Place::Now(vec![5])
        );
        let mut off = s.clone();
        off.status = GpuStatus::LibraryNotFound { detail: "x".into() };
        assert_eq!(
            place(&config(Some(vec![5]), None), &[], Some(&off)),
            Place::Now(vec![5])
        );
    }

    #[test]
    fn saying_nothing_means_every_gpu_alone() {
        let c = config(None, None);
        let s = snap(&[0; 4]);
        assert_eq!(place(&c, &[], Some(&s)), Place::Now(vec![0, 1, 2, 3]));
        assert_eq!(place(&c, &[vec![1]], Some(&s)), Place::Later);
    }
}
