//! What the user asked for (a key, an attached client, a signal), applied by
//! the engine: recorded as an `Action` event, then acted on. Between cells the
//! queue is drained and a pause holds the sweep; during a cell [`Engine::apply`]
//! is called as commands arrive.

use super::{Engine, Request};
use crate::model::{Command, Event, Level, Timestamp};
use crate::plan::Plan;

/// Why `cmd` names nothing this plan has (a retry of a cell or config, an
/// exclusion of a config), or `None` when it is fine. Said to whoever sent it:
/// `attach --send` before sending, the engine to any other client.
pub fn target_problem(plan: &Plan, cmd: &Command) -> Option<String> {
    let (target, cells_too) = match cmd {
        Command::Retry { target } => (target, true),
        Command::Exclude { config } | Command::Include { config } => (config, false),
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

impl Engine {
    /// Record and apply a command. Returns true for quit.
    pub(super) fn apply(&mut self, req: &Request) -> bool {
        if let Some(problem) = target_problem(&self.plan, &req.command) {
            self.notice(
                Level::Warn,
                format!("ignored from {}: {problem}", req.source),
            );
            return false;
        }
        self.emit(Event::Action {
            at: Timestamp::now(),
            action: req.command.name().to_string(),
            target: req.command.target(),
            source: req.source.clone(),
        });
        match &req.command {
            Command::Pause => self.set_paused(true),
            Command::Resume => self.set_paused(false),
            Command::TogglePause => self.set_paused(!self.paused),
            Command::Retry { target } => {
                if !self.retry_queue.contains(target) {
                    self.retry_queue.push_back(target.clone());
                }
            }
            Command::Exclude { config } => {
                self.excluded.insert(config.clone());
            }
            Command::Include { config } => {
                self.excluded.remove(config);
            }
            Command::Quit => return true,
            Command::SkipConfig | Command::SkipCell => {}
        }
        false
    }

    fn set_paused(&mut self, paused: bool) {
        if self.paused != paused {
            self.paused = paused;
            let at = Timestamp::now();
            self.emit(if paused {
                Event::Paused { at }
            } else {
                Event::Resumed { at }
            });
        }
    }

    /// Between cells: apply queued commands, and hold while paused.
    pub(super) async fn between_steps(&mut self) -> Between {
        let mut skip = None;
        loop {
            while let Ok(req) = self.commands.try_recv() {
                if self.apply(&req) {
                    return Between::Quit;
                }
                skip = skip_of(&req.command).or(skip);
            }
            if let Some(s) = skip {
                return s;
            }
            if !self.paused {
                return Between::Continue;
            }
            match self.commands.recv().await {
                Some(req) => {
                    if self.apply(&req) {
                        return Between::Quit;
                    }
                    skip = skip_of(&req.command);
                }
                None => return Between::Continue,
            }
        }
    }
}

fn skip_of(c: &Command) -> Option<Between> {
    match c {
        Command::SkipConfig => Some(Between::SkipConfig),
        Command::SkipCell => Some(Between::SkipCell),
        _ => None,
    }
}
