//! A sweep directory's shards followed as one stream of events (`attach
//! SWEEP_DIR`): their events and logs through the shards' files, their GPU
//! panels merged into one, the shard each config started on remembered so
//! that keys reach the right shard. Every file is read on a thread of its
//! own with a deadline, so the view never waits on a mount that hangs.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::shards::ShardGpus;
use super::state::ViewState;
use crate::control::shards::{self, ShardRouter};
use crate::model::{Event, Level, Timestamp};
use crate::plan::Plan;
use crate::store::shared::{FileWork, Stuck, FILE_DEADLINE};
use crate::store::sweep::SweepMeta;
use crate::store::tail::SweepTail;
use crate::store::{self, StoreError};

/// How long the first read of a sweep's files may take (every shard's
/// events and results) before the mount is taken for hung.
const OPEN_DEADLINE: Duration = Duration::from_secs(30);

/// Why a sweep directory could not be followed.
#[derive(Debug, thiserror::Error)]
pub enum FeedError {
    #[error("the sweep's files in {}: {stuck}", .dir.display())]
    Stuck { dir: PathBuf, stuck: Stuck },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A sweep directory's shards as one stream of events, followed through
/// their files (there is no socket between machines): their GPU panels
/// merged into one, and the shard each config started on remembered so
/// that keys reach the right shard. The files are read on a thread of their
/// own with a deadline: a sweep directory on a mount that hangs is said, and
/// the view (its keys, its exit) never waits on it.
pub struct SweepFeed {
    files: Arc<Mutex<FeedFiles>>,
    work: FileWork<Polled>,
    /// Where a key for a config goes: the shard it started on.
    pub router: ShardRouter,
    /// Whether the files' not answering was said (and not yet their answer).
    stuck_told: bool,
}

/// What is read from the shards' files.
struct FeedFiles {
    tail: SweepTail,
    gpus: ShardGpus,
}

/// One poll: events with the shard they came from (none: the merged GPU
/// panel), and the sweep's end once it ended.
#[derive(Default)]
struct Polled {
    events: Vec<(Option<u32>, Event)>,
    end: Option<Event>,
}

impl FeedFiles {
    fn poll(&mut self) -> Polled {
        // GPUs first: a config starting is numbered on the panel of its host.
        let mut events: Vec<(Option<u32>, Event)> = self
            .gpus
            .update(self.tail.poll_gpus())
            .into_iter()
            .map(|ev| (None, ev))
            .collect();
        for (shard, ev) in self.tail.poll_events() {
            events.push((Some(shard), self.gpus.renumber(ev)));
        }
        let end = self.tail.ended();
        Polled { events, end }
    }
}

impl SweepFeed {
    /// Following from the files' current ends. The files are first read on
    /// a thread of their own, with a deadline: a sweep directory on a mount
    /// that hangs is an error that says so.
    pub async fn open(dir: &Path, meta: &SweepMeta, plan: &Plan) -> Result<SweepFeed, FeedError> {
        let shard_of = shards::shard_map(plan, meta.shards);
        let at = dir.to_path_buf();
        let (router, files) = FileWork::new("attach-open")
            .run(OPEN_DEADLINE, move || {
                // The router reads where each config started, the tail the files' ends.
                let router = ShardRouter::new(&at, shard_of.clone());
                let mut tail = SweepTail::new(&at);
                let mut gpus = ShardGpus::new(&at, shard_of);
                gpus.update(tail.poll_gpus());
                (router, FeedFiles { tail, gpus })
            })
            .await
            .map_err(|stuck| FeedError::Stuck {
                dir: dir.to_path_buf(),
                stuck,
            })?;
        Ok(SweepFeed {
            files: Arc::new(Mutex::new(files)),
            work: FileWork::new("attach-files"),
            router,
            stuck_told: false,
        })
    }

    /// The view so far: the sweep's start, then every shard's events and
    /// results, merged (read on a thread of its own, with a deadline).
    pub async fn first_view(
        &self,
        dir: &Path,
        meta: &SweepMeta,
        plan: Arc<Plan>,
    ) -> Result<ViewState, FeedError> {
        let files = self.files.clone();
        let at = dir.to_path_buf();
        let created_at = meta.created_at;
        FileWork::new("attach-view")
            .run(OPEN_DEADLINE, move || {
                let mut view = ViewState::new(Some(plan.clone()));
                view.apply(&Event::SweepStarted {
                    at: created_at,
                    plan: plan.name.clone(),
                    run_dir: at.display().to_string(),
                    configs: plan.configs.len(),
                    cells: plan.cells.len(),
                    already_done: 0,
                });
                {
                    let files = files.lock().unwrap_or_else(|p| p.into_inner());
                    for ev in store::read_events(&at) {
                        view.apply(&files.gpus.renumber(ev));
                    }
                    if let Some(snapshot) = files.gpus.merged() {
                        view.apply(&Event::Gpu { snapshot });
                    }
                }
                let mut results = store::read_results(&at)?;
                results.only_cells(plan.cells.iter().map(|c| c.id.as_str()));
                for r in results.records {
                    view.record(r);
                }
                Ok(view)
            })
            .await
            .map_err(|stuck| FeedError::Stuck {
                dir: dir.to_path_buf(),
                stuck,
            })?
            .map_err(FeedError::Store)
    }

    /// What the shards wrote since the last poll, as events (log lines too,
    /// and a notice when the files stop or start answering), and the
    /// sweep's end once it ended.
    pub async fn poll(&mut self, dir: &Path) -> (Vec<Event>, Option<Event>) {
        let files = self.files.clone();
        let polled = self
            .work
            .run(FILE_DEADLINE, move || {
                files.lock().unwrap_or_else(|p| p.into_inner()).poll()
            })
            .await;
        let notice = |level, message| Event::Notice {
            at: Timestamp::now(),
            level,
            message,
        };
        let mut out = Vec::new();
        let polled = match polled {
            Ok(p) => {
                if std::mem::take(&mut self.stuck_told) {
                    out.push(notice(
                        Level::Info,
                        format!("{} answers again", dir.display()),
                    ));
                }
                p
            }
            Err(stuck) => {
                if !std::mem::replace(&mut self.stuck_told, true) {
                    out.push(notice(
                        Level::Warn,
                        format!(
                            "the sweep's files in {}: {stuck}; the view waits for them",
                            dir.display()
                        ),
                    ));
                }
                Polled::default()
            }
        };
        for (shard, ev) in polled.events {
            if let Some(shard) = shard {
                self.router.note(shard, &ev);
            }
            out.push(ev);
        }
        (out, polled.end)
    }
}
