//! What a key press or a mouse event asks for, given what is on screen: the
//! open popup or typed line decides first, then the keymap.

use crossterm::event::{KeyCode, KeyEvent, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Position;

use super::{Action, App};
use crate::tui::keymap::{Chord, Key};
use crate::tui::layout;
use crate::tui::ui::{Focus, Overlay};
use crate::view::grid::Row;

impl App {
    /// The action a key press asks for, given what is on screen.
    pub fn on_key(&self, ev: &KeyEvent) -> Option<Action> {
        let chord = Chord::from_event(ev);
        // `?` searches back in the log (as in less) and is the help elsewhere.
        let bound = self.keymap.lookup_for(&chord, self.ui.focus == Focus::Log);
        match &self.ui.overlay {
            Overlay::ConfirmQuit => match ev.code {
                KeyCode::Char('y' | 'Y') | KeyCode::Enter => Some(Action::Confirm),
                _ if self.attached() && bound == Some(Key::Detach) => {
                    Some(Action::Key(Key::Detach))
                }
                KeyCode::Char('n' | 'N') | KeyCode::Esc => Some(Action::Cancel),
                _ if bound == Some(Key::Quit) => Some(Action::Confirm),
                _ => None,
            },
            Overlay::Confirm { key, .. } => match ev.code {
                KeyCode::Char('y' | 'Y') | KeyCode::Enter => Some(Action::Confirm),
                // The same key again says yes too.
                _ if bound == Some(*key) => Some(Action::Confirm),
                _ if chord.ctrl && bound == Some(Key::Quit) => Some(Action::Key(Key::Quit)),
                _ => Some(Action::Cancel),
            },
            Overlay::Search(_) | Overlay::Filter(_) => match ev.code {
                _ if chord.ctrl && bound == Some(Key::Quit) => Some(Action::Key(Key::Quit)),
                KeyCode::Esc => Some(Action::Cancel),
                KeyCode::Enter => Some(Action::SearchSubmit),
                KeyCode::Backspace => Some(Action::SearchBackspace),
                KeyCode::Char(c) if !chord.ctrl && !chord.alt => Some(Action::SearchInput(c)),
                _ => None,
            },
            Overlay::Chart => match bound {
                Some(Key::Quit) if chord.ctrl => Some(Action::Key(Key::Quit)),
                // The value and the statistic change the chart in place.
                Some(k @ (Key::Value | Key::Percentile | Key::Theme)) => Some(Action::Key(k)),
                _ => Some(Action::Cancel),
            },
            Overlay::Help { .. } | Overlay::Details { .. } => match bound {
                Some(
                    k
                    @ (Key::Up | Key::Down | Key::PageUp | Key::PageDown | Key::Top | Key::Bottom),
                ) => Some(Action::Key(k)),
                Some(Key::Quit) if chord.ctrl => Some(Action::Key(Key::Quit)),
                Some(Key::Theme) => Some(Action::Key(Key::Theme)),
                _ => Some(Action::Cancel),
            },
            Overlay::None if self.ui.searching && !chord.ctrl && !chord.alt => match ev.code {
                KeyCode::Char('n') | KeyCode::Enter => Some(Action::SearchAgain { reverse: false }),
                KeyCode::Char('N') => Some(Action::SearchAgain { reverse: true }),
                KeyCode::Esc => Some(Action::EndSearch),
                _ => bound.map(Action::Key),
            },
            Overlay::None => bound.map(Action::Key),
        }
    }

    /// The action a mouse event asks for (`--mouse`): a click focuses the
    /// pane under it and, in the grid, selects the cell (or the row label);
    /// the wheel scrolls what is under it.
    pub fn on_mouse(&self, ev: &MouseEvent) -> Option<Action> {
        if !matches!(self.ui.overlay, Overlay::None) {
            return match ev.kind {
                MouseEventKind::ScrollUp => Some(Action::Key(Key::Up)),
                MouseEventKind::ScrollDown => Some(Action::Key(Key::Down)),
                MouseEventKind::Down(_) => Some(Action::Cancel),
                _ => None,
            };
        }
        let areas = self.layout()?;
        let at = Position::new(ev.column, ev.row);
        let pane = if areas.grid.contains(at) {
            Focus::Grid
        } else if areas.log.contains(at) {
            Focus::Log
        } else if areas.gpu.is_some_and(|g| g.contains(at)) {
            Focus::Gpu
        } else {
            return None;
        };
        match ev.kind {
            MouseEventKind::Down(MouseButton::Left) => Some(Action::Click {
                pane,
                column: ev.column,
                row: ev.row,
            }),
            MouseEventKind::ScrollUp => Some(Action::Wheel { pane, up: true }),
            MouseEventKind::ScrollDown => Some(Action::Wheel { pane, up: false }),
            _ => None,
        }
    }

    /// The grid cell at a screen position: the config and the column
    /// (`None`: its row label).
    pub(super) fn grid_cell_at(&self, column: u16, row: u16) -> Option<(usize, Option<usize>)> {
        let areas = self.layout()?;
        let geo = layout::geometry(areas.grid, &self.grid);
        // Inside the border, below the two heading rows.
        let y = usize::from(row.checked_sub(areas.grid.y + 1 + 2)?);
        let x = usize::from(column.checked_sub(areas.grid.x + 1)?);
        let config = match self.grid.shown.get(self.ui.grid_top + y)? {
            Row::Config(c) => *c,
            Row::Phase(_) => return None,
        };
        let col = if x < geo.label_w {
            None
        } else {
            let c = self.ui.grid_left + (x - geo.label_w) / (geo.col_w + 1);
            if c >= self.grid.columns.len() {
                return None;
            }
            Some(c)
        };
        Some((config, col))
    }
}
