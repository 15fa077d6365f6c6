//! sweeptop drives benchmark sweeps of LLM inference servers and shows them
//! live: per config it launches the server, waits until it is ready, runs the
//! workload cells, records each result durably and stops the server, while a
//! dashboard shows the GPUs, the server log and a results grid that flags
//! crashes and context overflows as they happen.
//!
//! # Layout
//!
//! Layers, bottom to top; a module imports only from layers below it, or
//! from the modules of its own layer that its row's last column names.
//! `tests/layers.rs` fails the build on any other import, on an import cycle
//! between modules, on files of one module (or of one folder inside it, here
//! or in `sim-server/src`) that import each other in a circle, and on a row
//! of this table that says otherwise than its `LAYERS` and `SAME_LAYER`.
//!
//! | layer | module | what lives there | imports in its own layer |
//! | --- | --- | --- | --- |
//! | 0 | [`model`] | the data everything speaks: events, cell records, failures and their kinds, metrics and **the one metric table**, GPU snapshots, request records, run state, commands, timestamps, and **the one sanitiser** for text from outside (`model::text`) | — |
//! | 1 | [`plan`] | the plan file: schema, `file:line:col` errors, expansion into configs and cells, server presets | — |
//! | 1 | [`load`] | the streaming client, exact-length prompts, per-request timings, per-cell statistics, the server's own endpoints (`/tokenize`, `/metrics`, about itself) | `plan` (a workload's prompts, its API, a server kind's preset) |
//! | 1 | [`detect`] | classifying server log lines, HTTP error bodies and exits; the validator that alone decides `ok`, judging the metrics and the plan's checks it is handed | — |
//! | 1 | [`gpu`] | telemetry (NVML, simulated, none) on its own thread; per-cell GPU figures | — |
//! | 1 | [`store`] | the run directory: fsynced results, events, logs, request records; reading runs back; a sweep directory of shards read as one | — |
//! | 2 | [`engine`] | the sweep, one file per step: its start and end, scheduling configs in lanes (side by side where a phase packs), placing them on GPUs, the shared state, prepare steps (what a config needs put in place first), preflight, launch, and **the one cell pipeline** that `loadtest` runs too | — |
//! | 2 | [`control`] | the attach protocol over the run directory's socket, and its commands file for sweeps on other machines | `engine` (its channels and commands) |
//! | 3 | [`view`] | the read model every view folds from events, the grid, events and metrics in words, replay of a run directory, a sweep directory's shards followed as one feed | — |
//! | 3 | [`tui`], [`export`], [`headless`] | the dashboard, CSV/JSON/Markdown, the HTML report and run comparisons, line progress: rendering [`view`] | `view`; `tui` also `export` (the `e` key) |
//! | 4 | [`cli`] | one file per subcommand; user errors become one line and exit 2 | — |
//!
//! Errors: each library module has its own `thiserror` types that keep
//! their causes; only `cli` turns them into reports (`eyre`), or into one
//! plain line and exit 2 when they are the user's to fix.
//!
//! The simulated server is its own crate, `sweeptop-sim`, and a dependency
//! of the library that only [`cli`] uses: its `sim-server` subcommand takes
//! the simulator's arguments and serves it, and the demo's plan launches that
//! command as its server. Nothing in a measurement path calls into it: the
//! engine starts it as a server process like any other (`tests/layers.rs`
//! fails on a `sweeptop_sim::` path outside `cli`). The tests run it both
//! ways: as `sweeptop sim-server` through the binary, and in process through
//! `sweeptop_sim::serve` (`tests/sim_http.rs`, `tests/simclient`). The
//! kernel's receive timestamps, which the load client times each chunk by
//! and the simulated server each request it takes, are a crate of their
//! own, `wire-stamp`, that both depend on.
//!
//! # From a plan to a grid cell
//!
//! `cli::run` parses the plan ([`plan::Plan`]: configs × cells with stable
//! ids) and opens a run directory ([`store::RunDir`]). The [`engine`] walks the
//! phases, placing each config on GPUs (one at a time, or side by side in a
//! phase that packs), and per config: its prepare steps (run once, shared),
//! preflight, launch the server (its log
//! lines go through [`detect::LogWatch`] as they are read), and for each cell
//! the cell pipeline: prompts fitted to the context target, warm-up, then
//! [`load::run_cell`], which folds every finished request into
//! [`load::CellStats`] and streams it to `requests/<cell>.jsonl`; the
//! server's own figures from its `/metrics`; then the cell's
//! [`model::Metrics`], the server's health and the plan's checks go to
//! [`detect::validate`]. The resulting [`model::CellRecord`] is published as
//! an [`model::Event`] and appended and fsynced to `results.jsonl` by the
//! [`store::Recorder`], the thread that writes the run directory (server logs
//! and request records have threads of their own), so a disk that hangs
//! never holds up a measurement. Every
//! view folds the same events into a [`view::state::ViewState`];
//! [`view::grid::Grid`] says what the cell shows (a value of
//! [`model::METRICS`], or the failure's badge), the same in the dashboard,
//! the Markdown export and the progress lines. `sweeptop loadtest` runs the
//! same pipeline on one cell against a server that is already up.

pub mod cli;
pub(crate) mod control;
pub mod detect;
pub(crate) mod engine;
pub mod export;
pub mod gpu;
pub(crate) mod headless;
pub mod load;
pub mod model;
pub mod plan;
pub mod store;
pub(crate) mod tui;
pub(crate) mod view;
