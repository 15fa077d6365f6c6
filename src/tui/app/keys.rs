//! The bound keys: which job each one goes to, and the ones that only change
//! what is shown (popups, the theme, wrapping).

use super::{App, Redraw};
use crate::model::Level;
use crate::tui::keymap::Key;
use crate::tui::ui::{Focus, Overlay};

impl App {
    pub(super) fn key(&mut self, k: Key) -> Redraw {
        if self.scroll_popup(k) {
            return Redraw::Now;
        }
        if let Some(what) = self.asks_first(k) {
            return self.open(Overlay::Confirm { key: k, what });
        }
        self.act(k)
    }

    /// What `k` will do, in words, when it is one that asks first (and
    /// would act now: `x` on an excluded config only takes it back).
    fn asks_first(&self, k: Key) -> Option<String> {
        if self.ui.overlay != Overlay::None {
            return None;
        }
        let always = matches!(k, Key::Retry | Key::RetryAll) && !self.sweep_live();
        if !always && !self.keymap.confirms(k) {
            return None;
        }
        match k {
            // After the end a retry starts a sweep: always asked.
            Key::Retry | Key::RetryAll if !self.sweep_live() => {
                self.retry_after_end(k).map(|(_, words)| words)
            }
            Key::SkipConfig | Key::SkipCell if self.sweep_live() => Some(self.skip_words(k)),
            Key::Exclude => self
                .grid
                .configs
                .get(self.ui.sel_config)
                .filter(|c| !self.view.excluded.contains(&c.id) && self.sweep_live())
                .map(|c| format!("exclude {} from the rest of the sweep", c.id)),
            _ => None,
        }
    }

    /// Yes to a key that asked first: it acts.
    pub(super) fn confirmed(&mut self, k: Key) -> Redraw {
        self.ui.overlay = Overlay::None;
        self.act(k)
    }

    fn act(&mut self, k: Key) -> Redraw {
        match k {
            Key::Pause => self.pause(),
            Key::SkipConfig | Key::SkipCell => self.skip(k),
            Key::Retry => self.retry(),
            Key::RetryAll => self.retry_all(),
            Key::Exclude => self.exclude(),
            Key::Export => {
                self.export();
                Redraw::Now
            }
            Key::Quit => self.quit(),
            Key::Detach => self.detach(),
            Key::Up | Key::Down | Key::Left | Key::Right | Key::PageUp | Key::PageDown => {
                self.step(k);
                Redraw::Now
            }
            Key::Top | Key::Bottom => self.jump(k == Key::Top),
            Key::Focus => self.next_focus(),
            Key::Follow => self.toggle_follow(),
            Key::Zoom => self.toggle_zoom(),
            Key::Search => self.start_typing(false),
            Key::SearchBack => self.start_typing(true),
            Key::Failures => self.toggle_failures(),
            Key::NextPhase | Key::PrevPhase => self.next_phase(k == Key::NextPhase),
            Key::Sort => self.toggle_sort(),
            Key::Percentile => self.next_stat(),
            Key::Value => self.next_value(),
            // The details are of the selected cell: from the grid only.
            Key::Details if self.ui.focus != Focus::Grid => Redraw::No,
            Key::Details => self.open(Overlay::Details { scroll: 0 }),
            Key::Help => self.open(Overlay::Help { scroll: 0 }),
            Key::Chart => self.open(Overlay::Chart),
            // No popup to close: nothing selected, the running cell followed.
            Key::Close if self.ui.overlay == Overlay::None && self.ui.focus == Focus::Grid => {
                self.follow_again();
                Redraw::Now
            }
            Key::Close => self.open(Overlay::None),
            Key::Wrap => self.toggle_wrap(),
            Key::Theme => self.next_theme(),
        }
    }

    /// Popups scroll with the movement keys; says whether the key did that.
    fn scroll_popup(&mut self, k: Key) -> bool {
        let (Overlay::Help { scroll } | Overlay::Details { scroll }) = &mut self.ui.overlay else {
            return false;
        };
        match k {
            Key::Up => *scroll = scroll.saturating_sub(1),
            Key::Down => *scroll = scroll.saturating_add(1),
            Key::PageUp => *scroll = scroll.saturating_sub(10),
            Key::PageDown => *scroll = scroll.saturating_add(10),
            Key::Top => *scroll = 0,
            Key::Bottom => *scroll = u16::MAX / 2,
            _ => return false,
        }
        true
    }

    fn toggle_wrap(&mut self) -> Redraw {
        self.ui.wrap = !self.ui.wrap;
        let words = if self.ui.wrap {
            "long log lines wrap"
        } else {
            "long log lines are cut at the edge (w wraps them)"
        };
        self.flash(Level::Info, words.into());
        Redraw::Now
    }

    fn next_theme(&mut self) -> Redraw {
        self.theme = (self.theme + 1) % self.themes.len();
        let name = self.theme().name.clone();
        self.flash(Level::Info, format!("theme {name}"));
        Redraw::Now
    }
}
