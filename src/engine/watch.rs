//! A cell of a sweep as it runs on its config's server: the sweep's side of
//! the cell pipeline ([`Host`]). While the requests run it watches the
//! server's exit and fatal log lines, the cell timeout and the user's skips
//! and quit; the raw request records go to `requests/<cell>.jsonl`; notices
//! name the config or the cell; the GPUs are folded over the measured window.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;

use super::cell::{About, GpuFigures, Host};
use super::commands::Between;
use super::core::Core;
use super::outcome::{self, CellEnd};
use super::server::{ExitInfo, Server};
use crate::detect;
use crate::load::CellRun;
use crate::model::{Failure, FailureKind, FailureSource, Level, Timestamp};
use crate::plan::Cell;
use crate::store::RequestsWriter;

/// How long requests cut off mid-stream wait for the server's exit or last
/// words before the cell is judged.
const SETTLE: Duration = Duration::from_secs(3);

type Exited = watch::Receiver<Option<ExitInfo>>;

pub(super) struct Watch<'a> {
    pub core: &'a Core,
    /// Wakes when a command was applied.
    pub steer: &'a mut watch::Receiver<u64>,
    /// The GPUs the config runs on.
    pub gpus: &'a [u32],
    pub server: &'a mut Server,
    pub cell: &'a Cell,
    pub started_at: Timestamp,
}

impl Watch<'_> {
    fn failed(&self, f: Failure) -> crate::model::CellRecord {
        outcome::failed(self.cell, self.started_at, f)
    }

    /// The server is gone: the cause its log or exit gives.
    async fn server_died(&mut self) -> CellEnd {
        self.server.drain_logs(Duration::from_secs(2)).await;
        let f = self.server.death().unwrap_or_else(unknown_death);
        CellEnd::ServerDied(self.failed(f.clone()), f)
    }

    /// Requests cut off mid-stream usually mean the server is going down:
    /// wait briefly for its exit or its last words (news on the receivers
    /// the requests were watched with) before judging.
    async fn settle(&mut self, run: &CellRun, exit: &mut Exited, fatal: &mut watch::Receiver<u64>) {
        if !run.stats.errors.iter().any(detect::looks_like_server_gone) {
            return;
        }
        tokio::select! {
            _ = exit.changed() => {}
            _ = fatal.changed() => {
                // The cause is logged; give the process a moment to exit too.
                let _ = tokio::time::timeout(SETTLE, exit.changed()).await;
            }
            _ = tokio::time::sleep(SETTLE) => {}
        }
        if self.server.exited().is_some() {
            self.server.drain_logs(Duration::from_secs(2)).await;
        }
    }
}

impl Host for Watch<'_> {
    type Stop = CellEnd;

    fn notice(&mut self, level: Level, about: About, message: String) {
        let who = match about {
            About::Server => &self.cell.config,
            About::Cell => &self.cell.id,
        };
        self.core.notice(level, format!("{who}: {message}"));
    }

    /// Each repetition keeps its own raw records: `<cell>.jsonl`, then
    /// `<cell>.rep2.jsonl`, `<cell>.rep3.jsonl`…
    fn records(&mut self, repetition: u32) -> Option<RequestsWriter> {
        let name = match repetition {
            0 => self.cell.id.clone(),
            k => format!("{}.rep{}", self.cell.id, k + 1),
        };
        let writer =
            RequestsWriter::create(crate::store::requests_path(&self.core.run_path, &name));
        match writer {
            Ok(w) => Some(w),
            Err(e) => {
                self.notice(
                    Level::Warn,
                    About::Cell,
                    format!("raw request records not kept: {e}"),
                );
                None
            }
        }
    }

    /// Waited for only briefly: the cell's figures do not depend on the
    /// file, and a disk that hangs must not hold the sweep.
    async fn records_done(&mut self, writer: RequestsWriter) {
        match writer.finish(crate::store::shared::FILE_DEADLINE).await {
            Ok(w) if w.left_out > 0 => self.notice(
                Level::Warn,
                About::Cell,
                format!(
                    "{} raw request record(s) left out of {}: the disk did not keep up",
                    w.left_out,
                    w.path.display()
                ),
            ),
            Ok(_) => {}
            Err(e) => self.notice(
                Level::Warn,
                About::Cell,
                format!("raw request records not kept: {e}"),
            ),
        }
    }

    async fn watch<F: Future<Output = CellRun>>(
        &mut self,
        requests: F,
    ) -> Result<CellRun, CellEnd> {
        let mut exit = self.server.exit.clone();
        let mut fatal = self.server.fatal.clone();
        let cell_timeout_s = self.core.plan.limits.cell_timeout_s;
        let cell_deadline = tokio::time::sleep(Duration::from_secs_f64(cell_timeout_s));
        tokio::pin!(cell_deadline);
        tokio::pin!(requests);
        let run = loop {
            tokio::select! {
                run = &mut requests => break run,
                _ = exit.changed() => return Err(self.server_died().await),
                _ = fatal.changed() => {
                    // A fatal line: give the process a moment to exit so the
                    // failure carries its exit status and all the evidence.
                    let _ = tokio::time::timeout(SETTLE, exit.changed()).await;
                    self.server.drain_logs(Duration::from_millis(500)).await;
                    if let Some(f) = self.server.death() {
                        return Err(CellEnd::ServerDied(self.failed(f.clone()), f));
                    }
                }
                _ = &mut cell_deadline => {
                    let f = Failure::new(
                        FailureKind::RequestTimeout,
                        FailureSource::Client,
                        format!("the cell did not finish within cell_timeout_s = {cell_timeout_s}"),
                    );
                    return Err(CellEnd::Stalled(self.failed(self.server.stall_evidence(f))));
                }
                changed = self.steer.changed() => {
                    if changed.is_err() {
                        continue;
                    }
                    let skipped = || outcome::skipped(self.cell, self.started_at);
                    match self.core.interruption(&self.cell.config) {
                        Some(Between::Quit) => return Err(CellEnd::Quit),
                        Some(Between::SkipCell) => return Err(CellEnd::Skipped(skipped())),
                        Some(Between::SkipConfig) => return Err(CellEnd::SkipConfig(skipped())),
                        Some(Between::Continue) | None => {}
                    }
                }
            }
        };
        self.settle(&run, &mut exit, &mut fatal).await;
        Ok(run)
    }

    fn died(&mut self) -> Option<Failure> {
        self.server.death()
    }

    fn logged_acceptance(&mut self) -> Vec<f64> {
        self.server
            .log
            .lock()
            .map(|mut l| std::mem::take(&mut l.accept))
            .unwrap_or_default()
    }

    fn measuring(&mut self) {
        if let Some(g) = self.core.gpu() {
            g.begin_cell(&self.cell.id, self.server.pgid, self.gpus);
        }
    }

    fn measured(&mut self, windows: &[(u64, u64)]) -> Option<GpuFigures> {
        self.core
            .gpu()
            .map(|g| g.end_cell(&self.cell.id, self.server.pgid, windows))
    }
}

fn unknown_death() -> Failure {
    Failure::new(
        FailureKind::ServerExited,
        FailureSource::Exit,
        "server exited",
    )
}
