//! Raw per-request records of a cell, written as each request finishes:
//! `requests/<cell>.jsonl`, gzipped to `.jsonl.gz` at the end of the cell when
//! it is large. Nothing is held in memory; a write error stops the file (and
//! is reported once) but never the sweep.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use super::error::{io_err, Invalid, StoreError};
use crate::model::{text, RequestRecord};

/// Files over this size are compressed when the cell ends.
pub const COMPRESS_ABOVE: u64 = 1 << 20;

pub struct RequestsWriter {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    line: Vec<u8>,
    bytes: u64,
    error: Option<StoreError>,
}

impl RequestsWriter {
    pub fn create(path: PathBuf) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(io_err(dir))?;
        }
        // A retried cell replaces the earlier attempt's file, whichever form.
        let _ = fs::remove_file(gz_path(&path));
        let f = File::create(&path).map_err(io_err(&path))?;
        Ok(RequestsWriter {
            out: Some(BufWriter::with_capacity(64 << 10, f)),
            path,
            line: Vec::with_capacity(4096),
            bytes: 0,
            error: None,
        })
    }

    /// Append one record. After an error the rest are dropped; `finish` says why.
    pub fn write(&mut self, rec: &RequestRecord) {
        let Some(out) = self.out.as_mut() else {
            return;
        };
        self.line.clear();
        if let Err(e) = text::write_json_line(&mut self.line, rec) {
            self.error = Some(Invalid::encode("a request record")(e));
            self.out = None;
            return;
        }
        self.line.push(b'\n');
        match out.write_all(&self.line) {
            Ok(()) => self.bytes += self.line.len() as u64,
            Err(e) => {
                self.error = Some(io_err(&self.path)(e));
                self.out = None;
            }
        }
    }

    /// Flush, compress when large, and return the file's final path.
    pub fn finish(mut self) -> Result<PathBuf, StoreError> {
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
        }
    }

    #[test]
    fn small_files_stay_plain_and_read_back() {
        let dir = std::env::temp_dir().join(format!("sweeptop-req-{}", std::process::id()));
        let mut w = RequestsWriter::create(dir.join("requests/a.jsonl")).unwrap();
        for i in 0..3 {
            w.write(&record(i));
        }
        let p = w.finish().unwrap();
        assert_eq!(p, dir.join("requests/a.jsonl"));
        let back = read_requests(&p).unwrap();
        assert_eq!(back, (0..3).map(record).collect::<Vec<_>>());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn large_files_are_gzipped_and_read_back() {
        let dir = std::env::temp_dir().join(format!("sweeptop-reqgz-{}", std::process::id()));
        let mut w = RequestsWriter::create(dir.join("b.jsonl")).unwrap();
        let n = 2000; // ~1.4 MB of JSON
        for i in 0..n {
            w.write(&record(i));
        }
        let p = w.finish().unwrap();
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
        let mut w = RequestsWriter {
            path: PathBuf::from("/dev/full"),
            out: Some(BufWriter::with_capacity(16, f)),
            line: Vec::new(),
            bytes: 0,
            error: None,
        };
        w.write(&record(1));
        w.write(&record(2));
        let e = w.finish().unwrap_err().to_string();
        assert!(e.contains("/dev/full"), "{e}");
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
