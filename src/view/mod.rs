//! The one view layer: what every way of looking at a sweep shares. The
//! dashboard (live, attached, `open`), progress lines, the exports and the
//! control socket's replay all read the same [`state::ViewState`] (a fold over
//! events), the same [`grid::Grid`] (rows, columns and what each cell shows)
//! and the same words ([`text`]); the metrics themselves are described once, in
//! [`crate::model::METRICS`].
//!
//! Nothing here draws or writes: `tui`, `export` and `headless` do that.

pub mod feed;
pub mod grid;
pub mod replay;
pub mod shards;
pub mod state;
pub mod text;
