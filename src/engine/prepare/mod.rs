//! Prepare steps: before a config launches, what it needs is put in place
//! (a model copied into `/dev/shm`, which a reboot empties). Each step runs
//! once per sweep, in a task of its own that every config needing it waits
//! for: skipped when its target is in place and whole, else run as a
//! process group like a server (its output in the log pane and
//! `logs/prepare-<id>.log`, capped), watched every second (the size of what
//! it creates, against the size expected), and bounded by its timeout. A
//! step that fails fails the configs that need it (`prepare_failed`, its
//! output's tail as evidence); they are not launched.
//!
//! [`disk`] answers what the target is on disk, always on the blocking pool.

pub(crate) mod disk;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::core::{Core, Skip, StepEnd};
use super::process;
use super::server::{Launch, Server};
use super::EngineError;
use crate::model::{
    prepare_log_name, Event, Failure, FailureKind, FailureSource, Level, PrepareOutcome, Timestamp,
};
use crate::plan::{Cell, Config, Expect, Step};
use disk::Whole;

/// How long looking at a target may take (hashing a listed file, a size
/// walk on a slow mount) before the look is given up.
const LOOK_DEADLINE: Duration = Duration::from_secs(600);
/// How long one size sample may take before it is skipped.
const SAMPLE_DEADLINE: Duration = Duration::from_secs(5);
/// How long a stopped step's processes have to end after SIGINT.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How a config's wait for its steps ended.
pub(super) enum Waited {
    /// Every step it needs is done: launch it.
    Ready,
    /// A step failed: its cells fail with this (recorded here).
    Failed,
    /// The user skipped the config (its cells recorded as skipped).
    Skipped,
    Quit,
}

/// Wait until every step `config` needs is done, starting those not
/// started; a skip or quit meanwhile is honoured at once (a step others
/// wait for goes on). A failed step's failure is recorded for `remaining`.
pub(super) async fn wait_for_steps(
    core: &Arc<Core>,
    steer: &mut watch::Receiver<u64>,
    config: &Config,
    remaining: &mut std::collections::VecDeque<Cell>,
) -> Result<Waited, EngineError> {
    for key in &config.prepare {
        let Some(step) = core.plan.step(key) else {
            continue;
        };
        let mut end = step_run(core, step);
        loop {
            let ended = end.borrow_and_update().clone();
            match ended {
                Some(Ok(())) => break,
                // A step the stop cut short is not the config's failure.
                Some(Err(_)) if core.quitting() => return Ok(Waited::Quit),
                Some(Err(failure)) => {
                    let cells: Vec<Cell> = remaining.drain(..).collect();
                    core.fail_all(&cells, &failure)?;
                    return Ok(Waited::Failed);
                }
                None => {}
            }
            tokio::select! {
                changed = end.changed() => {
                    if changed.is_err() {
                        // The step's task is gone without an end: a panic.
                        let failure = step_failure(step, "its task stopped unexpectedly".into(), Vec::new());
                        let cells: Vec<Cell> = remaining.drain(..).collect();
                        core.fail_all(&cells, &failure)?;
                        return Ok(Waited::Failed);
                    }
                }
                _ = steer.changed() => {
                    if core.quitting() {
                        return Ok(Waited::Quit);
                    }
                    match core.take_skip(&config.id) {
                        Some(Skip::Config) => {
                            let cells: Vec<Cell> = remaining.drain(..).collect();
                            core.skip_all(&cells)?;
                            return Ok(Waited::Skipped);
                        }
                        Some(Skip::Cell) => {
                            if let Some(c) = remaining.pop_front() {
                                core.skip_all(&[c])?;
                            }
                            if remaining.is_empty() {
                                return Ok(Waited::Skipped);
                            }
                        }
                        None => {}
                    }
                }
            }
        }
    }
    Ok(Waited::Ready)
}

/// At the sweep's end: stop every step still running (no config waits for
/// it any more: they were skipped, or the sweep quit) and wait, at most
/// `limit`, until each has ended and said so, before the sweep's end.
pub(super) async fn settled(core: &Core, limit: Duration) {
    let running: Vec<watch::Receiver<StepEnd>> = {
        let mut book = core.book();
        book.steps_stop = true;
        book.steps.values().cloned().collect()
    };
    core.steer.send_modify(|n| *n += 1);
    let _ = tokio::time::timeout(limit, async {
        for mut end in running {
            let _ = end.wait_for(Option::is_some).await;
        }
    })
    .await;
}

/// The end of `step`'s run in this sweep, started now if it was not (or
/// if it failed and the user asked for a retry since).
fn step_run(core: &Arc<Core>, step: &Step) -> watch::Receiver<StepEnd> {
    let mut book = core.book();
    if let Some(rx) = book.steps.get(&step.key) {
        return rx.clone();
    }
    let (tx, rx) = watch::channel(None);
    book.steps.insert(step.key.clone(), rx.clone());
    drop(book);
    let core = core.clone();
    let step = step.clone();
    tokio::spawn(async move {
        let end = run_step(&core, &step).await;
        let _ = tx.send(Some(end));
    });
    rx
}

/// The configs of the plan that need `step` and have cells left.
fn waiting_configs(core: &Core, step: &Step) -> Vec<String> {
    let book = core.book();
    core.plan
        .configs
        .iter()
        .filter(|c| c.prepare.contains(&step.key))
        .filter(|c| {
            core.plan
                .cells_of(&c.id)
                .any(|cell| !book.done.contains(&cell.id))
        })
        .map(|c| c.id.clone())
        .collect()
}

/// A step's failure, as the configs needing it record it.
fn step_failure(step: &Step, why: String, evidence: Vec<String>) -> Failure {
    Failure::new(
        FailureKind::PrepareFailed,
        FailureSource::Preflight,
        format!("prepare step `{}` failed: {why}", step.key),
    )
    .with_evidence(evidence)
}

/// `f()` on the blocking pool, given up after `limit` (a hung mount); `None`
/// also when it panicked.
async fn blocking<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    tokio::time::timeout(limit, tokio::task::spawn_blocking(f))
        .await
        .ok()
        .and_then(Result::ok)
}

/// Run one step to its end: locked (one writer per target among every
/// sweep on this machine), looked at, checked for room, run and watched,
/// looked at again; every stage told as events.
async fn run_step(core: &Arc<Core>, step: &Step) -> Result<(), Failure> {
    let started = Instant::now();
    let configs = waiting_configs(core, step);
    let ended = |outcome, bytes, message: Option<String>| Event::PrepareEnded {
        at: Timestamp::now(),
        step: step.key.clone(),
        outcome,
        bytes,
        duration_s: started.elapsed().as_secs_f64(),
        message,
        configs: configs.clone(),
    };
    let fail = |why: String, bytes: u64, evidence: Vec<String>| {
        core.emit(ended(PrepareOutcome::Failed, bytes, Some(why.clone())));
        Err(step_failure(step, why, evidence))
    };
    // The lock first: a target another sweep is writing is not looked at
    // (it may exist, half done) until that sweep's step has ended.
    let lock = match lock_target(core, step).await {
        Some(l) => l,
        None => return fail(STOPPED_WAITING.into(), 0, Vec::new()),
    };
    let expect = expected(core, step).await;
    let recorded = recorded_hashes(core, step).await;
    let have = match look(step, expect.as_ref(), &recorded).await {
        Some(Whole::Yes { bytes }) => {
            core.emit(ended(PrepareOutcome::Present, bytes, None));
            return Ok(());
        }
        Some(Whole::No { bytes, .. }) => bytes,
        None => return fail(look_failed(step), 0, Vec::new()),
    };
    let expect_bytes = expect.as_ref().map(|e| e.bytes);
    let room = {
        let step = step.clone();
        blocking(LOOK_DEADLINE, move || {
            disk::room_for(&step, expect_bytes, have)
        })
        .await
    };
    match room {
        Some(Ok(())) => {}
        Some(Err(why)) => return fail(why, have, Vec::new()),
        None => return fail(look_failed(step), have, Vec::new()),
    }
    let argv = fill_runtime(core, &step.argv);
    core.emit(Event::PrepareStarted {
        at: Timestamp::now(),
        step: step.key.clone(),
        command: crate::plan::template::command_line(&argv, step.shell),
        creates: step.creates.clone(),
        expect_bytes,
        configs: configs.clone(),
    });
    // The step's processes hold the lock too: a copier that outlives this
    // sweep (SIGKILL) keeps another sweep off its target until it ends.
    let mut server = match spawn(core, step, &argv, lock.as_ref()) {
        Ok(s) => s,
        Err(e) => {
            let why = format!(
                "cannot start `{}`: {e}",
                argv.first().map_or("", String::as_str)
            );
            return fail(why, have, Vec::new());
        }
    };
    let stopped = watch_step(core, step, &mut server, expect_bytes).await;
    let bytes = sample(step).await.unwrap_or(have);
    if let Some(why) = stopped {
        server.stop(STOP_GRACE).await;
        return fail(why, bytes, server.tail(20));
    }
    server.drain_logs(Duration::from_secs(2)).await;
    server.settle_log().await;
    let exit = server.exited();
    if let Some(info) = exit.filter(|i| i.code != Some(0)) {
        return fail(info.describe(), bytes, server.tail(20));
    }
    match look(step, expect.as_ref(), &recorded).await {
        Some(Whole::Yes { bytes }) => {
            core.emit(ended(PrepareOutcome::Done, bytes, None));
            Ok(())
        }
        Some(Whole::No { why, bytes }) => fail(
            format!("it exited with code 0, but {why}"),
            bytes,
            server.tail(20),
        ),
        None => fail(look_failed(step), bytes, server.tail(20)),
    }
}

/// Why a step failed when the sweep stopped it while it waited for the lock.
const STOPPED_WAITING: &str = "the sweep was stopped while it waited";

fn look_failed(step: &Step) -> String {
    format!(
        "looking at {} failed or took over {} s (a hung mount?)",
        step.creates.join(", "),
        LOOK_DEADLINE.as_secs()
    )
}

/// What the target holds when whole: its size as written, or its files
/// read from `expect_from`. A source that cannot be read (no local Hugging
/// Face snapshot, a source disk not mounted) is said, and the step is then
/// judged by its other checks.
async fn expected(core: &Core, step: &Step) -> Option<disk::Expected> {
    let source = match &step.expect {
        Expect::Unknown => return None,
        Expect::Bytes(b) => {
            return Some(disk::Expected {
                bytes: *b,
                files: Vec::new(),
            })
        }
        Expect::From(source) => source.clone(),
    };
    let s = source.clone();
    let read = blocking(LOOK_DEADLINE, move || disk::expected_from(&s)).await;
    let why = match read {
        Some(Ok(e)) => {
            core.notice(
                Level::Info,
                format!(
                    "prepare {}: expects {} in {} files (from {source})",
                    step.key,
                    crate::model::text::bytes(e.bytes),
                    e.files.len()
                ),
            );
            return Some(e);
        }
        Some(Err(why)) => why,
        None => format!("did not answer within {} s", LOOK_DEADLINE.as_secs()),
    };
    core.notice(
        Level::Warn,
        format!(
            "prepare {}: expect_from = \"{source}\": {why}; its size is unknown, so only {} is checked",
            step.key,
            if step.sha256.is_empty() && !step.verify_recorded {
                "that its target exists"
            } else {
                "its target's existence and hashes"
            }
        ),
    );
    None
}

/// With `verify = { recorded = true }`: the `config.json` hash this run's
/// servers recorded for a model loaded from one of the step's targets.
async fn recorded_hashes(core: &Core, step: &Step) -> Vec<(PathBuf, String)> {
    if !step.verify_recorded {
        return Vec::new();
    }
    let dir = core.run_path.clone();
    let creates = step.creates.clone();
    let found = blocking(LOOK_DEADLINE, move || {
        let mut found: Vec<(PathBuf, String)> = Vec::new();
        for (_, meta) in crate::store::read_servers(&dir) {
            let (Some(path), Some(hash)) = (meta.model_path, meta.model_config_sha256) else {
                continue;
            };
            if creates
                .iter()
                .any(|c| crate::plan::prepare::path_within(&path, c))
            {
                let file = PathBuf::from(path).join("config.json");
                if !found.iter().any(|(f, _)| *f == file) {
                    found.push((file, hash));
                }
            }
        }
        found
    })
    .await;
    found.unwrap_or_default()
}

async fn look(
    step: &Step,
    expect: Option<&disk::Expected>,
    recorded: &[(PathBuf, String)],
) -> Option<Whole> {
    let step = step.clone();
    let expect = expect.cloned();
    let recorded = recorded.to_vec();
    blocking(LOOK_DEADLINE, move || {
        disk::whole(&step, expect.as_ref(), &recorded)
    })
    .await
}

async fn sample(step: &Step) -> Option<u64> {
    let step = step.clone();
    blocking(SAMPLE_DEADLINE, move || disk::created_bytes(&step).ok())
        .await
        .flatten()
}

/// Take the target's lock, waiting (told once) while another sweep holds
/// it; `None`: the sweep quit meanwhile.
async fn lock_target(core: &Core, step: &Step) -> Option<Option<std::fs::File>> {
    let mut told = false;
    let mut steer = core.steer.subscribe();
    loop {
        let s = step.clone();
        let why = match blocking(SAMPLE_DEADLINE, move || disk::try_lock_target(&s)).await {
            Some(Ok(Some(lock))) => return Some(Some(lock)),
            Some(Ok(None)) => None,
            Some(Err(e)) => Some(e.to_string()),
            None => Some("it did not answer".to_string()),
        };
        if let Some(why) = why {
            // No lock to be had (a temporary directory that cannot be
            // written): said, and the step runs without one.
            core.notice(
                Level::Warn,
                format!(
                    "prepare {}: cannot take the lock for {} ({why}); another sweep could write it at the same time",
                    step.key,
                    step.creates.join(", ")
                ),
            );
            return Some(None);
        }
        if !told {
            core.notice(
                Level::Info,
                format!(
                    "prepare {}: another sweep is putting {} in place; waiting for it",
                    step.key,
                    step.creates.join(", ")
                ),
            );
            told = true;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = steer.changed() => {}
        }
        if core.steps_stopping() {
            return None;
        }
    }
}

/// `{sweeptop}` and `{run_dir}` in a step's command.
fn fill_runtime(core: &Core, argv: &[String]) -> Vec<String> {
    let sweeptop = core.sweeptop_exe.display().to_string();
    let run_dir = core.run_path.display().to_string();
    argv.iter()
        .map(|a| {
            crate::plan::template::fill(a, &|name| match name {
                "sweeptop" => Some(sweeptop.clone()),
                "run_dir" => Some(run_dir.clone()),
                other => Some(format!("{{{other}}}")),
            })
            .unwrap_or_else(|_| a.clone())
        })
        .collect()
}

/// The step's process group, its output to its log file (capped like a
/// server's) and the log pane; tagged with the run, so a resume after a
/// crash of this process stops it.
fn spawn(
    core: &Core,
    step: &Step,
    argv: &[String],
    lock: Option<&std::fs::File>,
) -> std::io::Result<Server> {
    let mut env: Vec<(String, String)> = step
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    env.push((process::RUN_TAG.into(), core.run_tag.clone()));
    let name = log_name(step);
    let log_path = crate::store::log_path(&core.run_path, &format!("prepare-{name}"));
    let note = format!(
        "# sweeptop {} prepare {}: {}",
        Timestamp::now(),
        step.key,
        crate::plan::template::command_line(argv, step.shell)
    );
    Server::spawn(Launch {
        argv,
        shell: step.shell,
        env: &env,
        log_path: &log_path,
        log_note: &note,
        log_max_bytes: core.plan.limits.log_max_bytes(),
        config: &prepare_log_name(&step.key),
        patterns: core.patterns.clone(),
        ready_line: None,
        logs: core.bus.logs.clone(),
        keep_fd: lock.map(std::os::fd::AsRawFd::as_raw_fd),
    })
}

/// A step's log file name: its id, and for a step that configs fill in
/// several ways, a digest of its key (two keys never share a file).
fn log_name(step: &Step) -> String {
    if step.key == step.id {
        return step.id.clone();
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(step.key.as_bytes());
    let short: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{short}", step.id)
}

/// Watch a running step until it exits (`None`), or why it was stopped:
/// its timeout, or the sweep quitting. Its progress is told every second.
async fn watch_step(
    core: &Core,
    step: &Step,
    server: &mut Server,
    expect: Option<u64>,
) -> Option<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(step.timeout_s);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut steer = core.steer.subscribe();
    let mut meter = disk::Meter::new();
    let mut exit = server.exit.clone();
    loop {
        if exit.borrow_and_update().is_some() {
            return None;
        }
        tokio::select! {
            _ = exit.changed() => {}
            _ = tick.tick() => {
                let Some(bytes) = sample(step).await else { continue };
                let (rate_bps, recorded) = meter.observe(Instant::now(), bytes);
                let ev = Event::PrepareProgress {
                    at: Timestamp::now(),
                    step: step.key.clone(),
                    bytes,
                    expect_bytes: expect,
                    rate_bps,
                    recorded,
                };
                if recorded {
                    core.emit(ev);
                } else {
                    let _ = core.bus.events.send(ev);
                }
            }
            _ = tokio::time::sleep_until(deadline) => {
                return Some(format!(
                    "it did not end within its timeout_s = {} (stopped)",
                    step.timeout_s
                ));
            }
            _ = steer.changed() => {
                if core.steps_stopping() {
                    return Some("the sweep was stopped (or ended) while it ran".into());
                }
            }
        }
    }
}
