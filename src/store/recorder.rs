//! The open run's writes — results, events, `run.json`, `server.pid` — on a thread of their own, in the
//! order they were asked for. A run directory on a disk that stalls (a hung
//! network mount, a filer failing over) holds that thread, never a worker of
//! the sweep's runtime: requests go on being timed, the views and signals
//! answered, and the stall is watched ([`Recorder::stalled`]) and told.
//!
//! A cell is recorded once its line is written and fsynced; one whose line
//! still waits when the process dies is not in `results.jsonl` and runs
//! again on `--resume`, so every cell is there exactly once either way. The
//! end of the sweep waits for the queue only until a deadline.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::error::StoreError;
use super::run_dir::RunDir;
use crate::model::{CellRecord, Event, Level, RunState};

/// How a problem of the writing thread is told (a notice to the views).
pub type Tell = Box<dyn Fn(Level, String) + Send>;

pub struct Recorder {
    jobs: std_mpsc::Sender<Job>,
    shared: Arc<Shared>,
}

enum Job {
    Result(Box<CellRecord>),
    Event(Box<Event>),
    Servers(Vec<(u32, u64)>),
    State(RunState, oneshot::Sender<Result<(), StoreError>>),
}

#[derive(Default)]
struct Shared {
    /// The write in progress: since when, and to which file.
    busy: Mutex<Option<(Instant, &'static str)>>,
    /// Results asked for and not yet written (queued or in progress).
    results_waiting: AtomicUsize,
    /// The first write of `results.jsonl` that failed: the sweep stops on it.
    failed: Mutex<Option<Arc<StoreError>>>,
}

/// A write that has not returned for a while.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stall {
    pub file: &'static str,
    pub for_s: f64,
    /// Results waiting behind it (or in it).
    pub results_waiting: usize,
}

/// The end of the sweep could not be recorded in time.
#[derive(Debug, thiserror::Error)]
pub enum Unrecorded {
    #[error(
        "the run directory did not answer within {}s ({} result(s) not written; \
         they run again on --resume)", .limit.as_secs(), .results_waiting
    )]
    Stuck {
        limit: Duration,
        results_waiting: usize,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Recorder {
    /// Take `run` over on a thread named `run-dir`. `tell` hears an event
    /// that could not be written (the sweep goes on: events are the story,
    /// results the data).
    pub fn start(run: RunDir, tell: Tell) -> std::io::Result<Recorder> {
        let (jobs, rx) = std_mpsc::channel::<Job>();
        let shared = Arc::new(Shared::default());
        let s = shared.clone();
        std::thread::Builder::new()
            .name("run-dir".into())
            .spawn(move || work(run, rx, &s, &tell))?;
        Ok(Recorder { jobs, shared })
    }

    /// Queue a finished cell's line. An earlier result that could not be
    /// written is the error here: the sweep stops on it.
    pub fn result(&self, record: &CellRecord) -> Result<(), StoreError> {
        if let Some(e) = self.failed() {
            return Err(StoreError::Earlier(e));
        }
        self.shared.results_waiting.fetch_add(1, Ordering::SeqCst);
        if self
            .jobs
            .send(Job::Result(Box::new(record.clone())))
            .is_err()
        {
            self.shared.results_waiting.fetch_sub(1, Ordering::SeqCst);
            return Err(gone());
        }
        Ok(())
    }

    pub fn event(&self, event: &Event) {
        let _ = self.jobs.send(Job::Event(Box::new(event.clone())));
    }

    /// The live servers' process groups, for a later `--resume` to stop.
    pub fn servers(&self, live: Vec<(u32, u64)>) {
        let _ = self.jobs.send(Job::Servers(live));
    }

    /// Record where the run stands once everything asked before is
    /// written, waiting at most `limit`.
    pub async fn finish(&self, state: RunState, limit: Duration) -> Result<(), Unrecorded> {
        let (tx, rx) = oneshot::channel();
        self.jobs.send(Job::State(state, tx)).map_err(|_| gone())?;
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(done)) => {
                done?;
                match self.failed() {
                    Some(e) => Err(StoreError::Earlier(e).into()),
                    None => Ok(()),
                }
            }
            Ok(Err(_)) => Err(gone().into()),
            Err(_) => Err(Unrecorded::Stuck {
                limit,
                results_waiting: self.results_waiting(),
            }),
        }
    }

    /// The write in progress, when it has not returned for `at_least`.
    pub fn stalled(&self, at_least: Duration) -> Option<Stall> {
        let busy = *self.shared.busy.lock().unwrap_or_else(|p| p.into_inner());
        let (since, file) = busy?;
        let for_ = since.elapsed();
        (for_ >= at_least).then(|| Stall {
            file,
            for_s: for_.as_secs_f64(),
            results_waiting: self.shared.results_waiting.load(Ordering::SeqCst),
        })
    }

    /// Results asked for and not yet written.
    pub fn results_waiting(&self) -> usize {
        self.shared.results_waiting.load(Ordering::SeqCst)
    }

    fn failed(&self) -> Option<Arc<StoreError>> {
        self.shared
            .failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

fn gone() -> StoreError {
    StoreError::Io {
        path: "run directory".into(),
        source: std::io::Error::other("its writing thread is gone"),
    }
}

fn work(mut run: RunDir, jobs: std_mpsc::Receiver<Job>, shared: &Shared, tell: &Tell) {
    let busy = |file: Option<&'static str>| {
        *shared.busy.lock().unwrap_or_else(|p| p.into_inner()) = file.map(|f| (Instant::now(), f));
    };
    while let Ok(job) = jobs.recv() {
        match job {
            Job::Result(record) => {
                busy(Some(super::RESULTS));
                let done = run.append_result(&record);
                busy(None);
                shared.results_waiting.fetch_sub(1, Ordering::SeqCst);
                if let Err(e) = done {
                    tell(
                        Level::Error,
                        format!("cannot write {}: {e}; the sweep stops", super::RESULTS),
                    );
                    let mut failed = shared.failed.lock().unwrap_or_else(|p| p.into_inner());
                    failed.get_or_insert(Arc::new(e));
                }
            }
            Job::Event(event) => {
                busy(Some(super::EVENTS));
                let done = run.append_event(&event);
                busy(None);
                if let Err(e) = done {
                    tell(Level::Error, format!("cannot write {}: {e}", super::EVENTS));
                }
            }
            Job::Servers(live) => {
                busy(Some(super::SERVER_PID));
                let done = run.record_servers(&live);
                busy(None);
                if let Err(e) = done {
                    tell(
                        Level::Warn,
                        format!("cannot record the servers' process groups: {e}"),
                    );
                }
            }
            Job::State(state, answer) => {
                busy(Some(super::META));
                let done = run.set_state(state);
                busy(None);
                let _ = answer.send(done);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Status, Timestamp};

    fn scratch(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("sweeptop-rec-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[tokio::test]
    async fn results_and_events_land_in_order_and_the_end_waits_for_them() {
        let dir = scratch("order");
        let run = RunDir::create(&dir, "p", "name = \"p\"\n").unwrap();
        let rec = Recorder::start(run, Box::new(|_, _| {})).unwrap();
        for i in 0..50 {
            let r = crate::model::sample_record(&format!("a/c{i}"), Status::Ok, "");
            rec.result(&r).unwrap();
            rec.event(&Event::Notice {
                at: Timestamp::now(),
                level: Level::Info,
                message: format!("n{i}"),
            });
        }
        rec.finish(RunState::Finished, Duration::from_secs(30))
            .await
            .unwrap();
        let results = super::super::read_results(&dir).unwrap();
        let cells: Vec<_> = results.records.iter().map(|r| r.cell.clone()).collect();
        let want: Vec<_> = (0..50).map(|i| format!("a/c{i}")).collect();
        assert_eq!(cells, want);
        let events = std::fs::read_to_string(dir.join(super::super::EVENTS)).unwrap();
        let at = |s: &str| events.find(&format!("\"{s}\"")).unwrap();
        assert!(at("n0") < at("n49"));
        assert_eq!(
            super::super::read_meta(&dir).unwrap().state,
            RunState::Finished
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test]
    async fn a_write_that_hangs_holds_the_thread_not_the_caller() {
        let dir = scratch("hang");
        let run = RunDir::create(&dir, "p", "name = \"p\"\n").unwrap();
        // server.pid a FIFO: opening it to write waits for a reader.
        let fifo = dir.join(super::super::SERVER_PID);
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let rec = Recorder::start(run, Box::new(|_, _| {})).unwrap();
        rec.servers(vec![(4242, 7)]);
        let r = crate::model::sample_record("a/c1", Status::Ok, "");
        rec.result(&r).unwrap();
        // The caller went on; the thread waits on the FIFO.
        let end = rec
            .finish(RunState::Finished, Duration::from_millis(200))
            .await;
        assert!(
            matches!(
                end,
                Err(Unrecorded::Stuck {
                    results_waiting: 1,
                    ..
                })
            ),
            "{end:?}"
        );
        let stall = rec.stalled(Duration::ZERO).unwrap();
        assert_eq!(
            (stall.file, stall.results_waiting),
            (super::super::SERVER_PID, 1)
        );
        // A reader comes: everything asked for lands, in order.
        let reader = std::thread::spawn(move || std::fs::read_to_string(&fifo));
        rec.finish(RunState::Finished, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(reader.join().unwrap().unwrap(), "4242 7\n");
        assert!(rec.stalled(Duration::ZERO).is_none());
        let results = super::super::read_results(&dir).unwrap();
        assert_eq!(results.records.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
