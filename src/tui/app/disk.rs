//! The run directory's files, as the app sees them: it asks for disk work
//! (the export, a recorded run's log file of the selected config, the results
//! re-read after the view fell behind) and applies what comes back; the
//! [`Worker`](crate::tui::disk::Worker) does it off the dashboard's thread.

use super::{App, Redraw};
use crate::model::Level;
use crate::tui::disk::{Done, Job, LogMarks};
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

    /// A read-only view shows the log file of the selected config.
    pub(super) fn load_log_file(&mut self) {
        let Some(config) = self
            .grid
            .configs
            .get(self.ui.sel_config)
            .map(|c| c.id.clone())
        else {
            return;
        };
        if self.log_file_config.as_deref() == Some(config.as_str()) {
            return;
        }
        self.jobs.push(Job::LogFile {
            run_dir: self.run_dir.clone(),
            marks: LogMarks::of(&self.view, &config),
            config: config.clone(),
        });
        self.log_file_config = Some(config);
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
                // The selection has moved on since: another read is under way.
                if self.log_file_config.as_deref() != Some(config.as_str()) {
                    return Redraw::No;
                }
                self.view.log = tail;
                self.ui.log_shown = self.view.log.pushed;
                self.ui.log_back = 0;
                self.ui.follow = true;
            }
            Done::Results(records) => {
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
