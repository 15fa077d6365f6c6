//! The run directory's files the dashboard reads and writes: the export (`e`),
//! a recorded run's server log of the selected config, the results re-read
//! when the view fell behind.

use std::path::Path;

use super::App;
use crate::model::Level;
use crate::store;
use crate::view::grid::Grid;
use crate::view::state::{LineKind, LogLine, LogTail, ViewState};

pub const EXPORT_CSV: &str = "results.csv";
pub const EXPORT_MD: &str = "results.md";

impl App {
    /// `e`: the grid as CSV and Markdown, from the recorded results, into the run directory.
    pub(super) fn export(&mut self) {
        let results = match store::read_results(&self.run_dir) {
            Ok(r) => r,
            Err(e) => {
                self.flash(Level::Error, format!("export failed: {e}"));
                return;
            }
        };
        let plan = self.view.plan.clone();
        let servers = store::read_servers(&self.run_dir);
        let mut written = Vec::new();
        for (format, name) in [
            (crate::export::Format::Csv, EXPORT_CSV),
            (crate::export::Format::Md, EXPORT_MD),
        ] {
            let path = self.run_dir.join(name);
            let text = crate::export::render(format, plan.clone(), &results.records, &servers);
            if let Err(e) = std::fs::write(&path, text) {
                self.flash(
                    Level::Error,
                    format!("export failed: {}: {e}", path.display()),
                );
                return;
            }
            written.push(path.display().to_string());
        }
        self.flash(
            Level::Info,
            format!(
                "exported {} cells → {}",
                results.records.len(),
                written.join(", ")
            ),
        );
    }

    pub(super) fn reload_results(&mut self) {
        if let Ok(results) = store::read_results(&self.run_dir) {
            for r in results.records {
                self.view.record(r);
            }
        }
        if self.view.plan.is_none() {
            self.grid = Grid::build(&self.view);
        }
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
        self.view.log = read_log_file(&self.run_dir, &config, &self.view);
        self.ui.log_shown = self.view.log.pushed;
        self.log_file_config = Some(config);
        self.ui.log_back = 0;
        self.ui.follow = true;
    }
}

/// The tail of a config's server log, marked: lines a failure quotes as evidence,
/// the plan's ready line, and sweeptop's own `#` lines.
fn read_log_file(run_dir: &Path, config: &str, view: &ViewState) -> LogTail {
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
    let evidence: std::collections::HashSet<&str> = view
        .records
        .values()
        .filter(|r| r.config == config)
        .filter_map(|r| r.failure.as_ref())
        .flat_map(|f| f.evidence.iter().map(|l| l.trim_end()))
        .collect();
    let ready = view
        .plan
        .as_ref()
        .and_then(|p| p.config(config))
        .and_then(|c| c.ready.log_line.clone());
    for line in text.lines() {
        let kind = if line.starts_with("# sweeptop ") {
            LineKind::Note
        } else if evidence.contains(line.trim_end()) {
            LineKind::Failure
        } else if ready.as_deref().is_some_and(|r| line.contains(r)) {
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
