//! The run directory's files, as the app sees them: it asks for disk work
//! (the export, the log file of a selected config that does not run, the results
//! re-read after the view fell behind) and applies what comes back; the
//! [`Worker`](crate::tui::disk::Worker) does it off the dashboard's thread.

use super::{App, Redraw};
use crate::model::Level;
use crate::tui::disk::{Done, Job};
use crate::view::grid::Grid;

impl App {
    /// The disk work asked for since the last call, for the worker.
    pub fn take_jobs(&mut self) -> Vec<Job> {
        std::mem::take(&mut self.jobs)
    }

    /// `e`: the grid as CSV and Markdown, from the recorded results, into the run directory.
    pub(super) fn export(&mut self) {
        self.jobs.push(Job::Export {
            run_dir: self.run_dir.clone(),
            plan: self.view.plan.clone(),
        });
    }

    /// The view fell behind the events: re-read the results.
    pub(super) fn reload_results(&mut self) {
        self.jobs.push(Job::Results {
            run_dir: self.run_dir.clone(),
        });
    }

    /// Apply what disk work found.
    pub(super) fn disk_done(&mut self, done: Done) -> Redraw {
        match done {
            Done::Export(Ok(e)) => self.flash(
                Level::Info,
                format!("exported {} cells → {}", e.cells, e.paths.join(", ")),
            ),
            Done::Export(Err(e)) => self.flash(Level::Error, format!("export failed: {e}")),
            Done::LogFile { config, tail } => {
                if !self.log_file_read(&config, tail) {
                    return Redraw::No;
                }
            }
            Done::Results(None) => self.flash(
                Level::Warn,
                "the view fell behind, and the results could not be re-read from the run directory"
                    .into(),
            ),
            Done::Results(Some(records)) => {
                for r in records {
                    self.view.record(r);
                }
                if self.view.plan.is_none() {
                    self.grid = Grid::build(&self.view);
                }
                self.flash(
                    Level::Warn,
                    "the view fell behind; results re-read from the run directory".into(),
                );
            }
        }
        Redraw::Now
    }
}
