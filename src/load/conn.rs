//! The client's HTTP/1.1 keep-alive connections, one per request in flight.
//!
//! A request takes a connection from the pool and drives it in its own task:
//! the request is written in the same poll that took its send time, and each
//! chunk is read, parsed and timed where it arrives, without a hop through a
//! separate connection task (which would add a wake-up per chunk and, with
//! many requests starting at once, queueing between the send time and the
//! write). No proxies: benchmarks talk to the server directly.

use super::rounds::Rounds;
use super::wire::{Stamp, WireStream};
use super::{LoadError, UrlProblem};
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

type Driver = Pin<Box<Connection<TokioIo<WireStream>, Full<Bytes>>>>;

/// One open connection: the handle requests are sent on, the future that
/// does its I/O (polled by whoever is using the connection), and when the
/// bytes of its latest read arrived.
pub struct Conn {
    sender: SendRequest<Full<Bytes>>,
    driver: Option<Driver>,
    stamp: Arc<Stamp>,
    /// The connection wakes its body's reader, the task polling both, from
    /// inside that poll: another round of it, not a trip through the runtime.
    rounds: Rounds,
}

/// Await `fut` while driving the connection's I/O in the same task.
async fn drive_with<F: Future>(driver: &mut Option<Driver>, rounds: &Rounds, fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    poll_fn(|cx| {
        rounds.poll(cx, |cx| {
            if let Some(d) = driver.as_mut() {
                if d.as_mut().poll(cx).is_ready() {
                    // Closed (by either side): whatever is pending now ends.
                    *driver = None;
                }
            }
            fut.as_mut().poll(cx)
        })
    })
    .await
}

impl Conn {
    /// When the bytes of this connection's latest read reached the machine
    /// (the kernel's receive timestamp), where the platform says.
    pub fn arrival(&self) -> Option<std::time::Instant> {
        self.stamp.arrival()
    }

    /// When the latest request's first bytes went to the socket, on the wire
    /// clock.
    pub fn sent(&self) -> Option<std::time::Instant> {
        self.stamp.sent()
    }

    /// Await `fut` (e.g. the next body frame) while driving the connection.
    pub async fn drive<F: Future>(&mut self, fut: F) -> F::Output {
        drive_with(&mut self.driver, &self.rounds, fut).await
    }

    /// Send a request and await its response head.
    pub async fn send(
        &mut self,
        req: hyper::Request<Full<Bytes>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, hyper::Error> {
        let Conn {
            sender,
            driver,
            stamp,
            rounds,
        } = self;
        drive_with(driver, rounds, poll_fn(|cx| sender.poll_ready(cx))).await?;
        stamp.unsent();
        // Queued inside the poll: its wake of the connection is a round.
        let fut = async { sender.send_request(req).await };
        drive_with(driver, rounds, fut).await
    }

    /// Whether the connection can take another request now: its driver has not
    /// seen the server close it.
    async fn still_open(&mut self) -> bool {
        let Conn { driver, rounds, .. } = self;
        poll_fn(|cx| {
            Poll::Ready(match driver.as_mut() {
                Some(d) => rounds.poll(cx, |cx| d.as_mut().poll(cx)).is_pending(),
                None => false,
            })
        })
        .await
            && self.sender.is_ready()
    }
}

/// Where requests go, and the idle connections to it.
pub struct Pool {
    host: String,
    port: u16,
    /// `host:port` for the Host header.
    authority: String,
    /// Path prefix of the base URL, without a trailing slash.
    pub prefix: String,
    idle: Mutex<Vec<Conn>>,
    /// Streams the server kept open after `[DONE]` (closed by the client),
    /// since the last [`Pool::take_lingering`].
    lingering: AtomicU64,
    /// Streams whose end is being read aside after `[DONE]`.
    draining: AtomicU64,
    /// Told when the last end read aside is done.
    drained: tokio::sync::Notify,
}

impl Pool {
    /// A pool for `http://host[:port][/prefix]`.
    pub fn new(base: &str) -> Result<Pool, LoadError> {
        let bad = |why: UrlProblem| LoadError::BadUrl {
            url: base.to_string(),
            why,
        };
        let uri: hyper::Uri = base.parse().map_err(|e| bad(UrlProblem::NotUrl(e)))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some(other) => return Err(bad(UrlProblem::Scheme(other.to_string()))),
            None => return Err(bad(UrlProblem::NoScheme)),
        }
        let host = uri
            .host()
            .ok_or_else(|| bad(UrlProblem::NoHost))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(80);
        Ok(Pool {
            authority: uri
                .authority()
                .map(|a| a.as_str().to_string())
                .unwrap_or_else(|| host.clone()),
            host,
            port,
            prefix: uri.path().trim_end_matches('/').to_string(),
            idle: Mutex::new(Vec::new()),
            lingering: AtomicU64::new(0),
            draining: AtomicU64::new(0),
            drained: tokio::sync::Notify::new(),
        })
    }

    /// After `[DONE]`: the rest of the body is read so the connection can
    /// serve a later request, at once when it is already here (the usual
    /// case), else aside for at most [`DRAIN_WAIT`], never holding the
    /// request up. A server that keeps the stream open (or streaming) past
    /// that is counted ([`Pool::take_lingering`]) and its connection closed.
    pub fn finish(self: &Arc<Self>, conn: Conn, body: Incoming) {
        let mut rest = Box::pin(read_rest(conn, body));
        if let Some(rest) = (&mut rest).now_or_never() {
            self.settle(rest);
            return;
        }
        self.draining.fetch_add(1, Relaxed);
        let pool = self.clone();
        tokio::spawn(async move {
            let rest = tokio::time::timeout(DRAIN_WAIT, rest)
                .await
                .unwrap_or(Rest::Endless);
            pool.settle(rest);
            if pool.draining.fetch_sub(1, Relaxed) == 1 {
                pool.drained.notify_waiters();
            }
        });
    }

    fn settle(&self, rest: Rest) {
        match rest {
            Rest::Clean(conn) => self.put(conn),
            Rest::Broken => {}
            Rest::Endless => {
                self.lingering.fetch_add(1, Relaxed);
            }
        }
    }

    /// How many streams the server kept open after `[DONE]` since last
    /// asked, once the ends being read aside are read or given up (waiting
    /// no longer than `limit`).
    pub async fn take_lingering(&self, limit: Duration) -> u64 {
        let _ = tokio::time::timeout(limit, async {
            loop {
                let drained = self.drained.notified();
                let mut drained = std::pin::pin!(drained);
                drained.as_mut().enable();
                if self.draining.load(Relaxed) == 0 {
                    return;
                }
                drained.await;
            }
        })
        .await;
        self.lingering.swap(0, Relaxed)
    }

    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// An idle connection that is still open, if there is one.
    pub async fn take(&self) -> Option<Conn> {
        loop {
            let c = self.idle.lock().ok()?.pop();
            let mut c = c?;
            if c.still_open().await {
                return Some(c);
            }
        }
    }

    /// Open a new connection (Nagle off: small SSE chunks must not wait).
    pub async fn connect(&self) -> Result<Conn, LoadError> {
        let addr = || format!("{}:{}", self.host, self.port);
        let stream = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|err| LoadError::Connect { addr: addr(), err })?;
        let _ = stream.set_nodelay(true);
        let stream = WireStream::new(stream);
        let stamp = stream.stamp();
        let (sender, driver) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|err| LoadError::Handshake { addr: addr(), err })?;
        Ok(Conn {
            sender,
            driver: Some(Box::pin(driver)),
            stamp,
            rounds: Rounds::default(),
        })
    }

    /// Open connections until `n` are idle (a few at a time), so the first
    /// measured requests do not pay for TCP and HTTP set-up. Failures are left
    /// for the requests themselves to meet and report.
    pub async fn prewarm(&self, n: usize) {
        let have = self.idle.lock().map(|i| i.len()).unwrap_or(n);
        let mut missing = n.saturating_sub(have);
        while missing > 0 {
            let batch = missing.min(32);
            let opened = futures_util::future::join_all((0..batch).map(|_| self.connect())).await;
            let mut ok = 0;
            for c in opened.into_iter().flatten() {
                self.put(c);
                ok += 1;
            }
            if ok == 0 {
                return;
            }
            missing -= batch;
        }
    }

    /// Give a connection back after a request that completed cleanly.
    pub fn put(&self, c: Conn) {
        if c.driver.is_some() {
            if let Ok(mut idle) = self.idle.lock() {
                idle.push(c);
            }
        }
    }
}

/// How long the end of a body after `[DONE]` is waited for, aside.
const DRAIN_WAIT: Duration = Duration::from_millis(200);
/// The most frames read after `[DONE]`: a server still streaming is closed.
const DRAIN_FRAMES: usize = 64;

/// How a body ended after `[DONE]`.
enum Rest {
    /// Cleanly: the connection can serve another request.
    Clean(Conn),
    /// With an error: the connection is dropped.
    Broken,
    /// Not at all (still open, or still streaming).
    Endless,
}

async fn read_rest(mut conn: Conn, mut body: Incoming) -> Rest {
    for _ in 0..DRAIN_FRAMES {
        match conn.drive(body.frame()).await {
            Some(Ok(_)) => continue,
            Some(Err(_)) => return Rest::Broken,
            None => return Rest::Clean(conn),
        }
    }
    Rest::Endless
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_parse_or_say_why_not() {
        let p = Pool::new("http://127.0.0.1:30000").unwrap();
        assert_eq!(
            (p.host.as_str(), p.port, p.prefix.as_str()),
            ("127.0.0.1", 30000, "")
        );
        assert_eq!(p.authority(), "127.0.0.1:30000");
        let p = Pool::new("http://gpu-box/api/").unwrap();
        assert_eq!(
            (p.host.as_str(), p.port, p.prefix.as_str()),
            ("gpu-box", 80, "/api")
        );
        let p = Pool::new("http://[::1]:8000").unwrap();
        assert_eq!(p.host, "::1");
        assert!(Pool::new("https://x:1")
            .err()
            .unwrap()
            .to_string()
            .contains("only http://"));
        assert!(Pool::new("127.0.0.1:30000").is_err());
        assert!(Pool::new("http://").is_err());
    }
}
