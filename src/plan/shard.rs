//! Splitting a plan's configs into shards that run on different machines
//! (`sweeptop run PLAN --shard i/N`, one Slurm array task each).
//!
//! The split is deterministic and gives every config to exactly one shard. It
//! balances the estimated GPU time: a config's estimate is the GPUs it uses
//! times the tokens its cells move (requests × (prompt + output tokens), per
//! repetition), and configs are dealt longest first, each to the shard with
//! the least so far (ties: the lower shard; equal estimates keep plan order).
//! Inside a shard the configs keep the plan's order.

use std::fmt;
use std::str::FromStr;

use super::{Cell, Plan};

/// The most shards a plan may be split into.
pub const MAX_SHARDS: u32 = 10_000;

/// One shard of a plan: `index` of `count`, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// A shard that cannot be: a count or index out of range, or text that is
/// not `i/N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("shard count {count}: it must be 1 to {max}", max = MAX_SHARDS)]
    Count { count: u32 },
    #[error("shard {index}/{count}: the index runs from 1 to {count}")]
    Index { index: u32, count: u32 },
    #[error("shard `{0}`: write it as i/N, e.g. 2/4 (1-based)")]
    Syntax(String),
}

impl Shard {
    pub fn new(index: u32, count: u32) -> Result<Shard, ShardError> {
        if count == 0 || count > MAX_SHARDS {
            return Err(ShardError::Count { count });
        }
        if index == 0 || index > count {
            return Err(ShardError::Index { index, count });
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = ShardError;

    /// `i/N`, e.g. `2/4`.
    fn from_str(s: &str) -> Result<Shard, ShardError> {
        let bad = || ShardError::Syntax(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let i = i.trim().parse::<u32>().map_err(|_| bad())?;
        let n = n.trim().parse::<u32>().map_err(|_| bad())?;
        Shard::new(i, n)
    }
}

/// The estimated cost of one cell: tokens moved by its measured and warm-up
/// requests, over every repetition (at least 1).
pub fn cell_cost(plan: &Plan, cell: &Cell) -> u64 {
    let Some(w) = plan.workload(&cell.workload) else {
        return 1;
    };
    let requests = u64::from(w.requests) + u64::from(w.warmup);
    let tokens = cell.context_tokens.saturating_add(u64::from(w.max_tokens));
    requests
        .saturating_mul(tokens)
        .saturating_mul(u64::from(w.repeats.max(1)))
        .max(1)
}

/// The estimated GPU time of each config, in plan order: its GPUs (default 1)
/// times the cost of its cells.
pub fn config_costs(plan: &Plan) -> Vec<u64> {
    plan.configs
        .iter()
        .map(|c| {
            let gpus = c.gpus_wanted().unwrap_or(1).max(1) as u64;
            let cells = plan
                .cells_of(&c.id)
                .fold(0u64, |sum, cell| sum.saturating_add(cell_cost(plan, cell)));
            gpus.saturating_mul(cells.max(1))
        })
        .collect()
}

/// Which shard (0-based) each config goes to, in plan order: longest
/// processing time first onto the least loaded shard.
pub fn assign(costs: &[u64], count: u32) -> Vec<u32> {
    let count = count.max(1) as usize;
    let mut order: Vec<usize> = (0..costs.len()).collect();
    // Stable: equal costs keep plan order.
    order.sort_by_key(|&i| std::cmp::Reverse(costs[i]));
    let mut load = vec![0u64; count];
    let mut out = vec![0u32; costs.len()];
    for i in order {
        let (shard, _) = load
            .iter()
            .enumerate()
            .min_by_key(|&(s, l)| (*l, s))
            .unwrap_or((0, &0));
        load[shard] = load[shard].saturating_add(costs[i]);
        out[i] = shard as u32;
    }
    out
}

impl Plan {
    /// The plan with only `shard`'s configs, their cells, and the phases'
    /// config lists narrowed to them (phases left with no config are
    /// dropped). Everything else (name, limits, workloads, source) is the
    /// whole plan's, so ids and results are the same as an unsharded run's.
    pub fn shard(&self, shard: Shard) -> Plan {
        let owner = assign(&config_costs(self), shard.count);
        let mine: std::collections::HashSet<&str> = self
            .configs
            .iter()
            .zip(&owner)
            .filter(|(_, &s)| s + 1 == shard.index)
            .map(|(c, _)| c.id.as_str())
            .collect();
        let mut plan = self.clone();
        plan.configs.retain(|c| mine.contains(c.id.as_str()));
        plan.cells.retain(|c| mine.contains(c.config.as_str()));
        for phase in &mut plan.phases {
            phase.configs.retain(|c| mine.contains(c.as_str()));
        }
        plan.phases.retain(|p| !p.configs.is_empty());
        plan
    }

    /// The shard (1-based) each config of the plan runs in, in plan order.
    pub fn shard_of_configs(&self, count: u32) -> Vec<u32> {
        assign(&config_costs(self), count)
            .into_iter()
            .map(|s| s + 1)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn plan() -> Plan {
        Plan::parse(Path::new(super::super::DEMO_PATH), super::super::DEMO_PLAN).unwrap()
    }

    #[test]
    fn shards_are_read_and_checked() {
        assert_eq!("2/4".parse(), Ok(Shard { index: 2, count: 4 }));
        for bad in ["0/4", "5/4", "1/0", "x", "1/", "/2", "-1/3", "1/99999"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert!("5/4"
            .parse::<Shard>()
            .unwrap_err()
            .to_string()
            .contains("1 to 4"));
    }

    #[test]
    fn every_config_is_in_exactly_one_shard_in_plan_order() {
        let plan = plan();
        for n in 1..=(plan.configs.len() as u32 + 3) {
            let mut seen = Vec::new();
            for i in 1..=n {
                let s = plan.shard(Shard::new(i, n).unwrap());
                // Plan order inside the shard, and in each phase.
                let pos: Vec<usize> = s
                    .configs
                    .iter()
                    .map(|c| plan.configs.iter().position(|p| p.id == c.id).unwrap())
                    .collect();
                assert!(pos.windows(2).all(|w| w[0] < w[1]), "{n}: {pos:?}");
                for phase in &s.phases {
                    let whole = plan.phases.iter().find(|p| p.id == phase.id).unwrap();
                    let kept: Vec<&String> = whole
                        .configs
                        .iter()
                        .filter(|c| phase.configs.contains(c))
                        .collect();
                    assert_eq!(kept, phase.configs.iter().collect::<Vec<_>>());
                }
                // Cells go with their config.
                for c in &s.cells {
                    assert!(s.config(&c.config).is_some());
                }
                assert_eq!(
                    s.cells.len(),
                    s.configs
                        .iter()
                        .map(|c| plan.cells_of(&c.id).count())
                        .sum::<usize>()
                );
                seen.extend(s.configs.iter().map(|c| c.id.clone()));
            }
            let mut all: Vec<String> = plan.configs.iter().map(|c| c.id.clone()).collect();
            seen.sort();
            all.sort();
            assert_eq!(seen, all, "{n} shards");
        }
    }

    #[test]
    fn the_split_is_deterministic() {
        let a = plan();
        let b = plan();
        for n in 1..6 {
            assert_eq!(a.shard_of_configs(n), b.shard_of_configs(n));
            assert_eq!(a.shard_of_configs(n), a.shard_of_configs(n));
        }
    }

    #[test]
    fn more_shards_than_configs_leaves_empty_shards() {
        let plan = plan();
        let n = plan.configs.len() as u32 + 2;
        let empty = plan.shard(Shard::new(n, n).unwrap());
        assert!(empty.configs.is_empty() && empty.cells.is_empty() && empty.phases.is_empty());
        assert_eq!(empty.name, plan.name);
    }

    #[test]
    fn the_split_is_within_the_lpt_bound() {
        // Greedy longest-first: no shard exceeds the mean load plus the
        // largest job, and the makespan is within 4/3 of the optimum (whose
        // lower bound is max(mean, largest)).
        let cases: [&[u64]; 4] = [
            &[7, 7, 6, 6, 5, 5, 4, 4, 4],
            &[100, 1, 1, 1, 1, 1],
            &[3, 3, 3, 3],
            &[10, 9, 8, 7, 6, 5, 4, 3, 2, 1],
        ];
        for costs in cases {
            for n in 1..=5u32 {
                let owner = assign(costs, n);
                let makespan = makespan(costs, &owner, n);
                // Graham's bound for any greedy list schedule.
                let total: u64 = costs.iter().sum();
                let largest = *costs.iter().max().unwrap();
                let graham = total as f64 / n as f64 + (1.0 - 1.0 / n as f64) * largest as f64;
                assert!(makespan as f64 <= graham + 1e-9, "{costs:?} in {n}");
                // LPT's bound against the optimum, found exhaustively.
                if n <= 3 {
                    let best = optimum(costs, n);
                    let lpt = (4.0 / 3.0 - 1.0 / (3.0 * n as f64)) * best as f64;
                    assert!(
                        makespan as f64 <= lpt + 1e-9,
                        "{costs:?} in {n}: {makespan} vs {best}"
                    );
                }
            }
        }
        // Ties go to the lower shard, equal costs in plan order.
        assert_eq!(assign(&[1, 1, 1, 1], 2), vec![0, 1, 0, 1]);
        assert_eq!(assign(&[], 3), Vec::<u32>::new());
    }

    fn makespan(costs: &[u64], owner: &[u32], n: u32) -> u64 {
        let mut load = vec![0u64; n as usize];
        for (c, s) in costs.iter().zip(owner) {
            load[*s as usize] += c;
        }
        load.into_iter().max().unwrap_or(0)
    }

    fn optimum(costs: &[u64], n: u32) -> u64 {
        let mut owner = vec![0u32; costs.len()];
        let mut best = u64::MAX;
        loop {
            best = best.min(makespan(costs, &owner, n));
            // Next assignment, counting in base n.
            let mut i = 0;
            loop {
                if i == owner.len() {
                    return best;
                }
                owner[i] += 1;
                if owner[i] < n {
                    break;
                }
                owner[i] = 0;
                i += 1;
            }
        }
    }

    #[test]
    fn gpus_weigh_a_config() {
        let text = r#"
name = "g"
[server]
command = "x {port}"
port = "auto"
env = { CUDA_VISIBLE_DEVICES = "{gpus}" }
[vars]
gpus = "0"
[limits]
context = 4096
[[workloads]]
id = "w"
contexts = [64]
concurrency = [1]
requests = 2
max_tokens = 8
[[phases]]
id = "p"
matrix = { n = ["1", "4"] }
[[phases.set]]
when = { n = "4" }
vars = { gpus = "0,1,2,3" }
"#;
        let plan = Plan::parse(Path::new("g.toml"), text).unwrap();
        let costs = config_costs(&plan);
        assert_eq!(costs.len(), 2);
        assert_eq!(costs[1], costs[0] * 4, "{costs:?}");
        assert_eq!(costs[0], 2 * (64 + 8));
    }
}
