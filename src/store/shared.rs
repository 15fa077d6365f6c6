//! Files on shared paths (a run directory on a network filesystem, a file a
//! user or script put there) may hang (a dead mount) or never end (a FIFO).
//! Work on them runs on a thread of its own and is waited for only until a
//! deadline, so the async runtime, the sweep's signals and its exit never
//! wait on it; such a file is opened without blocking and refused unless it
//! is a regular file.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use std::sync::mpsc as std_mpsc;
use std::time::Duration;

use tokio::sync::oneshot;

/// How long a piece of file work on a shared path is waited for.
pub const FILE_DEADLINE: Duration = Duration::from_secs(2);

/// `path` opened for reading without waiting on it (a FIFO with no writer
/// would wait forever), and refused unless it is a regular file: a FIFO, a
/// device or a socket never reads as a file that ends.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let kind = f.metadata()?.file_type();
    if kind.is_file() {
        return Ok(f);
    }
    let what = if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_dir() {
        "a directory"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("not a regular file ({what}), refused"),
    ))
}

/// A piece of file work that did not answer within its deadline (it goes
/// on alone), or that failed without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no answer from the file within {}s (a hung mount, or a file that never ends?)", .0.as_secs_f64())]
pub struct Stuck(pub Duration);

type Job = Box<dyn FnOnce() + Send>;

/// File work for one follower (the commands file, the heartbeat, a
/// viewer's tail) on a thread of its own, one piece at a time: a file that
/// hangs holds that one thread, never a worker of the runtime nor a new
/// thread per poll.
pub struct FileWork<T> {
    name: &'static str,
    jobs: Option<std_mpsc::Sender<Job>>,
    /// The answer of a job that missed its deadline and has not come yet.
    pending: Option<oneshot::Receiver<T>>,
}

impl<T: Send + 'static> FileWork<T> {
    /// `name` names the thread (as `ps -L` shows it).
    pub fn new(name: &'static str) -> FileWork<T> {
        FileWork {
            name,
            jobs: None,
            pending: None,
        }
    }

    /// Whether a job that missed its deadline is still running.
    pub fn is_stuck(&self) -> bool {
        self.pending.is_some()
    }

    /// `job`'s answer, or [`Stuck`] after `limit`. While an earlier job that
    /// missed its deadline is still running, `job` is dropped and that one's
    /// answer is waited for instead (it was asked from the same state, so
    /// it is as good).
    pub async fn run(
        &mut self,
        limit: Duration,
        job: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Stuck> {
        let mut answer = match self.pending.take() {
            Some(answer) => answer,
            None => {
                let (tx, rx) = oneshot::channel();
                let job: Job = Box::new(move || {
                    let _ = tx.send(job());
                });
                if let Err(std_mpsc::SendError(job)) = self.thread().send(job) {
                    // The thread is gone (a job panicked): a new one.
                    self.jobs = None;
                    if self.thread().send(job).is_err() {
                        return Err(Stuck(limit));
                    }
                }
                rx
            }
        };
        match tokio::time::timeout(limit, &mut answer).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err(Stuck(limit)),
            Err(_) => {
                self.pending = Some(answer);
                Err(Stuck(limit))
            }
        }
    }

    fn thread(&mut self) -> &std_mpsc::Sender<Job> {
        self.jobs.get_or_insert_with(|| {
            let (tx, rx) = std_mpsc::channel::<Job>();
            // Detached: the process exits without waiting for it.
            let spawned = std::thread::Builder::new()
                .name(self.name.to_string())
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        job();
                    }
                });
            // Without a thread the job's sender is dropped, and the caller
            // hears no answer.
            drop(spawned);
            tx
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let d = std::env::temp_dir().join(format!("sweeptop-shared-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let fifo = d.join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let e = open_regular(&fifo).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        let e = open_regular(&d).unwrap_err();
        assert!(e.to_string().contains("directory"), "{e}");
        std::fs::write(d.join("f"), "x").unwrap();
        assert!(open_regular(&d.join("f")).is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[tokio::test]
    async fn a_hung_job_is_waited_for_once_and_its_late_answer_kept() {
        let mut work = FileWork::<u32>::new("test-file-work");
        let (release, hold) = std_mpsc::channel::<()>();
        let started = Arc::new(AtomicUsize::new(0));
        let s = started.clone();
        let limit = Duration::from_millis(50);
        let r = work
            .run(limit, move || {
                s.fetch_add(1, Ordering::SeqCst);
                let _ = hold.recv();
                1
            })
            .await;
        assert_eq!(r, Err(Stuck(limit)));
        assert!(work.is_stuck());
        // Still hung: the next job does not start beside it.
        let s = started.clone();
        let r = work
            .run(limit, move || {
                s.fetch_add(1, Ordering::SeqCst);
                2
            })
            .await;
        assert_eq!(r, Err(Stuck(limit)));
        assert_eq!(started.load(Ordering::SeqCst), 1);
        release.send(()).unwrap();
        let late = work.run(Duration::from_secs(30), || 3).await;
        assert_eq!(late, Ok(1), "the hung job's own answer");
        assert!(!work.is_stuck());
        assert_eq!(work.run(Duration::from_secs(30), || 4).await, Ok(4));
    }
}
