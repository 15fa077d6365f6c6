//! When a TCP connection's bytes reached this machine: the kernel's receive
//! timestamp of each read (Linux's `SO_TIMESTAMPNS`, no privileges needed),
//! so what arrived is timed when it arrived, not when a busy reader got
//! around to it. Both ends of a measurement use it: the load client times
//! each streamed chunk by it, the simulated server each request it takes.
//!
//! A read that returns several queued segments carries the *last* one's
//! arrival: what came earlier in it is only known to be at or before that
//! time. Where the platform has no such timestamps, or the socket refuses
//! the option, reads carry none and the read time stands.

use std::io;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;

/// An arrival older than this when read is taken for a clock step, not a
/// reader that late: the read time stands.
pub const MAX_AGE: Duration = Duration::from_secs(30);

/// Ask the kernel to timestamp what `s` receives; whether it will. On a
/// listening socket, the connections it accepts are stamped from their
/// first byte (asked on each accepted one, what came before was not).
#[cfg(target_os = "linux")]
pub fn enable<S: std::os::fd::AsFd>(s: &S) -> bool {
    use nix::sys::socket::{setsockopt, sockopt::ReceiveTimestampns};
    setsockopt(s, ReceiveTimestampns, &true).is_ok()
}

#[cfg(not(target_os = "linux"))]
pub fn enable<S>(_: &S) -> bool {
    false
}

/// One read of `inner` into `buf`, as a stream's `AsyncRead` does it. Where
/// `stamped` (its timestamps [`enable`]d), a read that returned bytes hands
/// `arrived` when they arrived, where the kernel said; otherwise it is a
/// plain read.
pub fn poll_read(
    inner: &mut TcpStream,
    stamped: bool,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
    arrived: impl FnOnce(Option<Instant>),
) -> Poll<io::Result<()>> {
    if !stamped {
        return std::pin::Pin::new(inner).poll_read(cx, buf);
    }
    let at = std::task::ready!(poll_read_stamped(inner, cx, buf))?;
    if let Some(at) = at {
        arrived(at);
    }
    Poll::Ready(Ok(()))
}

/// One read of `inner` (whose timestamps are [`enable`]d) into `buf`: ready
/// with, for a read that returned bytes, when they arrived where the kernel
/// said (`None` for a read of nothing, the end of the stream).
#[cfg(target_os = "linux")]
fn poll_read_stamped(
    inner: &TcpStream,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<io::Result<Option<Option<Instant>>>> {
    use std::cell::RefCell;
    use std::os::fd::AsRawFd;

    /// The read buffer of this thread: one for all its connections (a
    /// connection keeps nothing between reads), so a thousand connections
    /// cost no more memory than one.
    struct Scratch {
        data: Vec<u8>,
        cmsg: Vec<u8>,
    }
    thread_local! {
        static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch {
            data: vec![0; 64 << 10],
            cmsg: nix::cmsg_space!(nix::sys::time::TimeSpec),
        });
    }
    loop {
        std::task::ready!(inner.poll_read_ready(cx))?;
        let mut short = None;
        let got = SCRATCH.with(|s| {
            let Scratch { data, cmsg } = &mut *s.borrow_mut();
            let want = buf.remaining().min(data.len());
            let read = inner.try_io(tokio::io::Interest::READABLE, || {
                let (n, at) = recv(inner.as_raw_fd(), &mut data[..want], cmsg)?;
                if n > 0 && n < want {
                    // A short read emptied the socket: said as "would
                    // block", so the readiness is cleared and the next read
                    // waits for new bytes instead of asking to be told there
                    // are none, as tokio's own reads do. Bytes that arrived
                    // since raised a newer readiness, which stays.
                    short = Some((n, at));
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok((n, at))
            });
            // A short read was told to tokio as "would block"; it read.
            let read = short.map_or(read, Ok);
            if let Ok((n, _)) = &read {
                buf.put_slice(&data[..*n]);
            }
            read
        });
        match got {
            Ok((n, at)) => return Poll::Ready(Ok((n > 0).then_some(at))),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Poll::Ready(Err(e)),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn poll_read_stamped(
    _: &TcpStream,
    _: &mut Context<'_>,
    _: &mut ReadBuf<'_>,
) -> Poll<io::Result<Option<Option<Instant>>>> {
    Poll::Ready(Err(io::Error::other(
        "no receive timestamps on this platform",
    )))
}

/// One `recvmsg`: the bytes read and, from its control message, when the
/// last of them arrived.
#[cfg(target_os = "linux")]
fn recv(
    fd: std::os::fd::RawFd,
    into: &mut [u8],
    cmsg: &mut [u8],
) -> io::Result<(usize, Option<Instant>)> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut iov = [io::IoSliceMut::new(into)];
    let msg = recvmsg::<()>(fd, &mut iov, Some(cmsg), MsgFlags::MSG_DONTWAIT)?;
    let mut at = None;
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmTimestampns(ts) = c {
                at = arrival_of(ts);
            }
        }
    }
    Ok((msg.bytes, at))
}

/// The instant a kernel timestamp stands for.
#[cfg(target_os = "linux")]
#[allow(clippy::useless_conversion)] // `time_t` is 32 bits on some targets
fn arrival_of(ts: nix::sys::time::TimeSpec) -> Option<Instant> {
    arrival(i64::from(ts.tv_sec()), i64::from(ts.tv_nsec()))
}

/// The instant a wall-clock timestamp (the kernel's) stands for: now, less
/// how long ago it was by the wall clock. `None` for a time in the future
/// beyond a millisecond or older than [`MAX_AGE`] (the wall clock was set
/// in between: the read time stands).
pub fn arrival(sec: i64, nsec: i64) -> Option<Instant> {
    let (wall_now, now) = (std::time::SystemTime::now(), Instant::now());
    let then = std::time::UNIX_EPOCH
        + Duration::from_secs(u64::try_from(sec).ok()?)
        + Duration::from_nanos(u64::try_from(nsec).ok()?);
    let age = match wall_now.duration_since(then) {
        Ok(age) => age,
        Err(ahead) if ahead.duration() <= Duration::from_millis(1) => Duration::ZERO,
        Err(_) => return None,
    };
    if age > MAX_AGE {
        return None;
    }
    now.checked_sub(age)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One stamped read of `s`, as the client makes it.
    async fn read(s: &mut TcpStream, room: usize) -> Vec<u8> {
        let mut store = vec![0u8; room];
        let n = std::future::poll_fn(|cx| {
            let mut buf = ReadBuf::new(&mut store);
            let r = poll_read(s, true, cx, &mut buf, |_| {});
            r.map_ok(|()| buf.filled().len())
        })
        .await
        .unwrap();
        store.truncate(n);
        store
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_read_that_empties_the_socket_waits_for_new_bytes_and_wakes_on_them() {
        use std::io::Write;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let mut peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (mut s, _) = l.accept().await.unwrap();
            assert!(enable(&s));
            peer.write_all(b"hello").unwrap();
            assert_eq!(read(&mut s, 64).await, b"hello");
            // Emptied: not readable until more comes (no read to find that out).
            let waker = std::task::Waker::noop();
            let mut cx = Context::from_waker(waker);
            assert!(s.poll_read_ready(&mut cx).is_pending());
            // What comes next wakes the read.
            peer.write_all(b"world").unwrap();
            let next = tokio::time::timeout(Duration::from_secs(10), read(&mut s, 64)).await;
            assert_eq!(next.unwrap(), b"world");
            // A read that fills its buffer leaves the rest to read at once.
            peer.write_all(b"0123456789").unwrap();
            let first = tokio::time::timeout(Duration::from_secs(10), read(&mut s, 4)).await;
            assert_eq!(first.unwrap(), b"0123");
            assert!(s.poll_read_ready(&mut cx).is_ready());
            assert_eq!(read(&mut s, 64).await, b"456789");
            // The end of the stream is a read of nothing.
            drop(peer);
            let end = tokio::time::timeout(Duration::from_secs(10), read(&mut s, 64)).await;
            assert_eq!(end.unwrap(), b"");
        });
    }

    #[test]
    fn a_wall_clock_stamp_becomes_the_instant_it_stands_for() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        let ago = now - Duration::from_millis(40);
        let at = arrival(ago.as_secs() as i64, ago.subsec_nanos() as i64).unwrap();
        let age = Instant::now().duration_since(at);
        assert!(
            age >= Duration::from_millis(40) && age < Duration::from_secs(5),
            "{age:?}"
        );
        // A stamp from before a clock step, either way, is no stamp.
        let far = now - Duration::from_secs(3600);
        assert_eq!(arrival(far.as_secs() as i64, 0), None);
        let ahead = now + Duration::from_secs(5);
        assert_eq!(arrival(ahead.as_secs() as i64, 0), None);
        assert_eq!(arrival(-1, 0), None);
    }
}
