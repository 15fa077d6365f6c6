//! A sweep directory's shards seen as one: a single GPU panel of every
//! host's GPUs (grouped by host, numbered in that order and named with their
//! host, each config's GPUs renumbered to match, so the panel says which
//! config owns which), and how many cells each shard has left.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::model::{Event, GpuSnapshot};
use crate::plan::{Plan, Shard};
use crate::store::{sweep, tail::ShardGpu};

/// The shards' GPU samples, merged into one panel.
pub struct ShardGpus {
    dir: PathBuf,
    /// The latest GPU sample of each host that runs a shard.
    by_host: BTreeMap<String, GpuSnapshot>,
    /// The shard of each config (how the plan was split).
    shard_of: HashMap<String, u32>,
}

impl ShardGpus {
    pub fn new(dir: &Path, shard_of: HashMap<String, u32>) -> ShardGpus {
        ShardGpus {
            dir: dir.to_path_buf(),
            by_host: BTreeMap::new(),
            shard_of,
        }
    }

    /// Take the shards' newest samples (an older one than a host's last is
    /// passed over); every host's GPUs as one sample when any changed.
    pub fn update(&mut self, samples: Vec<ShardGpu>) -> Option<Event> {
        let mut changed = false;
        for ShardGpu { host, snapshot } in samples {
            if self
                .by_host
                .get(&host)
                .is_none_or(|s| s.at_ms <= snapshot.at_ms)
            {
                self.by_host.insert(host, snapshot);
                changed = true;
            }
        }
        changed
            .then(|| self.merged().map(|snapshot| Event::Gpu { snapshot }))
            .flatten()
    }

    /// Every host's GPUs as one sample, grouped by host (in host order), each
    /// GPU numbered in that order and named with its host.
    pub fn merged(&self) -> Option<GpuSnapshot> {
        let mut gpus = Vec::new();
        for (host, snap) in &self.by_host {
            for g in &snap.gpus {
                let mut g = g.clone();
                g.index = gpus.len() as u32;
                g.name = format!("{host} {}", g.name);
                gpus.push(g);
            }
        }
        let first = self.by_host.values().next()?;
        Some(GpuSnapshot {
            at_ms: self.by_host.values().map(|s| s.at_ms).max().unwrap_or(0),
            status: first.status.clone(),
            gpus,
        })
    }

    /// A config starting: its GPUs renumbered as the merged panel numbers
    /// those of the host its shard runs on. Any other event as it is.
    pub fn renumber(&self, mut ev: Event) -> Event {
        if let Event::ConfigStarting { config, gpus, .. } = &mut ev {
            let host = self.shard_of.get(config.as_str()).and_then(|&i| {
                sweep::read_heartbeat(&sweep::shard_dir(&self.dir, i)).map(|b| b.host)
            });
            let offset: Option<u32> = host.filter(|h| self.by_host.contains_key(h)).map(|h| {
                self.by_host
                    .range(..h)
                    .map(|(_, s)| s.gpus.len() as u32)
                    .sum()
            });
            if let Some(o) = offset {
                gpus.iter_mut().for_each(|g| *g += o);
            }
        }
        ev
    }
}

/// Cells of shard `index` still to measure (see [`super::replay::cells_left`]).
pub fn cells_left(plan: &Plan, count: u32, index: u32, shard_dir: &Path) -> usize {
    let Ok(shard) = Shard::new(index, count) else {
        return 0;
    };
    super::replay::cells_left(&plan.shard(shard), shard_dir).len()
}
