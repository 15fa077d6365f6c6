//! Disk work the dashboard asks for, done on a thread of its own so a slow
//! disk or a hung network mount delays what the work shows, never a key or a
//! frame: the export (`e`), a recorded run's server log of the selected
//! config, the results re-read after the view fell behind. What a job finds
//! goes back to the frame loop as input, and the app applies it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use crate::export::Format;
use crate::model::CellRecord;
use crate::plan::Plan;
use crate::store::{self, StoreError};
use crate::view::state::{LineKind, LogLine, LogTail, ViewState};

pub const EXPORT_CSV: &str = "results.csv";
pub const EXPORT_MD: &str = "results.md";

/// Work for the disk thread.
#[derive(Debug)]
pub enum Job {
    /// The grid as CSV and Markdown, from the recorded results, into the run directory.
    Export {
        run_dir: PathBuf,
        plan: Option<Arc<Plan>>,
    },
    /// A config's server log file, marked.
    LogFile {
        run_dir: PathBuf,
        config: String,
        marks: LogMarks,
    },
    /// Every recorded result.
    Results { run_dir: PathBuf },
}

/// What a job found.
#[derive(Debug)]
pub enum Done {
    Export(Result<Exported, ExportError>),
    LogFile {
        config: String,
        tail: LogTail,
    },
    /// `None` when the results could not be read.
    Results(Option<Vec<CellRecord>>),
}

/// An export that was written.
#[derive(Debug)]
pub struct Exported {
    /// How many cells it has.
    pub cells: usize,
    /// The files written, as the user reads them.
    pub paths: Vec<String>,
}

/// Why an export was not written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Read(#[from] StoreError),
    #[error("{}: {source}", .path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The disk thread could not be started, or has ended.
    #[error("no thread to write it on (the dashboard's disk thread is gone)")]
    NoThread,
}

/// Which lines of a config's log are marked: those a failure quotes as
/// evidence, and the plan's ready line.
#[derive(Debug, Default)]
pub struct LogMarks {
    evidence: HashSet<String>,
    ready: Option<String>,
}

impl LogMarks {
    pub fn of(view: &ViewState, config: &str) -> LogMarks {
        LogMarks {
            evidence: view
                .records
                .values()
                .filter(|r| r.config == config)
                .filter_map(|r| r.failure.as_ref())
                .flat_map(|f| f.evidence.iter().map(|l| l.trim_end().to_string()))
                .collect(),
            ready: view
                .plan
                .as_ref()
                .and_then(|p| p.config(config))
                .and_then(|c| c.ready.log_line.clone()),
        }
    }
}

impl Job {
    /// What is shown when there is no disk thread to do it: the dashboard
    /// never reads or writes a file on its own thread.
    fn not_done(self) -> Done {
        match self {
            Job::Export { .. } => Done::Export(Err(ExportError::NoThread)),
            Job::LogFile { config, .. } => {
                let mut tail = LogTail::default();
                tail.push(LogLine {
                    text: format!(
                        "(the server log of {config} cannot be read: the dashboard's disk thread is gone)"
                    ),
                    config: config.clone(),
                    kind: LineKind::Note,
                });
                Done::LogFile { config, tail }
            }
            // The view keeps what it folded from the events.
            Job::Results { .. } => Done::Results(None),
        }
    }

    /// Do it, here and now (on the disk thread).
    pub fn run(self) -> Done {
        match self {
            Job::Export { run_dir, plan } => Done::Export(export(&run_dir, plan)),
            Job::LogFile {
                run_dir,
                config,
                marks,
            } => {
                let tail = read_log_file(&run_dir, &config, &marks);
                Done::LogFile { config, tail }
            }
            Job::Results { run_dir } => {
                Done::Results(store::read_results(&run_dir).map(|r| r.records).ok())
            }
        }
    }
}

fn export(run_dir: &Path, plan: Option<Arc<Plan>>) -> Result<Exported, ExportError> {
    let results = store::read_results(run_dir)?;
    let servers = store::read_servers(run_dir);
    let mut paths = Vec::new();
    for (format, name) in [(Format::Csv, EXPORT_CSV), (Format::Md, EXPORT_MD)] {
        let path = run_dir.join(name);
        let text = crate::export::render(format, plan.clone(), &results.records, &servers);
        if let Err(source) = std::fs::write(&path, text) {
            return Err(ExportError::Write { path, source });
        }
        paths.push(path.display().to_string());
    }
    Ok(Exported {
        cells: results.records.len(),
        paths,
    })
}

/// The tail of a config's server log, marked: lines a failure quotes as evidence,
/// the plan's ready line, and sweeptop's own `#` lines.
fn read_log_file(run_dir: &Path, config: &str, marks: &LogMarks) -> LogTail {
    let mut tail = LogTail::default();
    let path = run_dir.join(store::LOGS).join(format!("{config}.log"));
    let Ok(bytes) = std::fs::read(&path) else {
        tail.push(LogLine {
            config: config.to_string(),
            text: format!(
                "(no server log for {config}: {} is missing)",
                path.display()
            ),
            kind: LineKind::Note,
        });
        return tail;
    };
    let text = String::from_utf8_lossy(&bytes);
    for line in text.lines() {
        let kind = if line.starts_with("# sweeptop ") {
            LineKind::Note
        } else if marks.evidence.contains(line.trim_end()) {
            LineKind::Failure
        } else if marks.ready.as_deref().is_some_and(|r| line.contains(r)) {
            LineKind::Ready
        } else {
            LineKind::Plain
        };
        tail.push(LogLine {
            config: config.to_string(),
            text: line.to_string(),
            kind,
        });
    }
    tail
}

/// Runs jobs in order on a thread of its own and hands each result to its
/// `deliver`.
pub struct Worker {
    /// `None` when no thread could be started.
    jobs: Option<mpsc::Sender<Job>>,
    /// Closed when the thread has ended.
    ended: mpsc::Receiver<()>,
}

impl Worker {
    /// Start the thread. `deliver` takes each result and says whether anyone
    /// still wants them (when not, the thread ends).
    pub fn start(mut deliver: impl FnMut(Done) -> bool + Send + 'static) -> Worker {
        let (jobs, queue) = mpsc::channel::<Job>();
        let (ended_tx, ended) = mpsc::channel::<()>();
        let started = std::thread::Builder::new()
            .name("sweeptop-tui-disk".into())
            .spawn(move || {
                // Dropped in reverse: the queue is closed before `ended` says so.
                let _ended = ended_tx;
                let queue = queue;
                while let Ok(first) = queue.recv() {
                    let batch: Vec<Job> = std::iter::once(first).chain(queue.try_iter()).collect();
                    for job in unsuperseded(batch) {
                        if !deliver(job.run()) {
                            return;
                        }
                    }
                }
            });
        Worker {
            jobs: started.ok().map(|_| jobs),
            ended,
        }
    }

    /// Hand a job to the thread. Without one (it could not be started, or it
    /// has ended) the job is not done, and what says so is returned at once.
    pub fn ask(&self, job: Job) -> Option<Done> {
        let job = match &self.jobs {
            Some(jobs) => match jobs.send(job) {
                Ok(()) => return None,
                Err(mpsc::SendError(job)) => job,
            },
            None => job,
        };
        Some(job.not_done())
    }

    /// Let the thread finish what it was asked, waiting at most `limit` (an
    /// export still being written); a job stuck on a hung disk is left behind.
    pub fn finish(self, limit: Duration) {
        drop(self.jobs);
        let _ = self.ended.recv_timeout(limit);
    }
}

/// The jobs in order, less each log file that a later one in the same batch
/// supersedes: the selection moved on before it was read.
fn unsuperseded(batch: Vec<Job>) -> impl Iterator<Item = Job> {
    let is_log = |j: &Job| matches!(j, Job::LogFile { .. });
    let last_log = batch.iter().rposition(is_log);
    batch
        .into_iter()
        .enumerate()
        .filter(move |(i, j)| !is_log(j) || Some(*i) == last_log)
        .map(|(_, j)| j)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_file(config: &str) -> Job {
        Job::LogFile {
            run_dir: PathBuf::from("/nonexistent"),
            config: config.into(),
            marks: LogMarks::default(),
        }
    }

    #[test]
    fn a_log_file_superseded_before_its_turn_is_not_read() {
        let batch = vec![
            log_file("a"),
            Job::Results {
                run_dir: PathBuf::from("/nonexistent"),
            },
            log_file("b"),
            log_file("c"),
        ];
        let left: Vec<String> = unsuperseded(batch)
            .map(|j| match j {
                Job::LogFile { config, .. } => config,
                Job::Results { .. } => "results".into(),
                Job::Export { .. } => "export".into(),
            })
            .collect();
        assert_eq!(left, ["results", "c"]);
    }

    #[test]
    fn without_its_thread_a_job_is_not_done_on_the_callers() {
        // A run directory whose export would be written.
        let dir = std::env::temp_dir().join(format!("sweeptop-disk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(store::RESULTS), "").unwrap();
        // The thread ends after its first job.
        let worker = Worker::start(|_| false);
        assert!(worker.ask(log_file("a")).is_none(), "handed to the thread");
        assert!(
            worker.ended.recv_timeout(Duration::from_secs(30)).is_err(),
            "the thread ended"
        );
        let export = Job::Export {
            run_dir: dir.clone(),
            plan: None,
        };
        match worker.ask(export) {
            Some(Done::Export(Err(ExportError::NoThread))) => {}
            other => panic!("an export with no thread: {other:?}"),
        }
        assert!(!dir.join(EXPORT_CSV).exists(), "nothing written here");
        match worker.ask(log_file("b")) {
            Some(Done::LogFile { config, tail }) => {
                assert_eq!(config, "b");
                let text: Vec<&str> = tail.lines.iter().map(|l| l.text.as_str()).collect();
                assert!(text[0].contains("disk thread is gone"), "{text:?}");
            }
            other => panic!("a log file with no thread: {other:?}"),
        }
        let reload = Job::Results {
            run_dir: dir.clone(),
        };
        assert!(matches!(worker.ask(reload), Some(Done::Results(None))));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
