//! Sub-millisecond sleeps for token pacing.
//!
//! tokio's timer wheel has 1 ms resolution and rounds deadlines up, which would put
//! a fixed 200 ms TTFT at 200.5 ms on average. Pacing instead registers absolute
//! deadlines with one OS thread that sleeps with a 1 µs timer slack and fires each
//! deadline on time; the awaiting task is woken through a oneshot channel.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Instant;

use tokio::sync::oneshot;

struct Entry {
    at: Instant,
    seq: u64,
    fire: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed, so that the max-heap pops the earliest deadline first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

fn timer_thread() -> Option<&'static mpsc::Sender<Entry>> {
    static TIMER: OnceLock<Option<mpsc::Sender<Entry>>> = OnceLock::new();
    TIMER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Entry>();
            std::thread::Builder::new()
                .name("sim-timer".into())
                .spawn(move || run(rx))
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

fn run(rx: mpsc::Receiver<Entry>) {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0);
    }
    let mut heap: BinaryHeap<Entry> = BinaryHeap::new();
    loop {
        let now = Instant::now();
        while heap.peek().is_some_and(|e| e.at <= now) {
            if let Some(e) = heap.pop() {
                let _ = e.fire.send(());
            }
        }
        let next = match heap.peek() {
            Some(e) => rx.recv_timeout(e.at.saturating_duration_since(now)),
            None => rx.recv().map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match next {
            Ok(e) => heap.push(e),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        }
        while let Ok(e) = rx.try_recv() {
            heap.push(e);
        }
    }
}

/// Sleeps until `at`, accurate to tens of microseconds.
pub async fn sleep_until(at: Instant) {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    if at <= Instant::now() {
        return;
    }
    let (fire, fired) = oneshot::channel();
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    match timer_thread() {
        Some(tx) if tx.send(Entry { at, seq, fire }).is_ok() => {
            let _ = fired.await;
        }
        _ => tokio::time::sleep_until(at.into()).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn fires_in_order_and_not_early() {
        let start = Instant::now();
        let mut tasks = Vec::new();
        for ms in [30u64, 10, 20, 0] {
            tasks.push(tokio::spawn(async move {
                let at = start + Duration::from_millis(ms);
                sleep_until(at).await;
                Instant::now().duration_since(at)
            }));
        }
        for t in tasks {
            let late = t.await.unwrap();
            assert!(late < Duration::from_millis(50), "late by {late:?}");
        }
    }
}
