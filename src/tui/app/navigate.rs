//! Moving around: the selection in the grid (following the running cell until
//! the user moves it), scrolling the log, focus, zoom, clicks and the wheel,
//! and keeping what is selected on screen.

use super::{App, Redraw};
use crate::tui::keymap::Key;
use crate::tui::layout;
use crate::tui::ui::Focus;
use crate::view::grid::Row;

impl App {
    /// One step (or a page) in the focused pane.
    pub(super) fn step(&mut self, k: Key) {
        match self.ui.focus {
            Focus::Grid => {
                self.ui.track_running = false;
                let order: Vec<usize> = self.grid.shown_configs().collect();
                let n = order.len();
                let cols = self.grid.columns.len();
                let page = self.grid_page().max(1);
                let s = &mut self.ui;
                // Move through the shown configs, in the order shown.
                let at = order.iter().position(|&c| c == s.sel_config).unwrap_or(0);
                let to = match k {
                    Key::Up => at.saturating_sub(1),
                    Key::Down => (at + 1).min(n.saturating_sub(1)),
                    Key::PageUp => at.saturating_sub(page),
                    Key::PageDown => (at + page).min(n.saturating_sub(1)),
                    _ => at,
                };
                if let Some(&c) = order.get(to) {
                    s.sel_config = c;
                }
                match k {
                    Key::Left => {
                        s.sel_col = match s.sel_col {
                            Some(0) | None => None,
                            Some(c) => Some(c - 1),
                        }
                    }
                    Key::Right => {
                        s.sel_col = match s.sel_col {
                            None if cols > 0 => Some(0),
                            None => None,
                            Some(c) => Some((c + 1).min(cols.saturating_sub(1))),
                        }
                    }
                    _ => {}
                }
                self.selection_moved();
            }
            Focus::Log => {
                let page = self.log_page().max(1);
                match k {
                    Key::Up => self.ui.log_back += 1,
                    Key::Down => self.ui.log_back = self.ui.log_back.saturating_sub(1),
                    Key::PageUp => self.ui.log_back += page,
                    Key::PageDown => self.ui.log_back = self.ui.log_back.saturating_sub(page),
                    _ => {}
                }
                self.ui.follow = self.ui.log_back == 0;
                self.clamp_log();
            }
            Focus::Gpu => {}
        }
    }

    /// The first (`top`) or last row of the grid, the oldest or newest log line.
    pub(super) fn jump(&mut self, top: bool) -> Redraw {
        match self.ui.focus {
            Focus::Grid => {
                self.ui.track_running = false;
                let shown = self.grid.shown_configs();
                let pick = if top {
                    shown.into_iter().next()
                } else {
                    shown.into_iter().last()
                };
                if let Some(c) = pick {
                    self.ui.sel_config = c;
                }
                self.selection_moved();
            }
            Focus::Log => {
                if top {
                    self.ui.log_back = usize::MAX;
                    self.ui.follow = false;
                } else {
                    self.ui.log_back = 0;
                    self.ui.follow = true;
                }
                self.clamp_log();
            }
            Focus::Gpu => {}
        }
        Redraw::Now
    }

    pub(super) fn click(&mut self, pane: Focus, column: u16, row: u16) -> Redraw {
        self.ui.focus = pane;
        if pane == Focus::Grid {
            if let Some((config, col)) = self.grid_cell_at(column, row) {
                self.ui.track_running = false;
                self.ui.sel_config = config;
                self.ui.sel_col = col;
                self.selection_moved();
            }
        }
        Redraw::Now
    }

    /// The wheel scrolls the pane under it, wherever the focus is.
    pub(super) fn wheel(&mut self, pane: Focus, up: bool) -> Redraw {
        let focus = std::mem::replace(&mut self.ui.focus, pane);
        for _ in 0..3 {
            self.step(if up { Key::Up } else { Key::Down });
        }
        self.ui.focus = focus;
        Redraw::Now
    }

    pub(super) fn next_focus(&mut self) -> Redraw {
        self.ui.focus = match self.ui.focus {
            Focus::Grid => Focus::Log,
            Focus::Log if self.look.show_gpu => Focus::Gpu,
            Focus::Log | Focus::Gpu => Focus::Grid,
        };
        Redraw::Now
    }

    pub(super) fn toggle_follow(&mut self) -> Redraw {
        self.ui.follow = !self.ui.follow || self.ui.log_back > 0;
        if self.ui.follow {
            self.ui.log_back = 0;
        }
        Redraw::Now
    }

    pub(super) fn toggle_zoom(&mut self) -> Redraw {
        self.ui.zoom = !self.ui.zoom;
        self.keep_selection_visible();
        self.clamp_log();
        Redraw::Now
    }

    pub(super) fn selection_moved(&mut self) {
        self.keep_selection_visible();
        self.pick_log();
    }

    /// Put the selection on the running cell (until the user moves it): the
    /// selected config's, else the one started last.
    pub(super) fn follow_running(&mut self) {
        if !self.ui.track_running {
            return;
        }
        let selected = self
            .grid
            .configs
            .get(self.ui.sel_config)
            .map(|c| c.id.as_str());
        let Some(r) = selected
            .and_then(|c| self.view.running_of(c))
            .or_else(|| self.view.running.iter().max_by_key(|r| r.since))
        else {
            return;
        };
        let Some(config) = self.grid.config_index(&r.config) else {
            return;
        };
        // A config the filter hides is not followed into.
        if !self.grid.shown_configs().any(|c| c == config) {
            return;
        }
        let col = (0..self.grid.columns.len())
            .find(|&c| self.grid.cell_id(&r.config, c) == Some(r.cell.as_str()));
        self.ui.sel_config = config;
        if col.is_some() {
            self.ui.sel_col = col;
        }
        self.keep_selection_visible();
    }

    fn grid_page(&self) -> usize {
        self.layout()
            .map(|a| layout::geometry(a.grid, &self.grid).rows)
            .unwrap_or(1)
    }

    /// The log pane's inside: rows and columns.
    pub(super) fn log_inner(&self) -> (usize, usize) {
        self.layout().map_or((1, 80), |a| {
            (
                a.log.height.saturating_sub(2) as usize,
                a.log.width.saturating_sub(2) as usize,
            )
        })
    }

    fn log_page(&self) -> usize {
        self.layout()
            .map(|a| a.log.height.saturating_sub(2) as usize)
            .unwrap_or(1)
    }

    /// Scroll the grid so the selected cell is on screen.
    pub fn keep_selection_visible(&mut self) {
        let Some(areas) = self.layout() else {
            return;
        };
        let geo = layout::geometry(areas.grid, &self.grid);
        if geo.cols == 0 || geo.rows == 0 {
            // The grid is not on screen (another pane is zoomed): nothing
            // to fit until it is.
            return;
        }
        let row = self.grid.display_row(self.ui.sel_config);
        // Show the phase heading above the first config of a phase when it fits.
        let want_top = if row > 0 && matches!(self.grid.shown.get(row - 1), Some(Row::Phase(_))) {
            row - 1
        } else {
            row
        };
        if want_top < self.ui.grid_top {
            self.ui.grid_top = want_top;
        } else if row >= self.ui.grid_top + geo.rows.max(1) {
            self.ui.grid_top = row + 1 - geo.rows.max(1);
        }
        let max_top = self.grid.shown.len().saturating_sub(geo.rows.max(1));
        self.ui.grid_top = self.ui.grid_top.min(max_top);
        if let Some(col) = self.ui.sel_col {
            if col < self.ui.grid_left {
                self.ui.grid_left = col;
            } else if col >= self.ui.grid_left + geo.cols.max(1) {
                self.ui.grid_left = col + 1 - geo.cols.max(1);
            }
        } else {
            self.ui.grid_left = 0;
        }
        // As many columns as fit: never scrolled further than the last
        // column needs (after a resize or a zoom the width may have grown).
        let max_left = self.grid.columns.len().saturating_sub(geo.cols);
        self.ui.grid_left = self.ui.grid_left.min(max_left);
    }

    /// Keep the log scrolled no further back than its oldest line.
    pub(super) fn clamp_log(&mut self) {
        let page = self.log_page();
        let max_back = self.shown_log().lines.len().saturating_sub(page);
        self.ui.log_back = self.ui.log_back.min(max_back);
    }
}
