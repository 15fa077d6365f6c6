//! The line typed at the bottom: the log pane's search, as in less (`/`
//! forward from the top of the view, `?` backward from its bottom, Enter
//! finds, `n` again the same way, `N` the other way, Esc ends), and the
//! grid's name filter, which applies as it is typed.

use super::{App, Redraw};
use crate::model::Level;
use crate::tui::layout::rows_of;
use crate::tui::ui::{Focus, Overlay};

impl App {
    /// `/`: the grid's name filter, or a search of the log forward;
    /// `?` in the log (`back`): a search backward.
    pub(super) fn start_typing(&mut self, back: bool) -> Redraw {
        self.ui.overlay = match self.ui.focus {
            Focus::Grid if !back => Overlay::Filter(self.ui.arrange.name.clone()),
            _ => {
                self.ui.search_back = back;
                Overlay::Search(String::new())
            }
        };
        Redraw::Now
    }

    pub(super) fn type_char(&mut self, c: char) -> Redraw {
        match &mut self.ui.overlay {
            Overlay::Search(q) => q.push(c),
            Overlay::Filter(q) => {
                q.push(c);
                let name = q.clone();
                self.filter_by_name(name);
            }
            _ => {}
        }
        Redraw::Now
    }

    pub(super) fn backspace(&mut self) -> Redraw {
        match &mut self.ui.overlay {
            Overlay::Search(q) => {
                q.pop();
            }
            Overlay::Filter(q) => {
                q.pop();
                let name = q.clone();
                self.filter_by_name(name);
            }
            _ => {}
        }
        Redraw::Now
    }

    /// Enter: keep the filter (saying how many configs match), or search
    /// for what was typed (nothing typed: the last search again), from the
    /// view's edge the search starts at.
    pub(super) fn submit(&mut self) -> Redraw {
        if matches!(self.ui.overlay, Overlay::Filter(_)) {
            self.ui.overlay = Overlay::None;
            if !self.ui.arrange.name.is_empty() {
                let n = self.grid.shown_configs().count();
                self.flash(
                    Level::Info,
                    format!(
                        "{n} configs match \"{}\" (/ then Esc shows all)",
                        self.ui.arrange.name
                    ),
                );
            }
            return Redraw::Now;
        }
        let q = match std::mem::replace(&mut self.ui.overlay, Overlay::None) {
            Overlay::Search(q) if !q.is_empty() => q,
            _ => self.ui.last_search.clone().unwrap_or_default(),
        };
        if !q.is_empty() {
            self.ui.searching = true;
            self.ui.search_hit = None;
            self.search(&q, self.ui.search_back);
        }
        Redraw::Now
    }

    /// `n` (`N`: `reverse`): the next match the way the search goes.
    pub(super) fn search_again(&mut self, reverse: bool) -> Redraw {
        if let Some(q) = self.ui.last_search.clone() {
            self.search(&q, self.ui.search_back != reverse);
        }
        Redraw::Now
    }

    /// Esc: close the popup or the question; while typing a filter, drop it.
    pub(super) fn cancel(&mut self) -> Redraw {
        if matches!(self.ui.overlay, Overlay::Filter(_)) {
            self.filter_by_name(String::new());
        }
        self.open(Overlay::None)
    }

    /// Find the next line with `q` (ignoring case), backward or forward:
    /// from the line the search stands on, or, on a new search, from the
    /// view's bottom line (backward) or its top line (forward). The match
    /// is placed at the top of the view with what follows it below (a
    /// traceback after its first line is seen whole), as far as the log
    /// goes; the view stays there while lines arrive.
    fn search(&mut self, q: &str, back: bool) {
        self.ui.last_search = Some(q.to_string());
        self.ui.focus = Focus::Log;
        let (rows, width) = self.log_inner();
        let log = self.shown_log();
        let lines = &log.lines;
        let n = lines.len();
        // Line numbers the search keeps are counted from the log's first line.
        let first = log.pushed - n as u64;
        let bottom = n.saturating_sub(self.ui.log_back + 1);
        let from_hit = self
            .ui
            .search_hit
            .and_then(|h| h.checked_sub(first))
            .and_then(|i| usize::try_from(i).ok())
            .filter(|&i| i < n);
        let needle = q.to_lowercase();
        let matches = |i: &usize| lines[*i].text.to_lowercase().contains(&needle);
        let wrap = self.ui.wrap;
        let rows_at = |j: usize| rows_of(lines[j].text.chars().count(), width, wrap);
        let hit = match (back, from_hit) {
            (true, Some(h)) => (0..h).rev().find(matches),
            (true, None) => (0..n.min(bottom + 1)).rev().find(matches),
            (false, Some(h)) => (h + 1..n).find(matches),
            (false, None) => {
                // The view's top line: as many above its bottom as fill it.
                let top = last_fitting((0..n.min(bottom + 1)).rev(), rows, rows_at).unwrap_or(0);
                (top..n).find(matches)
            }
        };
        match hit {
            Some(i) => {
                // The match on top, the lines after it below, as many as fit.
                let last = last_fitting(i..n, rows, rows_at).unwrap_or(i);
                self.ui.search_hit = Some(first + i as u64);
                self.ui.log_back = n - (last + 1);
                self.ui.follow = false;
                self.clamp_log();
                if self.ui.flash.as_ref().is_some_and(|f| f.search) {
                    self.ui.flash = None;
                }
            }
            None => {
                let way = if back { "further back" } else { "further on" };
                self.flash(Level::Warn, format!("\"{q}\" not found {way}"));
                if let Some(f) = &mut self.ui.flash {
                    f.search = true;
                }
            }
        }
    }
}

/// Walking lines in `order`, the last that still fits in `rows` rows (the
/// first always does), each taking `rows_at` rows.
fn last_fitting(
    order: impl Iterator<Item = usize>,
    rows: usize,
    rows_at: impl Fn(usize) -> usize,
) -> Option<usize> {
    let mut used = 0;
    let mut last = None;
    for j in order {
        used += rows_at(j);
        if used > rows.max(1) && last.is_some() {
            break;
        }
        last = Some(j);
    }
    last
}
