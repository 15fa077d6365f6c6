//! Which configs the grid shows and in what order (name filter, failures only,
//! one phase, sorted by a column), and what value it shows at which statistic.

use super::{App, Redraw};
use crate::model::Level;
use crate::tui::ui::STATS;
use crate::view::grid::Row;

impl App {
    /// Re-apply the grid's filter and sort (after results or the choice
    /// changed); the selection moves to a shown config if its own is hidden.
    pub fn rearrange(&mut self) {
        let mode = self.value_mode();
        self.grid.arrange(&self.view, &self.ui.arrange, mode);
        if !self.grid.shown_configs().any(|c| c == self.ui.sel_config) {
            if let Some(first) = self.grid.shown_configs().next() {
                self.ui.sel_config = first;
            }
        }
        self.ui.grid_top = 0;
        self.keep_selection_visible();
        self.pick_log();
    }

    /// Show only the configs whose name has `name` (all when it is empty).
    pub(super) fn filter_by_name(&mut self, name: String) {
        self.ui.arrange.name = name;
        self.rearrange();
    }

    pub(super) fn toggle_failures(&mut self) -> Redraw {
        self.ui.arrange.failures_only = !self.ui.arrange.failures_only;
        self.rearrange();
        let words = if self.ui.arrange.failures_only {
            format!(
                "{} configs with a failed cell (F again shows all)",
                self.grid.shown_configs().count()
            )
        } else {
            "every config shown".to_string()
        };
        self.flash(Level::Info, words);
        Redraw::Now
    }

    /// Only the next (or previous) phase; past the last, every phase.
    pub(super) fn next_phase(&mut self, forward: bool) -> Redraw {
        let phases: Vec<String> = self
            .grid
            .rows
            .iter()
            .filter_map(|r| match r {
                Row::Phase(p) => Some(p.clone()),
                Row::Config(_) => None,
            })
            .collect();
        // Positions: 0 = every phase, then each phase.
        let at = self
            .ui
            .arrange
            .phase
            .as_ref()
            .and_then(|p| phases.iter().position(|x| x == p))
            .map_or(0, |i| i + 1);
        let n = phases.len() + 1;
        let next = if forward {
            (at + 1) % n
        } else {
            (at + n - 1) % n
        };
        self.ui.arrange.phase = next.checked_sub(1).map(|i| phases[i].clone());
        self.rearrange();
        let words = match &self.ui.arrange.phase {
            Some(p) => format!("phase {p} only ([ ] other phases)"),
            None => "every phase shown".to_string(),
        };
        self.flash(Level::Info, words);
        Redraw::Now
    }

    pub(super) fn toggle_sort(&mut self) -> Redraw {
        let col = self.ui.sel_col.unwrap_or(0);
        self.ui.arrange.sort_by = match self.ui.arrange.sort_by {
            Some(c) if c == col => None,
            _ if self.grid.columns.is_empty() => None,
            _ => Some(col),
        };
        self.rearrange();
        let words = match self
            .ui
            .arrange
            .sort_by
            .and_then(|c| self.grid.columns.get(c))
        {
            Some(c) => format!(
                "sorted by {} {} ({}), best first; o again: plan order",
                c.workload,
                c.label(),
                self.value_mode().title()
            ),
            None => "plan order".to_string(),
        };
        self.flash(Level::Info, words);
        Redraw::Now
    }

    /// Latency values at the next statistic (p50, p90, p99).
    pub(super) fn next_stat(&mut self) -> Redraw {
        let at = STATS.iter().position(|s| *s == self.ui.stat).unwrap_or(0);
        self.ui.stat = STATS[(at + 1) % STATS.len()];
        if !self.ui.arrange.is_plain() {
            self.rearrange();
        }
        let shown = self.value_mode();
        let words = if shown == self.ui.value && self.ui.stat != STATS[0] {
            format!(
                "latency values at {} ({} has no {}; v picks another value)",
                self.ui.stat,
                shown.title(),
                self.ui.stat
            )
        } else {
            format!("latency values at {}", self.ui.stat)
        };
        self.flash(Level::Info, words);
        Redraw::Now
    }

    pub(super) fn next_value(&mut self) -> Redraw {
        self.ui.value = self.ui.value.next();
        if self.ui.arrange.sort_by.is_some() {
            self.rearrange();
        }
        Redraw::Now
    }
}
