//! A request's task drives its connection and awaits the connection's body in
//! one poll (see [`super::conn`]). Each chunk the connection reads wakes the
//! body's reader, which is that same task, from inside its own poll; the
//! runtime takes such a wake as a yield: the task goes to the back of the
//! queue, another worker is woken to help (a futex wake and a context switch
//! on each side), and the task is polled again for nothing. That was most of
//! the CPU of a sweep streaming a few hundred tokens a second.
//!
//! [`Rounds`] polls the connection and its body with a waker of its own: a
//! wake that arrives while they are being polled is taken as one more round of
//! the same poll; a wake at any other time (the socket readable, a timer) is
//! passed to the task's own waker as usual.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;

/// The most rounds in one poll: a future woken from inside its every poll
/// still lets the task's other work (and the runtime) have a turn.
const MAX_ROUNDS: usize = 16;

const IDLE: u8 = 0;
const POLLING: u8 = 1;
const WOKEN: u8 = 2;

/// The waker handed to what a [`Rounds`] polls.
struct Relay {
    state: AtomicU8,
    /// The waker of the task that polls.
    task: AtomicWaker,
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        match self
            .state
            .compare_exchange(POLLING, WOKEN, Ordering::AcqRel, Ordering::Acquire)
        {
            // Inside the poll: its loop goes round again.
            Ok(_) => {}
            Err(WOKEN) => {}
            Err(_) => self.task.wake(),
        }
    }
}

/// Polls whatever a task drives itself, a wake from inside the poll taken as
/// another round of it.
pub struct Rounds {
    relay: Arc<Relay>,
    waker: Waker,
}

impl Default for Rounds {
    fn default() -> Self {
        let relay = Arc::new(Relay {
            state: AtomicU8::new(IDLE),
            task: AtomicWaker::new(),
        });
        Rounds {
            waker: Waker::from(relay.clone()),
            relay,
        }
    }
}

impl Rounds {
    /// Poll `f` until it is ready or rests without having been woken while
    /// it ran.
    pub fn poll<T>(
        &self,
        cx: &mut Context<'_>,
        mut f: impl FnMut(&mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        let state = &self.relay.state;
        self.relay.task.register(cx.waker());
        let mut inner = Context::from_waker(&self.waker);
        for _ in 0..MAX_ROUNDS {
            state.store(POLLING, Ordering::Release);
            if let Poll::Ready(v) = f(&mut inner) {
                // A wake during a poll that ends ready is news for the next
                // poll, which polls everything anyway.
                state.store(IDLE, Ordering::Release);
                return Poll::Ready(v);
            }
            if state
                .compare_exchange(POLLING, IDLE, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                return Poll::Pending;
            }
        }
        state.store(IDLE, Ordering::Release);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts the wakes of the task itself.
    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn task() -> (Arc<Count>, Waker) {
        let c = Arc::new(Count(AtomicUsize::new(0)));
        (c.clone(), Waker::from(c))
    }

    #[test]
    fn a_wake_from_inside_the_poll_is_another_round_not_a_task_wake() {
        let (count, waker) = task();
        let mut cx = Context::from_waker(&waker);
        let rounds = Rounds::default();
        let mut calls = 0;
        let got = rounds.poll(&mut cx, |inner| {
            calls += 1;
            if calls < 3 {
                inner.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(calls)
            }
        });
        assert_eq!(got, Poll::Ready(3));
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_wake_after_the_poll_reaches_the_task() {
        let (count, waker) = task();
        let mut cx = Context::from_waker(&waker);
        let rounds = Rounds::default();
        let mut kept = None;
        let got: Poll<()> = rounds.poll(&mut cx, |inner| {
            kept = Some(inner.waker().clone());
            Poll::Pending
        });
        assert!(got.is_pending());
        assert_eq!(count.0.load(Ordering::SeqCst), 0);
        // From another thread, as the runtime's I/O driver would.
        let w = kept.unwrap();
        std::thread::spawn(move || w.wake()).join().unwrap();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_future_woken_in_its_every_poll_still_gives_the_task_its_turn() {
        let (count, waker) = task();
        let mut cx = Context::from_waker(&waker);
        let rounds = Rounds::default();
        let mut calls = 0;
        let got: Poll<()> = rounds.poll(&mut cx, |inner| {
            calls += 1;
            inner.waker().wake_by_ref();
            Poll::Pending
        });
        assert!(got.is_pending());
        assert_eq!(calls, MAX_ROUNDS);
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "the task polls again later"
        );
    }
}
