//! Reading a sweep directory's shards back: which subdirectories are the
//! sweep's own shards, and what else is there ([`Foreign`], with why it is
//! not one, [`NotAShard`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use super::{
    is_sweep_dir, read_shard, read_sweep, shard_dir, shard_state, ShardFile, ShardState, SweepMeta,
    SHARD, SHARDS,
};
use crate::model::Timestamp;
use crate::store::error::NotAShard;
use crate::store::PLAN;

/// Something where a sweep's shards are that is not one of them: a symbolic
/// link (to another run, or a loop), a file, a name that is no shard number,
/// a run of another plan or of another shard. It is never read, resumed
/// into or counted; it is told.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Foreign {
    pub path: PathBuf,
    /// The shard whose place it takes, when its name is one of the sweep's.
    pub index: Option<u32>,
    pub why: NotAShard,
}

impl Foreign {
    /// The notice for it: what it is, and that it is ignored.
    pub fn notice(&self) -> String {
        format!(
            "{} is not a shard of this sweep ({}): it is ignored",
            self.path.display(),
            self.why
        )
    }
}

/// A sweep directory read back: one made by `sweeptop slurm` (`sweep.json`,
/// shard i in `shards/<i>/`), or a folder of shard runs made by hand
/// (`run PLAN --shard i/N --out DIR/<name>` for each i, on any machines),
/// whose subdirectories' `shard.json` say which shard each is.
///
/// A shard is a real directory (not a symbolic link) whose `shard.json`
/// names its place (its index, and the sweep's count of shards) and whose
/// frozen plan is the sweep's (same SHA-256); a directory the run is still
/// being made in (nothing in it yet) is its shard too. Anything else is
/// [`Foreign`].
#[derive(Debug, Clone)]
pub struct Sweep {
    pub dir: PathBuf,
    /// `sweep.json`, or for shards run by hand what their runs say (the
    /// plan's name, their count, the first start).
    pub meta: SweepMeta,
    /// The plan every shard runs a part of.
    pub plan: PathBuf,
    /// Made by `sweeptop slurm`: shard i's run directory is `shards/<i>`.
    pub slurm: bool,
    /// The sweep's own shard run directories, by index.
    pub shards: Vec<(u32, PathBuf)>,
    pub foreign: Vec<Foreign>,
}

/// What a shard run says it is (its `shard.json` and its plan's SHA-256),
/// or why it cannot say.
type Said = Result<(ShardFile, Option<String>), NotAShard>;

/// What a shard of a sweep must be.
struct Expect {
    count: u32,
    /// The SHA-256 of the sweep's plan, when it reads.
    plan_sha256: Option<String>,
}

impl Sweep {
    /// `dir` as a sweep directory; `None` when it is not one (a run
    /// directory, or a folder with no shard run in it).
    pub fn open(dir: &Path) -> Option<Sweep> {
        if is_sweep_dir(dir) {
            return Some(Sweep::open_slurm(dir));
        }
        if crate::store::is_run_dir(dir) {
            return None;
        }
        Sweep::open_by_hand(dir)
    }

    fn open_slurm(dir: &Path) -> Sweep {
        let meta = read_sweep(dir).unwrap_or_else(|_| SweepMeta {
            plan: String::new(),
            shards: 0,
            created_at: Timestamp::from_unix_ms(0),
            sweeptop: String::new(),
            submissions: Vec::new(),
        });
        let plan = dir.join(PLAN);
        let expect = Expect {
            count: meta.shards,
            plan_sha256: crate::store::sha256_file(&plan).ok(),
        };
        let mut shards = Vec::new();
        let mut foreign = Vec::new();
        let mut entries: Vec<PathBuf> = fs::read_dir(dir.join(SHARDS))
            .map(|e| e.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        entries.sort();
        for path in entries {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let index = name
                .parse::<u32>()
                .ok()
                .filter(|i| (1..=meta.shards).contains(i) && i.to_string() == name);
            let judged = match index {
                None => Err(NotAShard::BadName { count: meta.shards }),
                Some(i) => judge(&path, &expect).and_then(|found| match found {
                    Some(s) if s.index != i => Err(NotAShard::SaysOther {
                        index: s.index,
                        count: s.count,
                    }),
                    _ => Ok(()),
                }),
            };
            match (judged, index) {
                (Ok(()), Some(i)) => shards.push((i, path)),
                (Err(why), index) => foreign.push(Foreign { path, index, why }),
                (Ok(()), None) => {}
            }
        }
        shards.sort_by_key(|(i, _)| *i);
        Sweep {
            dir: dir.to_path_buf(),
            meta,
            plan,
            slurm: true,
            shards,
            foreign,
        }
    }

    /// A folder whose subdirectories are shard runs: the sweep is the plan
    /// and count most of them share (the first in name order on a tie); a
    /// shard run of another, a second run of one shard, a link to a shard
    /// run, are foreign. A subdirectory that holds no shard is not looked at.
    fn open_by_hand(dir: &Path) -> Option<Sweep> {
        let mut entries: Vec<PathBuf> = fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join(SHARD).is_file())
            .collect();
        entries.sort();
        // Each candidate with what it says it is.
        let mut found: Vec<(PathBuf, Said)> = entries
            .into_iter()
            .map(|path| {
                let said = read_shard(&path)
                    .map_err(|e| NotAShard::ShardFile(Arc::new(e)))
                    .and_then(|s| s.ok_or(NotAShard::NoShardFile))
                    .map(|s| (s, crate::store::sha256_file(&path.join(PLAN)).ok()));
                (path, said)
            })
            .collect();
        let mut votes: Vec<((u32, Option<String>), usize)> = Vec::new();
        for (path, said) in &found {
            if let (Ok((s, sha)), false) = (said, is_link(path)) {
                let key = (s.count, sha.clone());
                match votes.iter_mut().find(|(k, _)| *k == key) {
                    Some((_, n)) => *n += 1,
                    None => votes.push((key, 1)),
                }
            }
        }
        let most = votes.iter().map(|(_, n)| *n).max()?;
        let (count, plan_sha256) = votes.into_iter().find(|(_, n)| *n == most)?.0;
        let expect = Expect { count, plan_sha256 };
        let mut shards: Vec<(u32, PathBuf)> = Vec::new();
        let mut foreign = Vec::new();
        for (path, said) in found.drain(..) {
            let index = said.as_ref().ok().map(|(s, _)| s.index);
            let judged = judge(&path, &expect).and_then(|s| {
                let i = s.map_or(0, |s| s.index);
                match shards.iter().find(|(j, _)| *j == i) {
                    Some((_, first)) => Err(NotAShard::Taken {
                        index: i,
                        count,
                        first: first.clone(),
                    }),
                    None => Ok(i),
                }
            });
            match judged {
                Ok(i) => shards.push((i, path)),
                Err(why) => foreign.push(Foreign { path, index, why }),
            }
        }
        shards.sort_by_key(|(i, _)| *i);
        let metas: Vec<_> = shards
            .iter()
            .filter_map(|(_, d)| crate::store::run_meta(d))
            .collect();
        let meta = SweepMeta {
            plan: metas.first().map(|m| m.plan.clone()).unwrap_or_default(),
            shards: count,
            created_at: metas
                .iter()
                .map(|m| m.started_at)
                .min()
                .unwrap_or_else(|| Timestamp::from_unix_ms(0)),
            sweeptop: String::new(),
            submissions: Vec::new(),
        };
        Some(Sweep {
            dir: dir.to_path_buf(),
            meta,
            plan: shards.first()?.1.join(PLAN),
            slurm: false,
            shards,
            foreign,
        })
    }

    /// Shard `index`'s run directory, or where its task makes it (a Slurm
    /// sweep's `shards/<i>`); `None` when something foreign is in its place,
    /// or a folder of shards run by hand lacks it.
    pub fn shard_path(&self, index: u32) -> Option<PathBuf> {
        if let Some((_, d)) = self.shards.iter().find(|(i, _)| *i == index) {
            return Some(d.clone());
        }
        let taken = self.foreign.iter().any(|f| f.index == Some(index));
        (self.slurm && !taken).then(|| shard_dir(&self.dir, index))
    }

    /// Where shard `index` stands.
    pub fn state(&self, index: u32) -> ShardState {
        if let Some(f) = self.foreign.iter().find(|f| f.index == Some(index)) {
            if !self.shards.iter().any(|(i, _)| *i == index) {
                return ShardState::Foreign { why: f.why.clone() };
            }
        }
        self.shard_path(index)
            .map_or(ShardState::Pending, |d| shard_state(&d))
    }

    /// One line per foreign entry: what it is, and that it is ignored.
    pub fn notices(&self) -> Vec<String> {
        self.foreign.iter().map(Foreign::notice).collect()
    }
}

fn is_link(path: &Path) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink())
}

/// Whether `path` may be a shard of a sweep that expects `expect`: a real
/// directory, whose `shard.json` (when written) is of a sweep of that many
/// shards, and whose plan (when written) is the sweep's. What it says it is,
/// or why it is not one.
fn judge(path: &Path, expect: &Expect) -> Result<Option<ShardFile>, NotAShard> {
    let m = fs::symlink_metadata(path).map_err(|e| NotAShard::Unreadable(Arc::new(e)))?;
    if m.file_type().is_symlink() {
        return Err(match fs::read_link(path) {
            Ok(to) => NotAShard::LinkTo { to },
            Err(_) => NotAShard::Link,
        });
    }
    if !m.is_dir() {
        return Err(NotAShard::NotADir);
    }
    let shard = read_shard(path).map_err(|e| NotAShard::ShardFile(Arc::new(e)))?;
    let plan = path.join(PLAN);
    match &shard {
        Some(s) if s.count != expect.count => {
            return Err(NotAShard::OtherCount {
                index: s.index,
                count: s.count,
                expected: expect.count,
            })
        }
        Some(_) => {}
        // A run being made says which shard it is before it holds a plan.
        None if plan.exists() => return Err(NotAShard::NoShard),
        None => {}
    }
    if let (Some(want), Ok(have)) = (&expect.plan_sha256, crate::store::sha256_file(&plan)) {
        if *want != have {
            return Err(NotAShard::OtherPlan);
        }
    }
    Ok(shard)
}

/// A run directory that is in a Slurm sweep's `shards/` but is not one of
/// its shards (a symbolic link to another run, another plan's run…): it must
/// not be resumed as the shard whose place it takes.
pub fn foreign_in_sweep(run_dir: &Path) -> Option<Foreign> {
    let name = run_dir.file_name()?;
    let shards = run_dir.parent()?;
    if shards.file_name()? != SHARDS {
        return None;
    }
    let sweep = shards.parent()?;
    let sweep = if sweep.as_os_str().is_empty() {
        Path::new(".")
    } else {
        sweep
    };
    if !is_sweep_dir(sweep) {
        return None;
    }
    let entry = shards.join(name);
    Sweep::open_slurm(sweep)
        .foreign
        .into_iter()
        .find(|f| f.path.file_name() == entry.file_name())
}
