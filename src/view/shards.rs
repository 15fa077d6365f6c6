//! A sweep directory's shards as its views read them: how many cells each
//! shard has left (`ls`, `slurm --resume`).

use std::path::Path;

use super::replay::cut_short;
use crate::plan::{Plan, Shard};
use crate::store;

/// Cells of shard `index` still to measure: those with no record yet, and
/// those whose failure the shard's last stop made (its resume measures them
/// again).
pub fn cells_left(plan: &Plan, count: u32, index: u32, shard_dir: &Path) -> usize {
    let Ok(shard) = Shard::new(index, count) else {
        return 0;
    };
    let part = plan.shard(shard);
    let results = store::read_results(shard_dir).unwrap_or_default();
    let cut = cut_short(&store::read_events(shard_dir), &results);
    part.cells
        .iter()
        .filter(|c| results.get(&c.id).is_none() || cut.contains(&c.id))
        .count()
}
