//! Raw per-request records of a cell, written as each request finishes:
//! `requests/<cell>.jsonl`, gzipped to `.jsonl.gz` at the end of the cell when
//! it is large. The file is written on a thread of its own, so a disk that
//! stalls never holds up the requests being timed; what waits for it is
//! bounded ([`MAX_QUEUED`]), beyond which records are left out and counted.
//! A write error stops the file (and is reported once) but never the sweep.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::error::{io_err, Invalid, StoreError};
use crate::model::{text, RequestRecord};

/// Files over this size are compressed when the cell ends.
pub const COMPRESS_ABOVE: u64 = 1 << 20;
/// How many bytes of records may wait for a disk that stalls.
pub const MAX_QUEUED: u64 = 64 << 20;

/// A cell's records, written on a thread named `requests`.
pub struct RequestsWriter {
    path: PathBuf,
    lines: Option<std_mpsc::Sender<Vec<u8>>>,
    done: oneshot::Receiver<Result<PathBuf, StoreError>>,
    queued: Arc<AtomicU64>,
    /// The longest line so far: the next one is made that large at once.
    line_capacity: usize,
    left_out: u64,
    error: Option<StoreError>,
}

/// What was written: the file's final path, and how many records were left
/// out because the disk did not keep up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub path: PathBuf,
    pub left_out: u64,
}

impl RequestsWriter {
    pub fn create(path: PathBuf) -> Result<Self, StoreError> {
        let (lines, rx) = std_mpsc::channel::<Vec<u8>>();
        let (done_tx, done) = oneshot::channel();
        let queued = Arc::new(AtomicU64::new(0));
        let q = queued.clone();
        let p = path.clone();
        std::thread::Builder::new()
            .name("requests".into())
            .spawn(move || {
                let _ = done_tx.send(write_file(p, &rx, &q));
            })
            .map_err(io_err(&path))?;
        Ok(RequestsWriter {
            path,
            lines: Some(lines),
            done,
            queued,
            line_capacity: 4096,
            left_out: 0,
            error: None,
        })
    }

    /// Queue one record; never waits. After an encoding error the rest are
    /// dropped; `finish` says why.
    pub fn write(&mut self, rec: &RequestRecord) {
        let Some(lines) = self.lines.as_ref() else {
            return;
        };
        // The line goes to the writing thread as it is: no copy.
        let mut line = Vec::with_capacity(self.line_capacity);
        if let Err(e) = text::write_json_line(&mut line, rec) {
            self.error = Some(Invalid::encode("a request record")(e));
            self.lines = None;
            return;
        }
        line.push(b'\n');
        self.line_capacity = self.line_capacity.max(line.len());
        let len = line.len() as u64;
        if self.queued.fetch_add(len, Ordering::SeqCst) + len > MAX_QUEUED
            || lines.send(line).is_err()
        {
            self.queued.fetch_sub(len, Ordering::SeqCst);
            self.left_out += 1;
        }
    }

    /// Every record written, the file flushed and compressed when large;
    /// waited for at most `limit` (the disk may hang).
    pub async fn finish(mut self, limit: Duration) -> Result<Written, StoreError> {
        self.lines = None;
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match tokio::time::timeout(limit, self.done).await {
            Ok(Ok(done)) => done.map(|path| Written {
                path,
                left_out: self.left_out,
            }),
            Ok(Err(_)) => Err(io_err(&self.path)(io::Error::other(
                "its writing thread is gone",
            ))),
            Err(_) => Err(io_err(&self.path)(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "not finished within {} s (a hung mount?); it goes on being written",
                    limit.as_secs()
                ),
            ))),
        }
    }
}

/// The writing thread: the file made, every line that comes written, then
/// finished.
fn write_file(
    path: PathBuf,
    lines: &std_mpsc::Receiver<Vec<u8>>,
    queued: &AtomicU64,
) -> Result<PathBuf, StoreError> {
    let mut file = RequestsFile::create(path);
    while let Ok(line) = lines.recv() {
        let len = line.len() as u64;
        if let Ok(f) = file.as_mut() {
            f.write_line(&line);
        }
        queued.fetch_sub(len, Ordering::SeqCst);
    }
    file?.finish()
}

/// The file itself.
struct RequestsFile {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    bytes: u64,
    error: Option<StoreError>,
}

impl RequestsFile {
    fn create(path: PathBuf) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        // A retried cell replaces the earlier attempt's file, whichever form.
        let _ = fs::remove_file(gz_path(&path));
        let f = File::create(&path).map_err(io_err(&path))?;
        Ok(RequestsFile {
            out: Some(BufWriter::with_capacity(64 << 10, f)),
            path,
            bytes: 0,
            error: None,
        })
    }

    /// Append one line. After an error the rest are dropped; `finish` says why.
    fn write_line(&mut self, line: &[u8]) {
        let Some(out) = self.out.as_mut() else {
            return;
        };
        match out.write_all(line) {
            Ok(()) => self.bytes += line.len() as u64,
            Err(e) => {
                self.error = Some(io_err(&self.path)(e));
                self.out = None;
            }
        }
    }

    /// Flush, compress when large, and return the file's final path.
    fn finish(mut self) -> Result<PathBuf, StoreError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let Some(out) = self.out.take() else {
            return Ok(self.path);
        };
        out.into_inner()
            .map_err(|e| io_err(&self.path)(e.into_error()))?;
        if self.bytes <= COMPRESS_ABOVE {
            return Ok(self.path);
        }
        let gz = gz_path(&self.path);
        match compress(&self.path, &gz) {
            Ok(()) => {
                fs::remove_file(&self.path).map_err(io_err(&self.path))?;
                Ok(gz)
            }
            Err(e) => {
                // The plain file is intact: keep it.
                let _ = fs::remove_file(&gz);
                Err(io_err(&gz)(e))
            }
        }
    }
}

fn gz_path(plain: &Path) -> PathBuf {
    let mut s = plain.as_os_str().to_owned();
    s.push(".gz");
    PathBuf::from(s)
}

fn compress(from: &Path, to: &Path) -> io::Result<()> {
    let mut input = File::open(from)?;
    let out = BufWriter::new(File::create(to)?);
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
    io::copy(&mut input, &mut gz)?;
    gz.finish()?.into_inner().map_err(|e| e.into_error())?;
    Ok(())
}

/// Read a cell's records back (plain or gzipped), e.g. to recompute metrics.
/// A torn last line (the process died mid-write) is skipped.
pub fn read_requests(path: &Path) -> Result<Vec<RequestRecord>, StoreError> {
    let f = File::open(path).map_err(io_err(path))?;
    let reader: Box<dyn Read> = if path.extension().is_some_and(|e| e == "gz") {
        Box::new(flate2::read::GzDecoder::new(f))
    } else {
        Box::new(f)
    };
    let mut out = Vec::new();
    let mut lines = BufReader::new(reader).lines().enumerate().peekable();
    while let Some((i, line)) = lines.next() {
        let line = line.map_err(io_err(path))?;
        match serde_json::from_str(&line) {
            Ok(r) => out.push(r),
            Err(_) if lines.peek().is_none() => break,
            Err(source) => {
                return Err(Invalid::NotARequest {
                    path: path.to_path_buf(),
                    line: i + 1,
                    source,
                }
                .into())
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: u64) -> RequestRecord {
        RequestRecord {
            id: None,
            start_ns: i * 1000,
            chunks: (0..64)
                .map(|k| (i * 1000 + 200_000_000 + k * 10_000_000, 4))
                .collect(),
            end_ns: i * 1000 + 900_000_000,
            prompt_tokens: Some(512),
            completion_tokens: Some(64),
            max_tokens: 64,
            finish_reason: Some("length".into()),
            error: None,
            server: None,
            read_lag_us: Vec::new(),
        }
    }

    const LIMIT: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn small_files_stay_plain_and_read_back() {
        let dir = std::env::temp_dir().join(format!("sweeptop-req-{}", std::process::id()));
        let mut w = RequestsWriter::create(dir.join("requests/a.jsonl")).unwrap();
        for i in 0..3 {
            w.write(&record(i));
        }
        let p = w.finish(LIMIT).await.unwrap().path;
        assert_eq!(p, dir.join("requests/a.jsonl"));
        let back = read_requests(&p).unwrap();
        assert_eq!(back, (0..3).map(record).collect::<Vec<_>>());
        let _ = fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn large_files_are_gzipped_and_read_back() {
        let dir = std::env::temp_dir().join(format!("sweeptop-reqgz-{}", std::process::id()));
        let mut w = RequestsWriter::create(dir.join("b.jsonl")).unwrap();
        let n = 2000; // ~1.4 MB of JSON
        for i in 0..n {
            w.write(&record(i));
        }
        let written = w.finish(LIMIT).await.unwrap();
        assert_eq!(written.left_out, 0);
        let p = written.path;
        assert_eq!(p, dir.join("b.jsonl.gz"));
        assert!(!dir.join("b.jsonl").exists(), "the plain file is replaced");
        assert!(fs::metadata(&p).unwrap().len() < COMPRESS_ABOVE / 2);
        let back = read_requests(&p).unwrap();
        assert_eq!(back.len(), n as usize);
        assert_eq!(back[1234], record(1234));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_full_disk_is_reported_not_a_panic() {
        let Ok(f) = File::options().write(true).open("/dev/full") else {
            return;
        };
        let mut w = RequestsFile {
            path: PathBuf::from("/dev/full"),
            out: Some(BufWriter::with_capacity(16, f)),
            bytes: 0,
            error: None,
        };
        let line = serde_json::to_vec(&record(1)).unwrap();
        w.write_line(&line);
        w.write_line(&line);
        let e = w.finish().unwrap_err().to_string();
        assert!(e.contains("/dev/full"), "{e}");
    }

    #[tokio::test]
    async fn a_file_that_hangs_holds_its_thread_not_the_requests() {
        // The records file a FIFO: opening it to write waits for a reader.
        let dir = std::env::temp_dir().join(format!("sweeptop-reqfifo-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("d.jsonl");
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let mut w = RequestsWriter::create(p.clone()).unwrap();
        for i in 0..100 {
            w.write(&record(i));
        }
        let e = w.finish(Duration::from_millis(100)).await.unwrap_err();
        assert!(e.to_string().contains("not finished within"), "{e}");
        // The thread still waits on the FIFO: a reader lets it go.
        let all = std::thread::spawn(move || fs::read_to_string(&p).unwrap())
            .join()
            .unwrap();
        assert_eq!(all.lines().count(), 100);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_torn_last_line_is_skipped() {
        let dir = std::env::temp_dir().join(format!("sweeptop-reqtorn-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("c.jsonl");
        let mut text = serde_json::to_string(&record(1)).unwrap();
        text.push_str("\n{\"start_ns\":12,\"chu");
        fs::write(&p, text).unwrap();
        assert_eq!(read_requests(&p).unwrap(), vec![record(1)]);
        fs::write(&p, "garbage\n{}\n").unwrap();
        let e = read_requests(&p).unwrap_err().to_string();
        assert!(e.contains("c.jsonl:1"), "{e}");
        let _ = fs::remove_dir_all(&dir);
    }
}
