//! What the user asked for (a key, an attached client, a signal), applied by
//! the engine: recorded as an `Action` event, then acted on. Between cells the
//! queue is drained and a pause holds the sweep; during a cell [`Engine::apply`]
//! is called as commands arrive.

use super::{Core, Lane, Request, Skip};
use crate::model::{Command, Event, Level, Timestamp};
use crate::plan::Plan;

/// Why `cmd` names nothing this plan has (a retry of a cell or config, an
/// exclusion of a config), or `None` when it is fine. Said to whoever sent it:
/// `attach --send` before sending, the engine to any other client.
pub fn target_problem(plan: &Plan, cmd: &Command) -> Option<String> {
    let (target, cells_too) = match cmd {
        Command::Retry { target } => (target, true),
        Command::Exclude { config } | Command::Include { config } => (config, false),
        Command::SkipConfig {
            config: Some(config),
        }
        | Command::SkipCell {
            config: Some(config),
        } => (config, false),
        _ => return None,
    };
    let is_config = plan.config(target).is_some();
    let is_cell = cells_too && plan.cells.iter().any(|c| &c.id == target);
    if is_config || is_cell {
        return None;
    }
    let shown: String = target.chars().take(80).collect();
    let cut = if shown.len() < target.len() {
        "…"
    } else {
        ""
    };
    let configs: Vec<&str> = plan.configs.iter().take(8).map(|c| c.id.as_str()).collect();
    let more = if plan.configs.len() > configs.len() {
        ", …"
    } else {
        ""
    };
    Some(format!(
        "{} `{shown}{cut}`: the plan has no such {}; its configs are {}{more}",
        cmd.name(),
        if cells_too {
            "cell or config"
        } else {
            "config"
        },
        configs.join(", "),
    ))
}

/// What the user asked for while no cell was running.
pub(super) enum Between {
    Continue,
    Quit,
    SkipConfig,
    SkipCell,
}

impl Core {
    /// Record and apply a command, then wake every lane to look. A skip that
    /// names no config goes to the config that started first among those
    /// running (or, between configs, to the next one).
    pub(super) fn apply(&self, req: &Request) {
        if let Some(problem) = target_problem(&self.plan, &req.command) {
            self.notice(
                Level::Warn,
                format!("ignored from {}: {problem}", req.source),
            );
            return;
        }
        self.emit(Event::Action {
            at: Timestamp::now(),
            action: req.command.name().to_string(),
            target: req.command.target(),
            source: req.source.clone(),
        });
        let pause = {
            let mut book = self.book();
            match &req.command {
                Command::Pause => Some(true),
                Command::Resume => Some(false),
                Command::TogglePause => Some(!book.paused),
                Command::Retry { target } => {
                    if !book.retry_queue.contains(target) {
                        book.retry_queue.push_back(target.clone());
                    }
                    None
                }
                Command::Exclude { config } => {
                    book.excluded.insert(config.clone());
                    None
                }
                Command::Include { config } => {
                    book.excluded.remove(config);
                    None
                }
                Command::Quit => {
                    book.quit = true;
                    None
                }
                Command::SkipConfig { config } | Command::SkipCell { config } => {
                    let skip = if matches!(req.command, Command::SkipConfig { .. }) {
                        Skip::Config
                    } else {
                        Skip::Cell
                    };
                    let config = config
                        .clone()
                        .or_else(|| book.lanes.first().map(|l| l.config.clone()));
                    book.skips.push((config, skip));
                    None
                }
            }
        };
        if let Some(paused) = pause {
            self.set_paused(paused);
        }
        self.steer.send_modify(|n| *n += 1);
    }

    fn set_paused(&self, paused: bool) {
        let changed = {
            let mut book = self.book();
            let changed = book.paused != paused;
            book.paused = paused;
            changed
        };
        if changed {
            let at = Timestamp::now();
            self.emit(if paused {
                Event::Paused { at }
            } else {
                Event::Resumed { at }
            });
        }
    }

    /// A skip asked for `config` (or for whichever config looks first).
    pub(super) fn take_skip(&self, config: &str) -> Option<Skip> {
        let mut book = self.book();
        let i = book
            .skips
            .iter()
            .position(|(c, _)| c.as_deref().is_none_or(|c| c == config))?;
        Some(book.skips.remove(i).1)
    }
}

impl Lane {
    /// Between cells of `config`: what was asked for it, holding while paused.
    pub(super) async fn between_steps(&mut self, config: &str) -> Between {
        loop {
            if self.quitting() {
                return Between::Quit;
            }
            match self.take_skip(config) {
                Some(Skip::Config) => return Between::SkipConfig,
                Some(Skip::Cell) => return Between::SkipCell,
                None => {}
            }
            if !self.book().paused {
                return Between::Continue;
            }
            if self.steer.changed().await.is_err() {
                return Between::Continue;
            }
        }
    }

    /// During a step of `config` (a cell, a launch): whether the user asked
    /// to quit or to skip it, after a wake-up from [`Core::apply`].
    pub(super) fn interrupted_by(&self, config: &str) -> Option<Between> {
        if self.quitting() {
            return Some(Between::Quit);
        }
        let mut book = self.book();
        let i = book
            .skips
            .iter()
            .position(|(c, _)| c.as_deref() == Some(config))?;
        Some(match book.skips.remove(i).1 {
            Skip::Config => Between::SkipConfig,
            Skip::Cell => Between::SkipCell,
        })
    }
}
