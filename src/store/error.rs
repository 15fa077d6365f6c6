//! What can go wrong with a run directory: the disk, named with the file it
//! was about, or the directory (or a file in it) not being what was asked
//! for, which is the user's to fix and told as it is.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{EVENTS, PLAN, RESULTS, SHARD};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// A write that failed earlier, asked about again.
    #[error(transparent)]
    Earlier(std::sync::Arc<StoreError>),
}

/// A directory or a file in it that is not what was asked for.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    #[error("{dir} is not a run directory (no {PLAN})")]
    NoPlan { dir: PathBuf },
    #[error("{dir} is not a run directory (no {PLAN}, {EVENTS} or {RESULTS})")]
    NotARun { dir: PathBuf },
    #[error("{dir} already holds a run; continue it with `sweeptop run --resume {dir}`")]
    HoldsARun { dir: PathBuf },
    #[error(
        "{dir} is not empty ({entry} is there) and holds no sweeptop run; \
         name a new directory with --out (it is created for you)"
    )]
    NotEmpty { dir: PathBuf, entry: String },
    #[error("a sweep is already running in {dir}: attach with `sweeptop attach {dir}`")]
    Locked { dir: PathBuf },
    #[error(
        "{dir} already exists and is not empty: choose another --out, \
         or continue it with `sweeptop slurm --resume {dir}`"
    )]
    SweepExists { dir: PathBuf },
    #[error(
        "{dir} is not a shard of the sweep it is in ({why}), so it is not resumed: \
         move it out of the sweep's shards, then `sweeptop slurm --resume` runs that shard"
    )]
    ForeignShard { dir: PathBuf, why: NotAShard },
    /// `run.json`, `sweep.json` or `shard.json` that does not read.
    #[error("{path}: {source}")]
    Unreadable {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("{path}:{line}: not a request record: {source}")]
    NotARequest {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error("cannot encode {what}: {source}")]
    Encode {
        /// The record: `result`, `run.json`…
        what: &'static str,
        source: serde_json::Error,
    },
}

impl Invalid {
    /// The error for `what` that would not encode.
    pub(super) fn encode(what: &'static str) -> impl FnOnce(serde_json::Error) -> StoreError {
        move |source| Invalid::Encode { what, source }.into()
    }

    /// The error for a file at `path` that does not read as JSON.
    pub(super) fn unreadable(path: &Path) -> impl FnOnce(serde_json::Error) -> StoreError + '_ {
        move |source| {
            Invalid::Unreadable {
                path: path.to_path_buf(),
                source,
            }
            .into()
        }
    }
}

/// What the user is told: the command line says an invalid directory in
/// one line, as it is.
/// The error for an I/O failure on `path`.
pub(super) fn io_err(path: &Path) -> impl FnOnce(io::Error) -> StoreError + '_ {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Why an entry where a sweep's shards are is not one of them.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NotAShard {
    #[error("a shard is named by its number, 1 to {count}")]
    BadName { count: u32 },
    #[error("its {SHARD} says it is shard {index}/{count}")]
    SaysOther { index: u32, count: u32 },
    #[error("shard {index}/{count} is already {}", first.display())]
    Taken {
        index: u32,
        count: u32,
        first: PathBuf,
    },
    #[error("cannot be read: {0}")]
    Unreadable(Arc<std::io::Error>),
    #[error("a symbolic link to {}", to.display())]
    LinkTo { to: PathBuf },
    #[error("a symbolic link")]
    Link,
    #[error("not a directory")]
    NotADir,
    /// Its `shard.json` does not read.
    #[error("{0}")]
    ShardFile(Arc<StoreError>),
    #[error("no {SHARD}")]
    NoShardFile,
    #[error("its {SHARD} says shard {index}/{count}, and this sweep has {expected} shards")]
    OtherCount {
        index: u32,
        count: u32,
        expected: u32,
    },
    #[error("a run that is no shard (no {SHARD})")]
    NoShard,
    #[error("a run of another plan (its {PLAN} is not the sweep's)")]
    OtherPlan,
}

/// Two reasons are the same when they read the same (an I/O error has no
/// equality of its own).
impl PartialEq for NotAShard {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

/// Written as its sentence (`ls --json`, a shard's state).
impl serde::Serialize for NotAShard {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}
