//! When a connection's bytes reached this machine: the kernel's receive
//! timestamp of each read (Linux's `SO_TIMESTAMPNS`, no privileges needed),
//! so a chunk is timed when it arrived, not when a busy client got around
//! to reading it.
//!
//! A read that returns several queued segments carries the *last* one's
//! arrival: what came earlier in it is only known to be at or before that
//! time (the metrics treat the gaps inside such a read as unknown, see
//! `metrics::CellStats::add`). Where the platform has no such timestamps, or
//! the socket refuses the option, reads carry none and the read time stands.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use wire_stamp::MAX_AGE;

/// The arrival of the bytes of a connection's latest read, shared between
/// the stream (which sets it) and the request reading the connection.
#[derive(Debug, Default)]
pub struct Stamp {
    /// Nanoseconds since [`origin`]; 0: the latest read had no timestamp.
    arrival_ns: AtomicU64,
    /// When the first write since [`Stamp::unsent`] went to the socket
    /// (ns since [`origin`]; 0: none yet): a request's send time is when
    /// its bytes left, not when a busy client meant to send them.
    sent_ns: AtomicU64,
}

impl Stamp {
    /// When the bytes of the latest read arrived, if the kernel said.
    pub fn arrival(&self) -> Option<Instant> {
        match self.arrival_ns.load(Relaxed) {
            0 => None,
            ns => Some(origin() + Duration::from_nanos(ns)),
        }
    }

    /// A request is about to be written: its first write is its send time.
    pub fn unsent(&self) {
        self.sent_ns.store(0, Relaxed);
    }

    /// When the first write since [`Stamp::unsent`] went to the socket.
    pub fn sent(&self) -> Option<Instant> {
        match self.sent_ns.load(Relaxed) {
            0 => None,
            ns => Some(origin() + Duration::from_nanos(ns)),
        }
    }

    /// A write that began at `at` put bytes in the socket.
    fn wrote(&self, at: Instant) {
        if self.sent_ns.load(Relaxed) == 0 {
            let ns = at.saturating_duration_since(origin()).as_nanos() as u64;
            self.sent_ns.store(ns.max(1), Relaxed);
        }
    }

    fn set(&self, at: Option<Instant>) {
        let ns = at.map_or(0, |at| {
            (at.saturating_duration_since(origin()).as_nanos() as u64).max(1)
        });
        self.arrival_ns.store(ns, Relaxed);
    }
}

/// The instant stamps are counted from.
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    // Far enough back that a byte that waited can be placed before the
    // first read.
    *ORIGIN.get_or_init(|| {
        let now = Instant::now();
        now.checked_sub(MAX_AGE).unwrap_or(now)
    })
}

/// A TCP stream whose reads record when their bytes arrived.
pub struct WireStream {
    inner: TcpStream,
    stamp: Arc<Stamp>,
    stamped: bool,
}

impl WireStream {
    /// Wrap `inner`, asking the kernel to timestamp what it receives.
    pub fn new(inner: TcpStream) -> WireStream {
        let stamped = enable(&inner);
        origin();
        WireStream {
            inner,
            stamp: Arc::new(Stamp::default()),
            stamped,
        }
    }

    /// Where the arrival of each read's bytes is told.
    pub fn stamp(&self) -> Arc<Stamp> {
        self.stamp.clone()
    }

    /// Whether reads carry the kernel's arrival time.
    pub fn stamped(&self) -> bool {
        self.stamped
    }
}

fn enable(s: &TcpStream) -> bool {
    crate::model::Clock::in_use() == crate::model::Clock::Wire && wire_stamp::enable(s)
}

impl AsyncRead for WireStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let stamp = &this.stamp;
        wire_stamp::poll_read(&mut this.inner, this.stamped, cx, buf, |at| stamp.set(at))
    }
}

impl WireStream {
    /// A write begun at `at` that put bytes in the socket: on the wire
    /// clock, the first of a request is its send time. Taken before the
    /// call, since on loopback the server may read the bytes before the
    /// call returns.
    fn wrote(&self, at: Instant, r: &Poll<io::Result<usize>>) {
        if self.stamped && matches!(r, Poll::Ready(Ok(n)) if *n > 0) {
            self.stamp.wrote(at);
        }
    }
}

impl AsyncWrite for WireStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let at = Instant::now();
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.wrote(at, &r);
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let at = Instant::now();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.wrote(at, &r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_says_nothing_until_a_read_set_it() {
        let s = Stamp::default();
        assert_eq!(s.arrival(), None);
        let at = Instant::now();
        s.set(Some(at));
        let back = s.arrival().unwrap();
        assert!(back <= at && at.duration_since(back) < Duration::from_micros(1));
        s.set(None);
        assert_eq!(s.arrival(), None);
    }

    /// A stamped stream to a loopback peer, and the peer's end.
    #[cfg(target_os = "linux")]
    async fn connected() -> (WireStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let s = WireStream::new(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
        assert!(s.stamped());
        let (peer, _) = l.accept().unwrap();
        (s, peer)
    }

    /// A request's send time is when its first bytes went to the socket,
    /// taken before that write: a client busy between meaning to send and
    /// sending does not count its delay; the rest of the request does not
    /// move it; the next request starts anew.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_request_is_sent_when_its_first_bytes_are_written() {
        use std::io::Read;
        use tokio::io::AsyncWriteExt;
        let (mut s, mut peer) = connected().await;
        let stamp = s.stamp();
        stamp.unsent();
        let meant = Instant::now();
        assert_eq!(stamp.sent(), None, "nothing written yet");
        // Busy before it writes.
        std::thread::sleep(Duration::from_millis(30));
        let before = Instant::now();
        s.write_all(b"POST / HTTP/1.1\r\n").await.unwrap();
        let after = Instant::now();
        let sent = stamp.sent().expect("stamped by the write");
        assert!(
            sent >= before && sent <= after,
            "{sent:?} not within the write"
        );
        assert!(sent.duration_since(meant) >= Duration::from_millis(30));
        s.write_all(b"\r\n").await.unwrap();
        assert_eq!(stamp.sent(), Some(sent), "the rest of the request");
        stamp.unsent();
        std::thread::sleep(Duration::from_millis(1));
        s.write_all(b"POST").await.unwrap();
        assert!(stamp.sent().unwrap() > sent, "the next request");
        let mut buf = [0u8; 64];
        let _ = peer.read(&mut buf).unwrap();
    }

    /// Bytes that waited in the socket while the client did something else
    /// are stamped when they arrived, not when they were read. (The kernel
    /// turns receive timestamps on for the machine when the first socket
    /// asks, and may stamp the first packets after that without: a read
    /// without a stamp is tried again.)
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn bytes_that_waited_are_stamped_when_they_arrived() {
        use std::io::Write;
        use tokio::io::AsyncReadExt;
        let (mut s, mut peer) = connected().await;
        for _ in 0..50 {
            let before = Instant::now();
            peer.write_all(b"hello").unwrap();
            // The client is busy: the bytes wait in the socket.
            std::thread::sleep(Duration::from_millis(30));
            let mut got = [0u8; 16];
            let n = s.read(&mut got).await.unwrap();
            let read = Instant::now();
            assert_eq!(&got[..n], b"hello");
            let Some(at) = s.stamp().arrival() else {
                continue;
            };
            assert!(
                read.duration_since(at) >= Duration::from_millis(25),
                "stamped {:?} before the read, after a 30 ms wait",
                read.duration_since(at)
            );
            assert!(
                at + Duration::from_millis(1) >= before,
                "stamped {:?} before it was sent",
                before.duration_since(at)
            );
            return;
        }
        panic!("no read carried a kernel timestamp");
    }
}
