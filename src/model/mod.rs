//! The data every part of sweeptop speaks, and nothing else: events, cell
//! records and their statuses, failures and their kinds, per-cell metrics and
//! the one metric table, GPU snapshots, raw request records, run metadata,
//! user commands, the timestamp type, and the sanitiser for untrusted text. Most of it is written to the run
//! directory or sent over the control socket, so its serde form is a contract.
//!
//! This module does no I/O and imports nothing else from the crate; every other
//! module may import it (a test in `tests/layers.rs` keeps it so).

mod command;
mod event;
mod failure;
mod gpu;
mod metrics;
mod record;
mod request;
mod run;
mod server;
pub mod text;
mod time;

pub use command::{Command, CommandError, COMMAND_FORMS};
pub use event::{
    describe_exit, prepare_log_name, signal_name, Event, Level, LogMark, PrepareOutcome,
};
pub use failure::{thousands, ContextNumbers, Failure, FailureKind, FailureSource};
pub use gpu::{GpuProcess, GpuSample, GpuSnapshot, GpuStatus};
pub use metrics::{families, ms_label, rate_label, Better, Metric, Metrics, Unit, Value, METRICS};
pub use record::{CellRecord, Spread, Status};
pub use request::{Clock, RequestError, RequestRecord, ServerTiming};
pub use run::{RunMeta, RunState};
pub use server::ServerMeta;
pub use time::{covered_s, span_text, Timestamp};

#[cfg(test)]
pub(crate) use metrics::sample as sample_metrics;
#[cfg(test)]
pub(crate) use record::sample as sample_record;

/// The property tests' settings: 400 cases a run (`PROPTEST_CASES=N` for a
/// longer search), failures reported, not saved into the source tree.
#[cfg(test)]
pub(crate) fn fuzz_config() -> proptest::test_runner::Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    proptest::test_runner::Config {
        cases,
        failure_persistence: None,
        ..Default::default()
    }
}
