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
    // A sweep killed just after it started a server may leave the lock
    // with that child for the moment between its exec and the kernel closing
    // the descriptors it inherited: a lock held that briefly is waited for.
    for _ in 0..RETRIES {
        match f.try_lock() {
            Ok(()) => return Ok(f),
            Err(fs::TryLockError::WouldBlock) => std::thread::sleep(RETRY_EVERY),
            Err(fs::TryLockError::Error(e)) => return Err(io_err(&p)(e)),
        }
    }
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(fs::TryLockError::WouldBlock) => Err(Invalid::Locked {
            dir: dir.to_path_buf(),
        }
        .into()),
        Err(fs::TryLockError::Error(e)) => Err(io_err(&p)(e)),
    }
}

/// How long a held lock is waited for before it is said to be another
/// sweep's: how long a child forked while it was held may keep it.
pub(super) const LINGER: std::time::Duration = std::time::Duration::from_secs(1);
const RETRY_EVERY: std::time::Duration = std::time::Duration::from_millis(50);
const RETRIES: u32 = (LINGER.as_millis() / RETRY_EVERY.as_millis()) as u32;

/// Whether a live sweep holds the directory's lock.
pub fn is_locked(dir: &Path) -> bool {
    is_held(&dir.join(LOCK))
}

/// Whether a live process holds `file` locked (`flock`).
pub fn is_held(file: &Path) -> bool {
    let Ok(f) = File::open(file) else {
        return false;
    };
    matches!(f.try_lock_shared(), Err(fs::TryLockError::WouldBlock))
}
