//! What running a cell needs from whoever runs it (a lane of a sweep, a lone
//! `loadtest`): where notices and raw records go, what may cut the
//! measurement short, what the server's log says, the GPUs.

use std::future::Future;

use crate::load::CellRun;
use crate::model::{Failure, Level};
use crate::store::RequestsWriter;

/// What a notice is about: the server (said once per server, as a rule), or
/// this cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum About {
    Server,
    Cell,
}

/// The GPUs over a measurement: peak memory (MiB) and mean utilisation (%).
pub(crate) type GpuFigures = (Option<u64>, Option<f64>);

/// What running a cell needs from whoever runs it.
pub(crate) trait Host {
    /// How a measurement the host cut short ended.
    type Stop;
    fn notice(&mut self, level: Level, about: About, message: String);
    /// Where a repetition's raw request records go, if anywhere.
    fn records(&mut self, repetition: u32) -> Option<RequestsWriter>;
    /// A repetition's records are all sent: the file is finished.
    async fn records_done(&mut self, writer: RequestsWriter);
    /// The measured requests, run to their end or cut short.
    async fn watch<F: Future<Output = CellRun>>(
        &mut self,
        requests: F,
    ) -> Result<CellRun, Self::Stop>;
    /// The server's death or fatal log line, if it came.
    fn died(&mut self) -> Option<Failure>;
    /// Acceptance lengths the server logged since the last call.
    fn logged_acceptance(&mut self) -> Vec<f64>;
    /// The measured window opens (GPU figures are kept from here).
    fn measuring(&mut self);
    /// The cell is over: the GPUs over its measured requests' `windows`
    /// (Unix ms, one per repetition; none known: the whole cell).
    fn measured(&mut self, windows: &[(u64, u64)]) -> Option<GpuFigures>;
}
