//! The run directory: frozen plan, append-only `results.jsonl` (fsynced per cell),
//! `events.jsonl`, server logs, and reading runs back for resume, export and `open`.
//!
//! One file per job: making and writing a run (`run_dir`, `lock`, `meta`
//! for `run.json`), the habits every file is written and read with (`file`,
//! and `crash` for the crash-consistency test's kill points), reading
//! results, events and GPU samples back (`results`, `events`, `gpu_log`,
//! `requests`), the open run's writes on a thread of their own
//! ([`Recorder`]), sweep directories ([`sweep`]) and following their shards
//! ([`tail`]), the runs under a folder ([`runs`]), and work on files on
//! shared paths that may hang or never end ([`shared`]).

mod crash;
mod error;
mod events;
mod file;
mod gpu_log;
mod lock;
mod meta;
mod recorder;
mod requests;
mod results;
mod run_dir;
pub mod runs;
pub mod shared;
pub mod sweep;
pub mod tail;

pub use crash::crash_point;
pub use error::{Invalid, StoreError};
pub use events::{read_events, read_servers};
pub use file::{sha256_file, sha256_head};
pub use gpu_log::{read_gpu, GpuLog};
pub use lock::{is_held, is_locked};
pub use meta::{is_run_dir, read_meta, rebuild_meta, run_meta};
pub use recorder::{Recorder, Stall, Tell, Unrecorded};
pub use requests::{read_requests, RequestsWriter, Written};
pub use results::{read_results, Results};
pub use run_dir::{
    check_new_run_dir, default_dir, log_path, make_run_dir, never_started, recorded_servers,
    requests_path, RunDir,
};

pub const RESULTS: &str = "results.jsonl";
pub const EVENTS: &str = "events.jsonl";
pub const GPU: &str = "gpu.jsonl";
pub const PLAN: &str = "plan.toml";
/// In a shard's run directory: which shard it is.
pub const SHARD: &str = "shard.json";
/// The plan while it is written, renamed to [`PLAN`] once it is whole.
pub const PLAN_TMP: &str = "plan.toml.tmp";
pub const META: &str = "run.json";
pub const SERVER_PID: &str = "server.pid";
pub const LOGS: &str = "logs";
pub const REQUESTS: &str = "requests";
/// Held (`flock`) by the one sweep writing to the directory, for its whole
/// life; the kernel lets go of it when that process dies, however it dies.
pub const LOCK: &str = "run.lock";
/// What `--detach` writes into a new run directory before the sweep starts.
pub const DETACH_LOG: &str = "sweeptop.log";

#[cfg(test)]
mod tests;
