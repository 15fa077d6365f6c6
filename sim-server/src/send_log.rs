//! `--send-log`: when each request reached this machine and when each of
//! its streamed text chunks was handed to the connection, a JSON line per
//! request, written by a thread of its own so no request waits on the file.

use std::io::Write;
use std::path::Path;
use std::pin::Pin;
use std::sync::{mpsc, Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Start the writer; lines sent to it are appended to `path` (made anew).
pub fn start(path: &Path) -> std::io::Result<mpsc::Sender<String>> {
    let mut file = std::fs::File::create(path)?;
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::Builder::new()
        .name("send-log".into())
        .spawn(move || {
            for line in rx {
                // One write per line: a server killed at the end of a bench
                // has every finished request in the file.
                if file.write_all(line.as_bytes()).is_err() {
                    break;
                }
            }
        })?;
    Ok(tx)
}

/// One request's line: its id, how long before its head was in it reached
/// this machine (µs, where the kernel said) and each text chunk's time (µs
/// since its head was in).
pub fn line(id: &str, in_us: Option<u64>, sent_us: &[u64]) -> String {
    let mut s = serde_json::json!({ "id": id, "in_us": in_us, "sent_us": sent_us }).to_string();
    s.push('\n');
    s
}

/// A connection whose reads keep when their bytes reached this machine (the
/// kernel's receive timestamp, where the platform gives it): what a request
/// waited before its head was in is the server's intake, not the client's.
pub struct Stamped {
    inner: tokio::net::TcpStream,
    stamped: bool,
    /// The latest read's arrival, for the request it completed.
    latest: Arc<Mutex<Option<Instant>>>,
}

impl Stamped {
    /// Wrap `inner`, stamping its reads where `stamp` (with `--send-log`).
    pub fn new(inner: tokio::net::TcpStream, stamp: bool) -> Stamped {
        let stamped = stamp && wire_stamp::enable(&inner);
        Stamped {
            inner,
            stamped,
            latest: Arc::default(),
        }
    }

    /// Where the latest read's arrival is told.
    pub fn latest(&self) -> Arc<Mutex<Option<Instant>>> {
        self.latest.clone()
    }
}

impl AsyncRead for Stamped {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let latest = &this.latest;
        wire_stamp::poll_read(&mut this.inner, this.stamped, cx, buf, |at| {
            if let Ok(mut latest) = latest.lock() {
                *latest = at;
            }
        })
    }
}

impl AsyncWrite for Stamped {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
