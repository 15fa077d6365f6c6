//! `run.lock`: held (`flock`) by the one sweep writing to a run directory,
//! for its whole life; the kernel lets go of it when that process dies,
//! however it dies.

use std::fs::{self, File, OpenOptions};
use std::path::Path;

use super::error::{io_err, Invalid, StoreError};
use super::LOCK;

/// Take the run directory's lock, or say who holds it.
pub(super) fn lock(dir: &Path) -> Result<File, StoreError> {
    let p = dir.join(LOCK);
    let f = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&p)
        .map_err(io_err(&p))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(fs::TryLockError::WouldBlock) => Err(Invalid::Locked {
            dir: dir.to_path_buf(),
        }
        .into()),
        Err(fs::TryLockError::Error(e)) => Err(io_err(&p)(e)),
    }
}

/// Whether a live sweep holds the directory's lock.
pub fn is_locked(dir: &Path) -> bool {
    let Ok(f) = File::open(dir.join(LOCK)) else {
        return false;
    };
    matches!(f.try_lock_shared(), Err(fs::TryLockError::WouldBlock))
}
