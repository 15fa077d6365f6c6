//! Reading `events.jsonl` back (unreadable lines skipped: a newer version's
//! event kinds, or a torn last line); a sweep directory's shards read as one
//! stream in time order.

use std::collections::BTreeMap;
use std::path::Path;

use super::file::read_lines;
use super::sweep::Sweep;
use super::EVENTS;
use crate::model::{Event, ServerMeta, Timestamp};

/// The events recorded in a run directory, or in every shard of a sweep
/// directory.
pub fn read_events(dir: &Path) -> Vec<Event> {
    if let Some(sweep) = Sweep::open(dir) {
        return read_sweep_events(&sweep);
    }
    read_lines(&dir.join(EVENTS)).collect()
}

/// What each config benchmarked, from its last launch's `server_ready`
/// event (configs from runs recorded before it was kept are absent).
pub fn read_servers(dir: &Path) -> BTreeMap<String, ServerMeta> {
    read_events(dir)
        .into_iter()
        .filter_map(|ev| match ev {
            Event::ServerReady {
                config,
                server: Some(meta),
                ..
            } => Some((config, *meta)),
            _ => None,
        })
        .collect()
}

/// Whether `ev` is a shard's own start or end, which is not the sweep's.
pub(super) fn is_shards_own(ev: &Event) -> bool {
    matches!(
        ev,
        Event::SweepStarted { .. } | Event::SweepFinished { .. } | Event::SweepInterrupted { .. }
    )
}

/// Every shard's events in time order (events without a time keep their place
/// after the one before them in their shard). A shard's own start and end
/// are not the sweep's: only the first start and, once every shard has
/// ended, the last end are kept.
fn read_sweep_events(sweep: &Sweep) -> Vec<Event> {
    let mut all: Vec<(Timestamp, u32, usize, Event)> = Vec::new();
    for (i, dir) in sweep.shards.iter().cloned() {
        let mut last = Timestamp::from_unix_ms(0);
        for (n, ev) in read_events(&dir).into_iter().enumerate() {
            if let Some(at) = ev.at() {
                last = at;
            }
            all.push((last, i, n, ev));
        }
    }
    all.sort_by_key(|a| (a.0, a.1, a.2));
    all.into_iter()
        .map(|(_, _, _, ev)| ev)
        .filter(|ev| !is_shards_own(ev))
        .collect()
}
