//! Commands sent to the engine (pause, skip, retry, exclude, quit) and leaving
//! the view; a run that takes no commands says which command line does it.

use super::{App, Mode, Redraw};
use crate::engine::Request;
use crate::model::{Command, Level, Status};
use crate::tui::keymap::Key;
use crate::tui::ui::Overlay;

impl App {
    /// The source this view's commands are recorded with: `key` for the
    /// sweep's own dashboard, `viewer PID` for an attached one.
    pub fn own_source(&self) -> String {
        if self.attached() {
            format!("viewer {}", std::process::id())
        } else {
            "key".into()
        }
    }

    /// Who a command's source is, from this view: `you`, `another viewer`…
    pub fn who(&self, source: &str) -> String {
        if source == self.own_source() {
            "you".into()
        } else if source == "key" {
            "the sweep's own dashboard".into()
        } else if source.starts_with("viewer ") {
            "another viewer".into()
        } else if matches!(source, "script" | "attach") {
            "a script (attach --send)".into()
        } else {
            source.to_string()
        }
    }

    pub(super) fn pause(&mut self) -> Redraw {
        let to_pause = !self.view.sweep.paused;
        let words = if to_pause {
            "pausing after the running cell (p again resumes)"
        } else {
            "resuming the sweep"
        };
        let redraw = self.command(Command::TogglePause, words);
        // Sent: the message holds while the sweep stands as it says.
        if let Some(f) = self.ui.flash.as_mut().filter(|f| f.text == words) {
            f.pause = Some(to_pause);
        }
        redraw
    }

    /// What a skip key will do, in words: `skip the rest of tp1-ddtree`.
    pub(super) fn skip_words(&self, k: Key) -> String {
        let whose = self
            .skip_target()
            .or_else(|| self.view.live_configs().next().map(|c| c.id.clone()))
            .unwrap_or_else(|| "the running config".into());
        format!("skip {} {whose}", skip_scope(k))
    }

    /// `Key::SkipConfig` or `Key::SkipCell`.
    pub(super) fn skip(&mut self, k: Key) -> Redraw {
        let config = self.skip_target();
        let command = if k == Key::SkipConfig {
            Command::SkipConfig {
                config: config.clone(),
            }
        } else {
            Command::SkipCell {
                config: config.clone(),
            }
        };
        let whose = config.unwrap_or_else(|| "the config".into());
        self.command(command, &format!("skipping {} {whose}", skip_scope(k)))
    }

    /// What a skip key acts on: the selected config when it runs now (with
    /// configs side by side, the one the user looks at); else the engine's
    /// choice (the config running, or the next).
    fn skip_target(&self) -> Option<String> {
        let selected = self.grid.configs.get(self.ui.sel_config)?;
        self.view
            .live_configs()
            .any(|c| c.id == selected.id)
            .then(|| selected.id.clone())
    }

    /// What `r` or `R` retries once the sweep has ended (or in `open`):
    /// its `--retry` targets and the question that names them. `r` on a
    /// failed or skipped cell: that cell; on a config's row: its failed
    /// cells (all its cells when none failed); `R`: every failed cell.
    pub(super) fn retry_after_end(&self, k: Key) -> Option<(Vec<String>, String)> {
        let failed = |config: Option<&str>| -> Vec<String> {
            let mut cells: Vec<String> = self
                .view
                .records
                .values()
                .filter(|r| r.status == Status::Failed)
                .filter(|r| config.is_none_or(|c| r.config == c))
                .map(|r| r.cell.clone())
                .collect();
            cells.sort();
            cells
        };
        let cells = |n: usize| format!("{n} failed cell{}", if n == 1 { "" } else { "s" });
        if k == Key::RetryAll {
            let all = failed(None);
            if all.is_empty() {
                return None;
            }
            let configs: std::collections::BTreeSet<&str> = self
                .view
                .records
                .values()
                .filter(|r| r.status == Status::Failed)
                .map(|r| r.config.as_str())
                .collect();
            let servers = if configs.len() == 1 {
                "a fresh server".to_string()
            } else {
                format!("fresh servers ({} configs)", configs.len())
            };
            return Some((
                vec!["failed".into()],
                format!("retry all {} on {servers}", cells(all.len())),
            ));
        }
        let config = self.grid.configs.get(self.ui.sel_config)?;
        match self.ui.sel_col {
            Some(col) => {
                let cell = self.grid.cell_id(&config.id, col)?;
                let r = self.view.records.get(cell)?;
                matches!(r.status, Status::Failed | Status::Skipped).then(|| {
                    (
                        vec![cell.to_string()],
                        format!("retry {cell} on a fresh server"),
                    )
                })
            }
            None => {
                let mine = failed(Some(&config.id));
                if mine.is_empty() {
                    let n = self
                        .view
                        .plan
                        .as_ref()
                        .map_or(0, |p| p.cells_of(&config.id).count());
                    return Some((
                        vec![config.id.clone()],
                        format!(
                            "measure all {n} cells of {} again on a fresh server",
                            config.id
                        ),
                    ));
                }
                let words = format!(
                    "retry the {} of {} on a fresh server",
                    cells(mine.len()),
                    config.id
                );
                Some((mine, words))
            }
        }
    }

    /// `R`: during the sweep every failed cell is queued to run again at
    /// the end; after it, the retry runs (asked first).
    pub(super) fn retry_all(&mut self) -> Redraw {
        if !self.sweep_live() {
            return self.retry_now(Key::RetryAll);
        }
        let mut cells: Vec<String> = self
            .view
            .records
            .values()
            .filter(|r| r.status == Status::Failed)
            .map(|r| r.cell.clone())
            .collect();
        cells.sort();
        if cells.is_empty() {
            self.flash(Level::Info, "no failed cell to retry".into());
            return Redraw::Now;
        }
        let mut sent = 0;
        for cell in &cells {
            if !self.send(Command::Retry {
                target: cell.clone(),
            }) {
                break;
            }
            sent += 1;
        }
        if sent > 0 {
            self.flash(
                Level::Info,
                format!("{sent} failed cell(s) queued to run again at the end"),
            );
        }
        Redraw::Now
    }

    /// After the end: leave the view and run the retry (`sweeptop run
    /// --resume DIR --retry …`, in this terminal), or say why not.
    fn retry_now(&mut self, k: Key) -> Redraw {
        match self.retry_after_end(k) {
            Some((targets, _)) => {
                self.then_retry = Some(targets);
                self.exit = true;
            }
            None => self.flash(
                Level::Warn,
                if k == Key::RetryAll {
                    "no failed cell to retry".into()
                } else {
                    "only a failed or skipped cell can be retried (select the row label to retry a config)".into()
                },
            ),
        }
        Redraw::Now
    }

    pub(super) fn retry(&mut self) -> Redraw {
        if !self.sweep_live() {
            return self.retry_now(Key::Retry);
        }
        let Some(config) = self.grid.configs.get(self.ui.sel_config).cloned() else {
            return Redraw::No;
        };
        let Some(col) = self.ui.sel_col else {
            return self.command(
                Command::Retry {
                    target: config.id.clone(),
                },
                &format!("{} queued to run again at the end", config.id),
            );
        };
        let cell = self.grid.cell_id(&config.id, col).map(str::to_string);
        let retryable = cell
            .as_ref()
            .and_then(|c| self.view.records.get(c))
            .is_some_and(|r| matches!(r.status, Status::Failed | Status::Skipped));
        match cell {
            Some(cell) if retryable => self.command(
                Command::Retry {
                    target: cell.clone(),
                },
                &format!("{cell} queued to run again at the end"),
            ),
            _ => {
                self.flash(
                    Level::Warn,
                    "only a failed or skipped cell can be retried (select the row label to retry a config)".into(),
                );
                Redraw::Now
            }
        }
    }

    pub(super) fn exclude(&mut self) -> Redraw {
        match self.grid.configs.get(self.ui.sel_config) {
            // `x` again undoes it (cells already skipped stay skipped: `r` runs them).
            Some(c) if self.view.excluded.contains(&c.id) => {
                let config = c.id.clone();
                self.command(
                    Command::Include {
                        config: config.clone(),
                    },
                    &format!("{config} back in the sweep"),
                )
            }
            Some(c) => {
                let config = c.id.clone();
                self.command(
                    Command::Exclude {
                        config: config.clone(),
                    },
                    &format!("{config} excluded from the rest of the sweep (x again puts it back)"),
                )
            }
            None => Redraw::No,
        }
    }

    /// Leave, asking first while the sweep can still be stopped.
    pub(super) fn quit(&mut self) -> Redraw {
        if self.sweep_live() {
            self.ui.overlay = Overlay::ConfirmQuit;
        } else {
            self.exit = true;
        }
        Redraw::Now
    }

    /// Yes to the quit question.
    pub(super) fn confirm_quit(&mut self) -> Redraw {
        self.ui.overlay = Overlay::None;
        if self.sweep_live() {
            self.send(Command::Quit);
            self.quit_sent = true;
            self.flash(
                Level::Info,
                "stopping: the server group is being stopped; resume later with `sweeptop run --resume`".into(),
            );
        } else {
            self.exit = true;
        }
        Redraw::Now
    }

    pub(super) fn detach(&mut self) -> Redraw {
        if self.attached() {
            self.ui.overlay = Overlay::None;
            self.exit = true;
        } else {
            self.flash(
                Level::Info,
                "detach applies to `sweeptop attach`; this view runs the sweep".into(),
            );
        }
        Redraw::Now
    }

    fn command(&mut self, command: Command, done: &str) -> Redraw {
        // A run that takes no commands says which command line does it.
        let dir = self.run_dir.display();
        let instead = match &command {
            Command::Retry { target } => {
                format!("run it again with `sweeptop run --resume {dir} --retry {target}`")
            }
            _ => format!("continue it with `sweeptop run --resume {dir}`"),
        };
        if self.read_only() {
            self.flash(Level::Warn, format!("read-only: {instead}"));
        } else if !self.sweep_live() {
            self.flash(Level::Warn, format!("the sweep has ended: {instead}"));
        } else if self.send(command) {
            self.flash(Level::Info, done.to_string());
        }
        Redraw::Now
    }

    /// Send a command to the engine; says whether it went.
    fn send(&mut self, command: Command) -> bool {
        let (Mode::Live { commands } | Mode::Attached { commands }) = &self.mode else {
            return false;
        };
        let sent = commands
            .try_send(Request {
                command,
                source: self.own_source(),
            })
            .is_ok();
        if !sent {
            self.flash(
                Level::Error,
                "the engine is not taking commands right now".into(),
            );
        }
        sent
    }
}

/// What a skip key skips of its config, in words.
fn skip_scope(k: Key) -> &'static str {
    if k == Key::SkipConfig {
        "the rest of"
    } else {
        "the running cell of"
    }
}
