//! `sweeptop run PLAN`, `sweeptop run --resume DIR` and `sweeptop demo`: a
//! sweep in the foreground (dashboard, or line progress without a terminal),
//! or with `--detach` in the background in its own session.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{user, Context, GpuArgs, Result, ViewArgs};
use crate::engine::{Bus, Engine, Options, Outcome, Request};
use crate::model::{Command, RunState};
use crate::plan::{Plan, Shard, DEMO_PATH, DEMO_PLAN};
use crate::store::{self, RunDir};
use crate::view::state::ViewState;

/// Exit code of an interrupted sweep.
pub const EXIT_INTERRUPTED: u8 = 130;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The plan file (TOML).
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    plan: Option<PathBuf>,
    /// Continue the sweep recorded in this run directory.
    #[arg(long, value_name = "DIR")]
    resume: Option<PathBuf>,
    /// With --resume: measure recorded cells again, on fresh servers: `failed`,
    /// `skipped` (by their latest record), or cell and config ids. The new
    /// records follow the old ones in results.jsonl (the last one counts).
    #[arg(long, requires = "resume", num_args = 1.., value_name = "WHAT")]
    retry: Vec<String>,
    /// Run only shard i of N (1-based, e.g. 2/4): the plan's configs are
    /// split into N shards of about equal estimated GPU time. Recorded in the
    /// run directory, so `--resume` keeps to the shard.
    #[arg(long, value_name = "i/N", conflicts_with = "resume")]
    shard: Option<Shard>,
    #[command(flatten)]
    common: Common,
}

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    #[command(flatten)]
    common: Common,
}

/// What `run` and `demo` share.
#[derive(clap::Args, Debug)]
struct Common {
    /// Run directory (default runs/<plan>-<UTC timestamp>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print line progress instead of the dashboard.
    #[arg(long)]
    headless: bool,
    /// Run in the background (its own session); attach with `sweeptop attach`.
    #[arg(long)]
    detach: bool,
    #[command(flatten)]
    gpu: GpuArgs,
    #[command(flatten)]
    view: ViewArgs,
}

pub fn run(args: RunArgs) -> Result<u8> {
    let source = match (&args.resume, &args.plan) {
        (Some(dir), _) if args.common.out.is_some() => {
            return Err(user(format!(
                "--out and --resume both name a run directory: continue with `sweeptop run --resume {}`",
                dir.display()
            )))
        }
        (Some(dir), _) => {
            // What is in a sweep's shards but is not one of them (a link to
            // another run…) is never resumed as that shard.
            if let Some(f) = store::sweep::foreign_in_sweep(dir) {
                return Err(super::store_error(
                    store::Invalid::ForeignShard {
                        dir: dir.clone(),
                        why: f.why,
                    }
                    .into(),
                ));
            }
            Source::Resume(dir.clone())
        }
        (None, Some(plan)) => Source::Plan(plan.clone()),
        (None, None) => return Err(user("a plan file is needed (or --resume DIR)")),
    };
    let retry = match &source {
        Source::Resume(dir) => match retry_of(dir, &args.retry)? {
            Some(cells) => cells,
            None => {
                // Nothing to do is not an error; say how to do more.
                super::print(&nothing_left(dir))?;
                return Ok(0);
            }
        },
        _ => Vec::new(),
    };
    sweep(source, args.common, retry, args.shard)
}

pub fn demo(args: DemoArgs) -> Result<u8> {
    sweep(Source::Demo, args.common, Vec::new(), None)
}

/// What `--resume` says about a run with every cell recorded.
pub fn nothing_left(dir: &Path) -> String {
    format!(
        "nothing left to run in {d}: every cell has a record.\n\
         To measure some again, on fresh servers: sweeptop run --resume {d} --retry failed\n\
         (or --retry skipped, or cell and config ids)\n",
        d = dir.display()
    )
}

/// The cells `--retry` names in a resumed run, each with why; `None` when
/// nothing is asked for and nothing is left (the run finished, every cell recorded).
fn retry_of(dir: &Path, targets: &[String]) -> Result<Option<Vec<(String, String)>>> {
    if !dir.join(store::PLAN).exists() {
        // `open_run` says what is wrong with it.
        return Ok(Some(Vec::new()));
    }
    let plan = crate::view::replay::plan_of_run(dir).map_err(|e| user(e.to_string()))?;
    let mut results = store::read_results(dir).map_err(super::store_error)?;
    results.only_cells(plan.cells.iter().map(|c| c.id.as_str()));
    if targets.is_empty() {
        // A run killed after its last record but before it said it finished
        // still has that to do: only a finished one has nothing left.
        let finished = store::run_meta(dir).is_some_and(|m| m.state == RunState::Finished);
        let complete = plan.cells.iter().all(|c| results.get(&c.id).is_some());
        // Failures the last stop made (a job's cancellation stops the server
        // too) are measured again.
        let cut = crate::view::replay::cut_short(&store::read_events(dir), &results);
        let unprepared = crate::view::replay::unprepared(&results);
        if finished && complete && cut.is_empty() && unprepared.is_empty() {
            return Ok(None);
        }
        let cut_why = "cut short when the run was stopped";
        let unprepared_why = "its prepare step failed: nothing was measured";
        let mut again: Vec<(String, String)> =
            cut.into_iter().map(|c| (c, cut_why.into())).collect();
        for c in unprepared {
            if !again.iter().any(|(a, _)| *a == c) {
                again.push((c, unprepared_why.into()));
            }
        }
        return Ok(Some(again));
    }
    let cells = crate::engine::cells_to_retry(&plan, &results.records, targets).map_err(user)?;
    if cells.is_empty() {
        return Err(user(format!(
            "--retry {}: no cell of {} matches (nothing to run again)",
            targets.join(" "),
            dir.display()
        )));
    }
    let why = format!("--retry {}", targets.join(" "));
    Ok(Some(cells.into_iter().map(|c| (c, why.clone())).collect()))
}

/// Where a sweep's plan comes from.
enum Source {
    Plan(PathBuf),
    Demo,
    Resume(PathBuf),
}

/// The plan of a new sweep; a bad plan is the user's to fix (`file:line:col`).
fn new_plan(source: &Source) -> Result<Plan> {
    let plan = plan_of(source)?;
    plan.check_files().map_err(|e| user(e.to_string()))?;
    Ok(plan)
}

fn plan_of(source: &Source) -> Result<Plan> {
    match source {
        Source::Demo => {
            Plan::parse(Path::new(DEMO_PATH), DEMO_PLAN).map_err(|e| user(e.to_string()))
        }
        Source::Plan(path) => Plan::load(path).map_err(|e| user(e.to_string())),
        // A sweep stopped before its plan was recorded ran nothing: it is
        // started again, not resumed.
        Source::Resume(dir) if store::never_started(dir) => Err(user(format!(
            "{} holds no run: its sweep was stopped before its plan was recorded; \
                 start it again with `sweeptop run PLAN --out {}`",
            dir.display(),
            dir.display()
        ))),
        Source::Resume(dir) if !dir.join(store::PLAN).exists() => Err(user(format!(
            "{} is not a run directory (no {}): see `sweeptop ls`",
            dir.display(),
            store::PLAN
        ))),
        Source::Resume(dir) => {
            crate::view::replay::plan_of_run(dir).map_err(|e| user(e.to_string()))
        }
    }
}

fn sweep(
    source: Source,
    args: Common,
    retry: Vec<(String, String)>,
    shard: Option<Shard>,
) -> Result<u8> {
    let demo = matches!(source, Source::Demo);
    if args.detach {
        return detach_sweep(&source, &args);
    }
    let headless = args.headless || !std::io::stdout().is_terminal();
    // The dashboard's settings come first: a bad keys or theme file is an error
    // before anything starts.
    let setup = if headless {
        None
    } else {
        Some(args.view.setup(!args.gpu.no_gpu)?)
    };
    let (plan, run_dir) = open_run(&source, args.out.as_deref(), shard)?;
    if let Some(s) = store::sweep::read_shard(&run_dir.path).map_err(super::store_error)? {
        if plan.configs.is_empty() {
            // Not an error: a sweep split over more shards than it has configs.
            eprintln!(
                "shard {}/{} has no configs (the plan's are all in other shards): nothing to run",
                s.index, s.count
            );
        }
    }
    let plan = Arc::new(plan);
    // A resumed run's dashboard shows what is already recorded.
    let seed = match (&source, &setup) {
        (Source::Resume(dir), Some(_)) => crate::view::replay::load_run(dir).unwrap_or_default(),
        _ => ViewState::default(),
    };
    let seed = ViewState {
        plan: Some(plan.clone()),
        plan_name: plan.name.clone(),
        total_configs: plan.configs.len(),
        total_cells: plan.cells.len(),
        ..seed
    };
    let opts = Options {
        sweeptop_exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("sweeptop")),
        gpu: args.gpu.source(demo),
        gpu_interval: Duration::from_millis(args.gpu.gpu_interval_ms),
        retry,
    };
    // One worker: a sweep waits on servers far more than it computes, and a
    // second worker mostly wakes to find the first already has the work (a
    // fifth of the demo's context switches). Token times come from the
    // kernel's receive clock, so a chunk read late is still timed right.
    let rt = super::runtime(1)?;
    let done = rt.block_on(drive(plan, run_dir, setup.map(|s| (s, seed)), opts));
    // Blocking work still running on a file that hangs does not hold the
    // exit up.
    rt.shutdown_timeout(Duration::from_secs(2));
    if let (Ok(_), Some((dir, targets))) = (&done, RETRY_AFTER.get()) {
        return retry_here(dir, targets);
    }
    done
}

/// A retry asked for in the dashboard after the end (`r`, `R`): run once
/// the sweep has let go of its run directory.
static RETRY_AFTER: std::sync::OnceLock<(PathBuf, Vec<String>)> = std::sync::OnceLock::new();

/// `sweeptop run --resume DIR --retry TARGETS…` in this terminal, in place
/// of this process (its dashboard takes the screen); returns only when it
/// could not be started.
pub fn retry_here(dir: &Path, targets: &[String]) -> Result<u8> {
    use std::os::unix::process::CommandExt;
    if store::sweep::Sweep::open(dir).is_some() {
        // Each shard is its own run: the retry is resumed in its directory.
        super::print(&format!(
            "to retry {t} in a sweep directory, resume the shard that ran it: \
             sweeptop run --resume {d}/{s}/<i> --retry {t}\n",
            t = targets.join(" "),
            d = dir.display(),
            s = store::sweep::SHARDS,
        ))?;
        return Ok(0);
    }
    let exe = std::env::current_exe().context(|| "cannot find this program".into())?;
    let mut argv = vec![
        "run".to_string(),
        "--resume".into(),
        dir.display().to_string(),
        "--retry".into(),
    ];
    argv.extend(targets.iter().cloned());
    eprintln!(
        "retrying: sweeptop {}",
        crate::plan::template::join_words(&argv)
    );
    let err = std::process::Command::new(exe).args(&argv).exec();
    Err(super::Error::Internal(
        color_eyre::eyre::Report::new(err).wrap_err("cannot start the retry"),
    ))
}

/// `--detach`: the sweep in the background, in the run directory it will
/// use (a new one refused here, before the background sweep's log is
/// written into it).
fn detach_sweep(source: &Source, args: &Common) -> Result<u8> {
    let dir = match (source, &args.out) {
        (Source::Resume(d), _) => d.clone(),
        (_, Some(d)) => d.clone(),
        _ => store::default_dir(&new_plan(source)?.name),
    };
    if !matches!(source, Source::Resume(_)) {
        store::check_new_run_dir(&dir).map_err(super::store_error)?;
    }
    detach(&dir)
}

/// Run the sweep with what watches and steers it: the control socket, the
/// commands file, the heartbeat, the signals, and the dashboard (`view`) or
/// line progress.
async fn drive(
    plan: Arc<Plan>,
    run_dir: store::RunDir,
    view: Option<(crate::tui::Setup, ViewState)>,
    opts: Options,
) -> Result<u8> {
    let bus = Bus::new();
    let (tx, rx) = mpsc::channel::<Request>(64);
    // The control socket lets other terminals attach; it also guards the run
    // directory against a second sweep.
    let run_path = run_dir.path.clone();
    let listener = crate::control::bind(&run_path)
        .await
        .context(|| format!("cannot open the control socket in {}", run_path.display()))?;
    let _control = crate::control::serve(
        listener,
        &run_path,
        &plan.name,
        &bus,
        tx.clone(),
        store::read_events(&run_path),
    );
    // Commands appended to commands.jsonl (another machine's `attach`),
    // and a heartbeat that says this sweep is alive to readers elsewhere.
    let _commands_file =
        crate::control::file::follow_commands(&run_path, tx.clone(), bus.events.clone()).await;
    let heartbeat = store::sweep::spawn_heartbeat(run_path.clone(), bus.events.clone());
    let mut dashboard = None;
    if let Some((setup, seed)) = view {
        match crate::tui::Dashboard::start(seed, run_path.clone(), &bus, tx.clone(), setup, false) {
            Ok(d) => dashboard = Some(d),
            Err(e) => eprintln!("(no dashboard: {e}; showing line progress)"),
        }
    }
    spawn_signal_handlers(tx.clone(), dashboard.as_ref().map(|d| d.closer()));
    let printer = dashboard
        .is_none()
        .then(|| tokio::spawn(crate::headless::print(bus.events.subscribe())));
    let outcome = match Engine::new(plan, run_dir, bus.clone(), rx, opts) {
        Ok(engine) => engine.run().await,
        Err(e) => Err(e),
    };
    drop(bus);
    if let Some(p) = printer {
        let _ = tokio::time::timeout(Duration::from_secs(2), p).await;
    }
    if let Some(d) = dashboard {
        dashboard_done(d, &outcome, &run_path).await;
    }
    drop(tx);
    heartbeat.abort();
    match outcome {
        Ok(Outcome::Finished) => Ok(0),
        Ok(Outcome::Interrupted) => Ok(EXIT_INTERRUPTED),
        Err(e) => Err(e.into()),
    }
}

/// After a finished sweep the dashboard stays until the user leaves it;
/// then, unless they detached, one line says where the results are or how
/// to continue.
async fn dashboard_done(
    mut d: crate::tui::Dashboard,
    outcome: &std::result::Result<Outcome, crate::engine::EngineError>,
    run_path: &Path,
) {
    d.engine_done();
    let detached = d.detached.clone();
    let retry = tokio::task::spawn_blocking(move || d.join())
        .await
        .ok()
        .flatten();
    if detached.load(Ordering::SeqCst) {
        return;
    }
    if let Some(targets) = retry {
        // Run once this process has let go of the run (after the runtime).
        let _ = RETRY_AFTER.set((run_path.to_path_buf(), targets));
        return;
    }
    let _ = match outcome {
        Ok(Outcome::Finished) => super::print(&format!(
            "sweep finished; results in {}\n",
            run_path.display()
        )),
        Ok(Outcome::Interrupted) => super::print(&format!(
            "sweep interrupted; continue it with: sweeptop run --resume {}\n",
            run_path.display()
        )),
        Err(_) => Ok(()),
    };
}

/// The plan and the run directory: a new one (at `out`, or the default), or
/// the one being resumed, which must not have a sweep running in it. A new
/// run of one shard runs that shard's part of the plan and records which.
fn open_run(source: &Source, out: Option<&Path>, shard: Option<Shard>) -> Result<(Plan, RunDir)> {
    let plan = new_plan(source)?;
    if let (Some(s), false) = (shard, matches!(source, Source::Resume(_))) {
        let dir = out.map_or_else(|| store::default_dir(&plan.name), Path::to_path_buf);
        let shard = store::sweep::ShardFile {
            index: s.index,
            count: s.count,
        };
        let run = RunDir::create_shard(&dir, &plan.name, &plan.source, shard)
            .map_err(super::store_error)?;
        return Ok((plan.shard(s), run));
    }
    let run = match source {
        Source::Resume(dir) => {
            if crate::control::is_live(dir) {
                return Err(user(format!(
                    "a sweep is still running in {}: attach with `sweeptop attach {}`",
                    dir.display(),
                    dir.display()
                )));
            }
            RunDir::reopen(dir)
        }
        _ => {
            let dir = out.map_or_else(|| store::default_dir(&plan.name), Path::to_path_buf);
            RunDir::create(&dir, &plan.name, &plan.source)
        }
    };
    Ok((plan, run.map_err(super::store_error)?))
}

/// Every signal that would end the process and can be caught (SIGINT, SIGTERM,
/// SIGQUIT, SIGUSR1, SIGALRM, the real-time ones…) stops the sweep the way `q`
/// does: the server group is stopped and what is recorded stays; it also closes
/// a dashboard left showing a finished sweep. SIGHUP (the SSH link dropped) is
/// ignored, so the sweep goes on. SIGPIPE is already ignored (a closed pipe is
/// a write error).
fn spawn_signal_handlers(tx: mpsc::Sender<Request>, dashboard: Option<crate::tui::Closer>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (caught, mut signals) = mpsc::channel::<String>(8);
    let watch = |name: String, number: i32| {
        let Ok(mut stream) = signal(SignalKind::from_raw(number)) else {
            return;
        };
        let caught = caught.clone();
        tokio::spawn(async move {
            while stream.recv().await.is_some() {
                if caught.send(name.clone()).await.is_err() {
                    return;
                }
            }
        });
    };
    for (name, number) in TERMINATING_SIGNALS {
        watch((*name).to_string(), *number);
    }
    for number in nix::libc::SIGRTMIN()..=nix::libc::SIGRTMAX() {
        watch(
            format!("SIGRTMIN+{}", number - nix::libc::SIGRTMIN()),
            number,
        );
    }
    if let Ok(mut hup) = signal(SignalKind::hangup()) {
        tokio::spawn(async move { while hup.recv().await.is_some() {} });
    }
    tokio::spawn(async move {
        while let Some(name) = signals.recv().await {
            if let Some(d) = &dashboard {
                d.close();
            }
            // The engine may be gone already (a finished sweep): then no one listens.
            let _ = tx
                .send(Request {
                    command: Command::Quit,
                    source: format!("signal {name}"),
                })
                .await;
        }
    });
}

/// The signals whose default action ends the process and that a handler may
/// catch (the faults a program raises on itself, SIGSEGV and the like, are
/// not among them; SIGHUP and SIGPIPE have their own treatment).
const TERMINATING_SIGNALS: &[(&str, i32)] = {
    use nix::libc;
    &[
        ("SIGINT", libc::SIGINT),
        ("SIGTERM", libc::SIGTERM),
        ("SIGQUIT", libc::SIGQUIT),
        ("SIGUSR1", libc::SIGUSR1),
        ("SIGUSR2", libc::SIGUSR2),
        ("SIGALRM", libc::SIGALRM),
        ("SIGVTALRM", libc::SIGVTALRM),
        ("SIGPROF", libc::SIGPROF),
        ("SIGXCPU", libc::SIGXCPU),
        ("SIGXFSZ", libc::SIGXFSZ),
        ("SIGIO", libc::SIGIO),
        ("SIGPWR", libc::SIGPWR),
        ("SIGSTKFLT", libc::SIGSTKFLT),
    ]
};

/// `--detach`: start the same sweep in the background in its own session, its
/// output in the run directory, and print how to attach.
fn detach(run_dir: &Path) -> Result<u8> {
    store::make_run_dir(run_dir).map_err(super::store_error)?;
    let log_path = run_dir.join(store::DETACH_LOG);
    // The same command line, minus --detach, headless, into this run directory.
    let mut argv: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--detach")
        .collect();
    if !argv.iter().any(|a| a == "--headless") {
        argv.push("--headless".into());
    }
    if !argv.iter().any(|a| {
        a == "--out" || a.starts_with("--out=") || a == "--resume" || a.starts_with("--resume=")
    }) {
        argv.push("--out".into());
        argv.push(run_dir.display().to_string());
    }
    let exe = std::env::current_exe().context(|| "cannot find this program".into())?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(&argv);
    let mut child = super::spawn_detached(cmd, &log_path, "the background sweep")?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if crate::control::is_live(run_dir) {
            break;
        }
        if let Some(status) = child.try_wait()? {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            eprint!("{text}");
            let message = format!("the background sweep exited at once ({status})");
            // Its own error is above; a mistake of the user's stays exit 2.
            return Err(if status.code() == Some(2) {
                user(message)
            } else {
                super::Error::Internal(color_eyre::eyre::eyre!(message))
            });
        }
        if std::time::Instant::now() > deadline {
            return Err(super::Error::Internal(color_eyre::eyre::eyre!(
                "the background sweep did not open its control socket; see {}",
                log_path.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let dir = run_dir.display();
    let parent = run_dir
        .parent()
        .map_or_else(|| ".".into(), |p| p.display().to_string());
    super::print(&format!(
        "sweep running in the background (pid {}), output in {}\nattach with:  sweeptop attach {dir}\nlist runs:    sweeptop ls {parent}\n",
        child.id(),
        log_path.display()
    ))?;
    Ok(0)
}
