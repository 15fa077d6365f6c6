//! How the run directory's files are written and read: durably (fsynced
//! before the call returns), with a torn last line cut off before appending
//! again, and as JSON lines of which a torn or foreign one is skipped.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::error::{io_err, StoreError};

/// Write a whole file and make it durable before returning.
pub(super) fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut f = File::create(path).map_err(io_err(path))?;
    f.write_all(bytes).map_err(io_err(path))?;
    f.sync_all().map_err(io_err(path))
}

/// Cut a partial last line (no trailing newline) off an append-only file.
pub(super) fn repair_tail(path: &Path) -> Result<(), StoreError> {
    let Ok(mut f) = OpenOptions::new().read(true).write(true).open(path) else {
        return Ok(());
    };
    let len = f.metadata().map_err(io_err(path))?.len();
    if len == 0 {
        return Ok(());
    }
    // Scan back from the end for the last newline.
    let mut pos = len;
    let mut buf = [0u8; 4096];
    let mut keep = 0u64;
    'outer: while pos > 0 {
        let n = (pos as usize).min(buf.len());
        pos -= n as u64;
        f.seek(SeekFrom::Start(pos)).map_err(io_err(path))?;
        f.read_exact(&mut buf[..n]).map_err(io_err(path))?;
        for i in (0..n).rev() {
            if buf[i] == b'\n' {
                keep = pos + i as u64 + 1;
                break 'outer;
            }
        }
    }
    if keep != len {
        f.set_len(keep).map_err(io_err(path))?;
        f.sync_all().map_err(io_err(path))?;
    }
    Ok(())
}

/// Every line of a JSON-lines file that parses, read as it goes (a torn or
/// foreign line is skipped; a missing file is empty).
pub(super) fn read_lines<T: serde::de::DeserializeOwned>(path: &Path) -> impl Iterator<Item = T> {
    File::open(path)
        .ok()
        .map(BufReader::new)
        .into_iter()
        .flat_map(|r| r.lines().map_while(Result::ok))
        .filter_map(|l| serde_json::from_str(&l).ok())
}

/// The SHA-256 of a file, in hex (what `sha256sum` prints).
pub fn sha256_file(path: &Path) -> io::Result<String> {
    sha256_head(path, u64::MAX)
}

/// SHA-256 of a regular file's first `limit` bytes (a GGUF's header and
/// metadata sit at its start): never reads a FIFO or a device.
pub fn sha256_head(path: &Path, limit: u64) -> io::Result<String> {
    use io::Read;
    use sha2::Digest;
    let mut hasher = sha2::Sha256::new();
    let file = super::shared::open_regular(path)?;
    io::copy(&mut file.take(limit), &mut hasher)?;
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
