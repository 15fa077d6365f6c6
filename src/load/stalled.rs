//! A client that cannot read for a while: what the wire clock keeps right
//! (tests of the client, its connections and the cell's figures together).

use super::client::{send, Progress, Target};
use super::{CellStats, Pool};
use crate::model::RequestRecord;
use crate::plan::Api;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const PACE: Duration = Duration::from_millis(10);
const TOKENS: usize = 20;

/// How many tokens the paced server has sent, to wait on.
#[derive(Default)]
struct Sent {
    n: std::sync::Mutex<u64>,
    more: std::sync::Condvar,
}

impl Sent {
    fn add(&self) {
        *self.n.lock().unwrap() += 1;
        self.more.notify_all();
    }

    fn get(&self) -> u64 {
        *self.n.lock().unwrap()
    }

    /// Block this thread until `n` are sent (at most 10 s).
    fn wait_for(&self, n: u64) {
        let sent = self.n.lock().unwrap();
        let _ = self
            .more
            .wait_timeout_while(sent, Duration::from_secs(10), |s| *s < n);
    }
}

/// One streamed request, a token every `PACE` at least (the pause is
/// taken after each write, so a late server is never faster).
fn paced_server(sent: Arc<Sent>) -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let _ = s.set_nodelay(true);
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the client closed before sending");
            got.extend_from_slice(&buf[..n]);
        }
        let chunk = |s: &mut std::net::TcpStream, data: &str| {
            let event = format!("data: {data}\n\n");
            let _ = write!(s, "{:x}\r\n{event}\r\n", event.len());
        };
        let _ = s.write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        );
        for _ in 0..TOKENS {
            std::thread::sleep(PACE);
            chunk(&mut s, r#"{"choices":[{"text":" t"}]}"#);
            sent.add();
        }
        chunk(
            &mut s,
            &format!(
                r#"{{"choices":[],"usage":{{"prompt_tokens":3,"completion_tokens":{TOKENS}}}}}"#
            ),
        );
        chunk(&mut s, "[DONE]");
        let _ = s.write_all(b"0\r\n\r\n");
        let _ = s.read(&mut buf);
    });
    port
}

/// The one streamed request to the paced server on `port`.
async fn request(port: u16) -> RequestRecord {
    let t = Target {
        cache_prompt: None,
        base: format!("http://127.0.0.1:{port}"),
        api: Api::Completions,
        model: "m".into(),
    };
    let pool = Arc::new(Pool::new(&t.base).unwrap());
    send(
        &pool,
        &t,
        &[&super::client::JsonText::new("x")],
        TOKENS as u32,
        Duration::from_secs(30),
        &Arc::new(Progress::new()),
    )
    .await
}

/// The figures of one request, its chunks timed on `times`.
fn itls(rec: &RequestRecord, times: Vec<u64>) -> (f64, f64) {
    let mut rec = rec.clone();
    for (c, t) in rec.chunks.iter_mut().zip(times) {
        c.0 = t;
    }
    rec.read_lag_us.clear();
    let mut stats = CellStats::new();
    stats.add(&rec);
    let m = stats.metrics(1_000_000_000);
    (m.itl_ms_p50.unwrap(), m.itl_ms_mean.unwrap())
}

/// The runtime's only thread is blocked while most tokens arrive:
/// read when the client got to them, the tokens queued meanwhile seem to
/// have come microseconds apart; on the wire clock every gap stays at the
/// server's pace (the queued ones share their read's arrival, and that
/// read's tokens the time since the read before).
#[tokio::test(flavor = "current_thread")]
async fn a_blocked_client_keeps_the_servers_pace_on_the_wire_clock() {
    let sent = Arc::new(Sent::default());
    let port = paced_server(sent.clone());
    let hog = tokio::spawn(async move {
        while sent.get() < 3 {
            tokio::task::yield_now().await;
        }
        // Blocks the runtime thread (nothing is read meanwhile) until all
        // but the last two tokens are sent, however slow the machine.
        sent.wait_for(TOKENS as u64 - 2);
    });
    let rec = request(port).await;
    hog.await.unwrap();
    assert!(rec.ok(), "{:?}", rec.error);
    assert_eq!(rec.chunks.len(), TOKENS);
    assert_eq!(rec.read_lag_us.len(), TOKENS, "both clocks for every chunk");

    let wire: Vec<u64> = rec.chunks.iter().map(|c| c.0).collect();
    let read: Vec<u64> = rec
        .chunks
        .iter()
        .zip(&rec.read_lag_us)
        .map(|(c, lag)| c.0 + u64::from(*lag) * 1000)
        .collect();
    let smallest_gap = |times: &[u64]| {
        times
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]))
            .min()
            .unwrap() as f64
            / 1e6
    };
    assert!(
        smallest_gap(&read) < 2.0,
        "the queued tokens were read in a burst: {read:?}"
    );

    let (read_p50, read_mean) = itls(&rec, read);
    let (wire_p50, wire_mean) = itls(&rec, wire.clone());
    let (min_ms, pace_ms) = (9.5, PACE.as_secs_f64() * 1e3);
    assert!(
        wire_p50 >= min_ms && wire_mean >= min_ms,
        "wire ITL p50 {wire_p50:.2} ms, mean {wire_mean:.2} ms, the server paced {pace_ms} ms"
    );
    assert!(
        read_p50 < wire_p50,
        "read ITL p50 {read_p50:.2} ms vs wire {wire_p50:.2} ms (read mean {read_mean:.2})"
    );
    // The cell's own figures are the wire clock's, with the lag said.
    let mut stats = CellStats::new();
    stats.add(&rec);
    let m = stats.metrics(1_000_000_000);
    assert!(m.itl_ms_p50.unwrap() >= min_ms, "{m:?}");
    // The tokens queued during the block came in one read: said, and
    // its lag is that of its last segment (the kernel keeps one arrival
    // per read), so the lag is only a lower bound of the client's delay.
    assert!(m.client_lag_ms_p99.is_some(), "{m:?}");
    assert!(m.coalesced_reads.unwrap() >= 1, "{m:?}");
    // Every ITL sample (hence the p1) stays at the server's pace.
    assert!(
        stats_min_itl(&rec) >= min_ms,
        "the smallest wire ITL: {:.2} ms",
        stats_min_itl(&rec)
    );
}

/// The smallest per-token gap on the wire clock, as the cell spreads a
/// read's tokens over the time since the read before.
fn stats_min_itl(rec: &RequestRecord) -> f64 {
    let mut min = f64::MAX;
    let mut prev: Option<u64> = None;
    let mut i = 0;
    while i < rec.chunks.len() {
        let at = rec.chunks[i].0;
        let n = rec.chunks[i..].iter().take_while(|c| c.0 == at).count();
        if let Some(p) = prev {
            min = min.min((at - p) as f64 / 1e6 / n as f64);
        }
        prev = Some(at);
        i += n;
    }
    min
}

/// Counts the wakes of the future it wraps, and those from inside its own
/// poll (which the runtime takes as a yield: a wasted poll and a worker
/// woken to help).
struct Spy<F> {
    inner: F,
    wakes: Arc<Wakes>,
}

#[derive(Default)]
struct Wakes {
    polling: std::sync::atomic::AtomicBool,
    all: AtomicU64,
    inside: AtomicU64,
}

struct SpyWaker {
    outer: std::task::Waker,
    wakes: Arc<Wakes>,
}

impl std::task::Wake for SpyWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.all.fetch_add(1, Ordering::SeqCst);
        if self.wakes.polling.load(Ordering::SeqCst) {
            self.wakes.inside.fetch_add(1, Ordering::SeqCst);
        }
        self.outer.wake_by_ref();
    }
}

impl<F: std::future::Future + Unpin> std::future::Future for Spy<F> {
    type Output = F::Output;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let waker = std::task::Waker::from(Arc::new(SpyWaker {
            outer: cx.waker().clone(),
            wakes: self.wakes.clone(),
        }));
        self.wakes.polling.store(true, Ordering::SeqCst);
        let got =
            std::pin::Pin::new(&mut self.inner).poll(&mut std::task::Context::from_waker(&waker));
        self.wakes.polling.store(false, Ordering::SeqCst);
        got
    }
}

/// Each chunk the connection reads is handed to the request's reader, the
/// same task: never by waking that task from inside its own poll.
#[tokio::test(flavor = "current_thread")]
async fn a_streamed_request_is_woken_by_its_socket_not_by_itself() {
    let port = paced_server(Arc::default());
    let wakes = Arc::new(Wakes::default());
    let rec = Spy {
        inner: Box::pin(request(port)),
        wakes: wakes.clone(),
    }
    .await;
    assert!(rec.ok(), "{:?}", rec.error);
    assert_eq!(rec.chunks.len(), TOKENS);
    let (all, inside) = (
        wakes.all.load(Ordering::SeqCst),
        wakes.inside.load(Ordering::SeqCst),
    );
    assert!(
        all >= TOKENS as u64,
        "{all} wakes for {TOKENS} paced tokens"
    );
    assert_eq!(
        inside, 0,
        "{inside} of {all} wakes came from inside the poll"
    );
}
