//! The line typed at the bottom: the log pane's search (as in less: Enter
//! finds, `n`/`N` find again, Esc ends) and the grid's name filter, which
//! applies as it is typed.

use super::{App, Redraw};
use crate::model::Level;
use crate::tui::ui::{Focus, Overlay};

impl App {
    /// `/`: the grid's name filter, or a search of the log.
    pub(super) fn start_typing(&mut self) -> Redraw {
        self.ui.overlay = match self.ui.focus {
            Focus::Grid => Overlay::Filter(self.ui.arrange.name.clone()),
            Focus::Log | Focus::Gpu => Overlay::Search(String::new()),
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
    /// back for what was typed (nothing typed: the last search again).
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
            self.search(&q, true);
        }
        Redraw::Now
    }

    pub(super) fn search_again(&mut self, older: bool) -> Redraw {
        if let Some(q) = self.ui.last_search.clone() {
            self.search(&q, older);
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

    /// Jump to the next match above the bottom line of the log view
    /// (`older`), or below it.
    fn search(&mut self, q: &str, older: bool) {
        self.ui.last_search = Some(q.to_string());
        self.ui.focus = Focus::Log;
        let lines = &self.shown_log().lines;
        let n = lines.len();
        // The line shown at the bottom now; a repeated search goes past it.
        let bottom = n.saturating_sub(self.ui.log_back);
        let repeat = self.ui.log_back > 0;
        let needle = q.to_lowercase();
        let matches = |i: &usize| lines[*i].text.to_lowercase().contains(&needle);
        let hit = if older {
            let from = if repeat {
                bottom.saturating_sub(1)
            } else {
                bottom
            };
            (0..from).rev().find(matches)
        } else {
            (bottom..n).find(matches)
        };
        match hit {
            Some(i) => {
                self.ui.log_back = n - (i + 1);
                self.ui.follow = false;
                self.clamp_log();
            }
            None => {
                let way = if older { "further back" } else { "further on" };
                self.flash(Level::Warn, format!("\"{q}\" not found {way}"));
            }
        }
    }
}
