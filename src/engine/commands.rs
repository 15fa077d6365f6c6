//! What the user asked for (a key, an attached client, a signal): whether a
//! command names something the plan has, and what a lane does about it
//! between and during its steps. The engine applies commands to its shared
//! state in [`super::core::Core::apply`].

use crate::model::Command;
use crate::plan::Plan;

/// A command that names nothing the plan has (a retry of a cell or config,
/// an exclusion or skip of a config).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{command} `{shown}`: the plan has no such {what}; its configs are {configs}")]
pub struct UnknownTarget {
    command: &'static str,
    /// The name as sent, cut at 80 characters.
    shown: String,
    what: &'static str,
    /// The plan's first configs.
    configs: String,
}

/// Why `cmd` names nothing this plan has, or `None` when it is fine. Said to
/// whoever sent it: `attach --send` before sending, the engine to any other
/// client.
pub fn target_problem(plan: &Plan, cmd: &Command) -> Option<UnknownTarget> {
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
    let mut shown: String = target.chars().take(80).collect();
    if shown.len() < target.len() {
        shown.push('…');
    }
    let mut configs: Vec<&str> = plan.configs.iter().take(8).map(|c| c.id.as_str()).collect();
    if plan.configs.len() > configs.len() {
        configs.push("…");
    }
    Some(UnknownTarget {
        command: cmd.name(),
        shown,
        what: if cells_too {
            "cell or config"
        } else {
            "config"
        },
        configs: configs.join(", "),
    })
}

/// What the user asked for while no cell was running.
pub(super) enum Between {
    Continue,
    Quit,
    SkipConfig,
    SkipCell,
}
