//! sweeptop: drives benchmark sweeps of LLM inference servers and shows them live.
//! See ARCHITECTURE.md in the README for the shape: plan → engine → events →
//! (store, views); `detect` decides failures, `load` measures. The simulated server
//! is the `sweeptop-sim` crate (`sim-server/`).

pub mod commands;
pub mod control;
pub mod detect;
pub mod engine;
pub mod event;
pub mod export;
pub mod gpu;
pub mod headless;
pub mod load;
pub mod plan;
pub mod store;
pub mod tui;
