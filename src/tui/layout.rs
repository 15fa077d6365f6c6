//! Where each pane goes and how the grid pane is divided, computed in one
//! place: drawing places the panes with it, and the app reads it to know what
//! a click hit and how much a page is.

use ratatui::layout::Rect;

use super::ui::{Focus, Look, Ui};
use crate::view::grid::Grid;

/// Below this the dashboard shows a notice instead.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 16;

/// Where each pane goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub header: Rect,
    pub alert: Rect,
    pub grid: Rect,
    pub gpu: Option<Rect>,
    pub log: Rect,
    pub hints: Rect,
}

/// The panes in `area`; `None` when it is too small for the dashboard.
pub fn areas(area: Rect, ui: &Ui, grid: &Grid, look: &Look) -> Option<Areas> {
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        return None;
    }
    let row = |y: u16, h: u16| Rect::new(area.x, area.y + y, area.width, h);
    let header = row(0, 1);
    let alert = row(1, 1);
    let hints = row(area.height - 1, 1);
    let body_h = area.height - 3;
    let body = Rect::new(area.x, area.y + 2, area.width, body_h);
    let (grid, gpu, log) = if ui.zoom {
        // The focused pane takes the body; the others have no room.
        let none = Rect::new(area.x, area.y + 2, 0, 0);
        match ui.focus {
            Focus::Grid => (body, None, none),
            Focus::Log => (none, None, body),
            Focus::Gpu => (none, Some(body), none),
        }
    } else {
        split_body(body, grid, look)
    };
    Some(Areas {
        header,
        alert,
        grid,
        gpu,
        log,
        hints,
    })
}

/// The grid takes what it needs, up to three fifths of the body (or all but
/// seven rows, whichever is more), and leaves the rest to the GPUs and the log.
fn split_body(body: Rect, grid: &Grid, look: &Look) -> (Rect, Option<Rect>, Rect) {
    let needed = grid.shown.len() as u16 + 4;
    let cap = (body.height * 3 / 5).max(body.height.saturating_sub(7));
    let grid_h = needed.min(cap).max(5);
    let grid = Rect::new(body.x, body.y, body.width, grid_h);
    let lower = Rect::new(
        body.x,
        grid.y + grid_h,
        body.width,
        body.height.saturating_sub(grid_h),
    );
    let (gpu, log) = if look.show_gpu {
        let gpu_w = if body.width >= 100 {
            (body.width * 2 / 5).clamp(36, 72)
        } else {
            body.width * 9 / 20
        };
        (
            Some(Rect::new(lower.x, lower.y, gpu_w, lower.height)),
            Rect::new(lower.x + gpu_w, lower.y, lower.width - gpu_w, lower.height),
        )
    } else {
        (None, lower)
    };
    (grid, gpu, log)
}

/// How the grid pane is divided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    pub label_w: usize,
    pub col_w: usize,
    /// Display rows (phase headings and configs) that fit.
    pub rows: usize,
    /// Columns that fit.
    pub cols: usize,
}

pub fn geometry(area: Rect, grid: &Grid) -> Geometry {
    let inner_w = area.width.saturating_sub(2) as usize;
    let inner_h = area.height.saturating_sub(2) as usize;
    let longest = grid
        .configs
        .iter()
        .map(|c| c.id.chars().count())
        .max()
        .unwrap_or(6);
    let label_w = (longest + 2).clamp(8, (inner_w * 2 / 5).max(12));
    let narrowest = grid
        .columns
        .iter()
        .map(|c| c.label().chars().count())
        .max()
        .unwrap_or(7)
        .clamp(9, 10);
    // Wider columns when every column fits anyway (easier to read on big screens).
    let n = grid.columns.len().max(1);
    let col_w = (inner_w.saturating_sub(label_w) / n)
        .saturating_sub(1)
        .clamp(narrowest, 18);
    Geometry {
        label_w,
        col_w,
        rows: inner_h.saturating_sub(2),
        cols: inner_w.saturating_sub(label_w) / (col_w + 1),
    }
}

/// The rows a log line of `chars` characters takes in a pane `width` wide:
/// one when cut at the edge, as many as its pieces when wrapped (as the log
/// pane draws it).
pub fn rows_of(chars: usize, width: usize, wrap: bool) -> usize {
    if wrap && width > 0 && chars > width {
        chars.div_ceil(width)
    } else {
        1
    }
}
