//! What each subcommand does; `main.rs` only parses the command line.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use color_eyre::eyre::{eyre, Result, WrapErr};
use tokio::sync::mpsc;

use crate::engine::{self, Bus, Command, Engine, Options, Outcome, Request};
use crate::export::{self, Format};
use crate::plan::Plan;
use crate::store::{self, RunDir};

/// The bundled demo plan (runs against the simulated server).
pub const DEMO_PLAN: &str = include_str!("../sample_runs/demo.toml");
pub const DEMO_PATH: &str = "sample_runs/demo.toml";

/// Exit code of an interrupted sweep.
pub const EXIT_INTERRUPTED: i32 = 130;

pub struct RunArgs {
    pub plan: Option<PathBuf>,
    pub resume: Option<PathBuf>,
    pub out: Option<PathBuf>,
    pub headless: bool,
    pub detach: bool,
    pub demo: bool,
    pub gpu: GpuArgs,
    pub view: crate::tui::ViewArgs,
}

/// GPU telemetry flags shared by `run`, `demo` and `gpus`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct GpuArgs {
    /// No GPU telemetry at all.
    #[arg(long)]
    pub no_gpu: bool,
    /// Load NVML from this file instead of the system's libnvidia-ml.so.1.
    #[arg(long, value_name = "PATH")]
    pub nvml_lib: Option<PathBuf>,
    /// GPU sampling interval in milliseconds (at least 250).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub gpu_interval_ms: u64,
    /// Simulated GPUs instead of NVML (the demo's default: 8).
    #[arg(long, value_name = "N")]
    pub sim_gpus: Option<u32>,
}

impl GpuArgs {
    pub fn source(&self, demo: bool) -> crate::gpu::GpuSource {
        use crate::gpu::{GpuSource, SimGpus};
        if self.no_gpu {
            GpuSource::Disabled
        } else if let Some(n) = self.sim_gpus {
            GpuSource::Simulated(SimGpus::new(n))
        } else if demo && self.nvml_lib.is_none() {
            GpuSource::Simulated(SimGpus::new(8))
        } else {
            GpuSource::Nvml {
                lib_path: self.nvml_lib.clone(),
            }
        }
    }
}

/// The plan of a new sweep: the demo's, or the file given.
fn new_plan(args: &RunArgs) -> Result<Plan> {
    if args.demo {
        return Plan::parse(Path::new(DEMO_PATH), DEMO_PLAN).map_err(|e| eyre!("{e}"));
    }
    let path = args
        .plan
        .as_ref()
        .ok_or_else(|| eyre!("a plan file is needed (or --resume DIR)"))?;
    Plan::load(path).map_err(|e| eyre!("{e}"))
}

/// `sweeptop run` and `sweeptop demo`. Returns the process exit code.
pub fn run(args: RunArgs) -> Result<i32> {
    if args.detach {
        let dir = match (&args.resume, &args.out) {
            (Some(d), _) | (None, Some(d)) => d.clone(),
            (None, None) => store::default_dir(&new_plan(&args)?.name),
        };
        return detach(&dir);
    }
    let headless = args.headless || !std::io::stdout().is_terminal();
    // The dashboard's settings come first: a bad keys or theme file is an error
    // before anything starts.
    let setup = if headless {
        None
    } else {
        match args.view.setup(!args.gpu.no_gpu) {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(2);
            }
        }
    };
    let (plan, run_dir) = if let Some(dir) = &args.resume {
        if crate::control::is_live(dir) {
            return Err(eyre!(
                "a sweep is still running in {}: attach with `sweeptop attach {}`",
                dir.display(),
                dir.display()
            ));
        }
        let plan = Plan::load(&dir.join(store::PLAN)).map_err(|e| eyre!("{e}"))?;
        let run = RunDir::reopen(dir).map_err(|e| eyre!("{e}"))?;
        (plan, run)
    } else {
        let plan = match new_plan(&args) {
            Ok(p) => p,
            // A bad plan is the user's to fix, not a crash: the located error
            // and exit 2, as `check` gives.
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(2);
            }
        };
        let dir = args
            .out
            .clone()
            .unwrap_or_else(|| store::default_dir(&plan.name));
        let run = RunDir::create(&dir, &plan.name, &plan.source).map_err(|e| eyre!("{e}"))?;
        (plan, run)
    };
    let plan = Arc::new(plan);
    // A resumed run shows what is already recorded.
    let seed = match &args.resume {
        Some(dir) => crate::tui::load_run(dir).unwrap_or_default(),
        None => crate::tui::state::ViewState::default(),
    };
    let seed = crate::tui::state::ViewState {
        plan: Some(plan.clone()),
        plan_name: plan.name.clone(),
        total_configs: plan.configs.len(),
        total_cells: plan.cells.len(),
        ..seed
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .wrap_err("cannot start the async runtime")?;
    rt.block_on(async move {
        let bus = Bus::new();
        let (tx, rx) = mpsc::channel::<Request>(64);
        // The control socket lets other terminals attach; it also guards the run
        // directory against a second sweep.
        let run_path = run_dir.path.clone();
        let listener = crate::control::bind(&run_path).await.wrap_err_with(|| {
            format!("cannot open the control socket in {}", run_path.display())
        })?;
        let _control = crate::control::serve(
            listener,
            &run_path,
            &plan.name,
            &bus,
            tx.clone(),
            store::read_events(&run_path),
        );
        let mut dashboard = None;
        if let Some(setup) = setup {
            match crate::tui::Dashboard::start(
                seed,
                run_path.clone(),
                &bus,
                tx.clone(),
                setup,
                false,
            ) {
                Ok(d) => dashboard = Some(d),
                Err(e) => eprintln!("(no dashboard: {e}; showing line progress)"),
            }
        }
        let printer = dashboard
            .is_none()
            .then(|| tokio::spawn(crate::headless::print(bus.events.subscribe())));
        spawn_signal_handlers(tx.clone());
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("sweeptop"));
        let engine = Engine::new(
            plan,
            run_dir,
            bus.clone(),
            rx,
            Options {
                sweeptop_exe: exe,
                gpu: args.gpu.source(args.demo),
                gpu_interval: std::time::Duration::from_millis(args.gpu.gpu_interval_ms),
            },
        );
        let outcome = match engine {
            Ok(engine) => engine.run().await.map_err(|e| eyre!(e)),
            Err(e) => Err(eyre!(e)),
        };
        drop(bus);
        if let Some(p) = printer {
            let _ = tokio::time::timeout(std::time::Duration::from_secs(2), p).await;
        }
        if let Some(mut d) = dashboard {
            // After a finished sweep the dashboard stays until the user leaves it.
            d.engine_done();
            let detached = d.detached.clone();
            let _ = tokio::task::spawn_blocking(move || d.join()).await;
            if !detached.load(std::sync::atomic::Ordering::SeqCst) {
                let mut out = std::io::stdout().lock();
                let _ = match &outcome {
                    Ok(Outcome::Finished) => {
                        writeln!(out, "sweep finished; results in {}", run_path.display())
                    }
                    Ok(Outcome::Interrupted) => writeln!(
                        out,
                        "sweep interrupted; continue it with: sweeptop run --resume {}",
                        run_path.display()
                    ),
                    Err(_) => Ok(()),
                };
            }
        }
        drop(tx);
        match outcome {
            Ok(Outcome::Finished) => Ok(0),
            Ok(Outcome::Interrupted) => Ok(EXIT_INTERRUPTED),
            Err(e) => Err(e),
        }
    })
}

/// `sweeptop open DIR`: the dashboard over a recorded run (read-only); without
/// a terminal, the grid as Markdown.
pub fn open(dir: &Path, view: &crate::tui::ViewArgs) -> Result<i32> {
    if !std::io::stdout().is_terminal() {
        let view = match crate::tui::load_run(dir) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(2);
            }
        };
        let records: Vec<_> = view.records.values().cloned().collect();
        let text = export::render(Format::Md, view.plan.as_deref(), &records);
        let _ = std::io::stdout().lock().write_all(text.as_bytes());
        return Ok(0);
    }
    match crate::tui::open(dir, view) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("error: {e}");
            Ok(2)
        }
    }
}

/// SIGINT and SIGTERM stop the sweep (the server group is stopped, what is
/// recorded stays); SIGHUP (the SSH link dropped) is ignored so the sweep goes on.
fn spawn_signal_handlers(tx: mpsc::Sender<Request>) {
    use tokio::signal::unix::{signal, SignalKind};
    tokio::spawn(async move {
        let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) else {
            return;
        };
        loop {
            let name = tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
                _ = hup.recv() => { continue; }
            };
            let _ = tx
                .send(Request {
                    command: Command::Quit,
                    source: format!("signal {name}"),
                })
                .await;
        }
    });
}

/// `sweeptop check PLAN [--json]`.
pub fn check(path: &Path, json: bool) -> Result<i32> {
    let plan = match Plan::load(path) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(2);
        }
    };
    let mut out = std::io::stdout().lock();
    if json {
        let v = serde_json::json!({
            "name": plan.name,
            "configs": plan.configs,
            "cells": plan.cells,
            "phases": plan.phases,
            "workloads": plan.workloads,
            "limits": plan.limits,
            "count": {"configs": plan.configs.len(), "cells": plan.cells.len()},
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
    } else {
        write!(out, "{}", crate::plan::describe(&plan))?;
    }
    Ok(0)
}

/// `sweeptop export DIR --format F [-o FILE]`.
pub fn export(dir: &Path, format: Format, output: Option<&Path>) -> Result<i32> {
    let results = store::read_results(dir).map_err(|e| eyre!("{e}"))?;
    for p in &results.problems {
        eprintln!("warning: {p}");
    }
    if !dir.join(store::RESULTS).exists() {
        return Err(eyre!("{} has no {}", dir.display(), store::RESULTS));
    }
    let plan = Plan::load(&dir.join(store::PLAN)).ok();
    let text = export::render(format, plan.as_ref(), &results.records);
    match output {
        Some(p) => {
            std::fs::write(p, text).wrap_err_with(|| format!("cannot write {}", p.display()))?
        }
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    Ok(0)
}

/// `sweeptop classify [FILE|-] [--json]`.
pub fn classify(input: Option<&Path>, json: bool) -> Result<i32> {
    let mut bytes = Vec::new();
    match input {
        Some(p) if p != Path::new("-") => {
            bytes = std::fs::read(p).wrap_err_with(|| format!("cannot read {}", p.display()))?;
        }
        _ => {
            std::io::stdin().read_to_end(&mut bytes)?;
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let c = crate::detect::classify_text(&text);
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&c)?)?;
    } else {
        writeln!(out, "{}", c.kind.map(|k| k.as_str()).unwrap_or("none"))?;
    }
    Ok(0)
}

/// `sweeptop gpus [--json] [--watch]`: what NVML reports, for checking a machine.
pub fn gpus(args: &GpuArgs, json: bool, watch: bool) -> Result<i32> {
    let source = args.source(false);
    let no_ours = |_pid: u32| false;
    let interval = std::time::Duration::from_millis(args.gpu_interval_ms.max(250));
    let show = |snap: &crate::gpu::GpuSnapshot| -> Result<()> {
        let mut out = std::io::stdout().lock();
        if json {
            writeln!(out, "{}", serde_json::to_string(snap)?)?;
        } else {
            write!(out, "{}", crate::gpu::render_table(snap))?;
            if watch {
                writeln!(out)?;
            }
        }
        out.flush()?;
        Ok(())
    };
    if !watch {
        show(&crate::gpu::sample_once(&source, &no_ours))?;
        return Ok(0);
    }
    // Repeating: the sampler thread keeps one NVML handle open.
    let (tx, rx) = std::sync::mpsc::channel();
    let _sampler = crate::gpu::spawn_sampler(
        source,
        interval,
        Arc::new(no_ours),
        Box::new(move |snap| tx.send(snap).is_ok()),
    );
    while let Ok(snap) = rx.recv() {
        if show(&snap).is_err() {
            break;
        }
    }
    Ok(0)
}

/// `sweeptop sim-server`.
pub fn sim_server(args: sweeptop_sim::SimArgs) -> Result<i32> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .wrap_err("cannot start the async runtime")?;
    rt.block_on(sweeptop_sim::serve(args))
        .wrap_err("simulated server")?;
    Ok(0)
}

pub use engine::Command as EngineCommand;

/// `sweeptop loadtest URL`: one cell against a server that is already running.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadtestArgs {
    /// Base URL of the server, e.g. http://127.0.0.1:30000
    pub url: String,
    /// The `model` field (default: the first model the server lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Requests in flight (closed loop), or the cap with --rate.
    #[arg(long, default_value_t = 1)]
    pub concurrency: u32,
    /// Open loop: Poisson arrivals at this many requests/s.
    #[arg(long)]
    pub rate: Option<f64>,
    #[arg(long, default_value_t = 16)]
    pub requests: u32,
    /// Stop after this many seconds even if requests remain.
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,
    #[arg(long, default_value_t = 128)]
    pub max_tokens: u32,
    /// Prompt length in tokens (measured with the server's /tokenize).
    #[arg(long, default_value_t = 256)]
    pub prompt_tokens: u64,
    #[arg(long, default_value_t = 0)]
    pub warmup: u32,
    /// A tokenizer.json to measure the prompt with if the server has no /tokenize.
    #[arg(long, value_name = "PATH")]
    pub tokenizer: Option<PathBuf>,
    /// Use /v1/chat/completions instead of /v1/completions.
    #[arg(long)]
    pub chat: bool,
    #[arg(long)]
    pub json: bool,
    /// Also write every request's raw timeline here (JSON lines, gzipped to
    /// PATH.gz when over 1 MiB), as a sweep does under `requests/`.
    #[arg(long, value_name = "PATH")]
    pub records: Option<PathBuf>,
    #[arg(long, default_value_t = 600.0)]
    pub request_timeout: f64,
}

pub fn loadtest(args: LoadtestArgs) -> Result<i32> {
    use crate::load::{self, Arrival, CellLoad, Target};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .wrap_err("cannot start the async runtime")?;
    rt.block_on(async move {
        let base = args.url.trim_end_matches('/').to_string();
        let pool = match load::Pool::new(&base) {
            Ok(p) => Arc::new(p),
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(2);
            }
        };
        let probe = load::http_client();
        let (listed, limit) = load::server_model(&probe, &base).await;
        let model = args
            .model
            .clone()
            .or(listed)
            .unwrap_or_else(|| "default".into());
        let target = Target {
            base,
            api: if args.chat {
                crate::plan::Api::Chat
            } else {
                crate::plan::Api::Completions
            },
            model,
        };
        let instruction = load::prompt::builtin("code").unwrap_or_default();
        let (measure, notice) =
            load::tokenizer::Measure::choose(&probe, &target, args.tokenizer.as_deref()).await;
        if let Some(n) = notice {
            eprintln!("warning: {n}");
        }
        let (body, measured, error) = measure.fit(instruction, args.prompt_tokens).await;
        if let Some(e) = error {
            eprintln!("warning: {e}; the prompt length is estimated");
        }
        let cell = CellLoad {
            arrival: match args.rate {
                Some(rate) => Arrival::Poisson { rate, capped: true },
                None => Arrival::Closed,
            },
            concurrency: args.concurrency.max(1),
            requests: args.requests,
            duration: args.duration.map(std::time::Duration::from_secs_f64),
            warmup: args.warmup,
            max_tokens: args.max_tokens,
            prompts: Arc::new(vec![body]),
            request_timeout: std::time::Duration::from_secs_f64(args.request_timeout),
            stall_timeout: std::time::Duration::from_secs_f64(args.request_timeout),
        };
        let seq = std::sync::atomic::AtomicU64::new(0);
        let mut writer = match &args.records {
            Some(p) => Some(crate::store::RequestsWriter::create(p.clone())?),
            None => None,
        };
        let mut sink = |r: &load::RequestRecord| {
            if let Some(w) = writer.as_mut() {
                w.write(r);
            }
        };
        let run = load::run_cell(&pool, &target, &cell, &seq, &mut sink).await;
        if let Some(w) = writer.take() {
            let p = w.finish()?;
            eprintln!("request records: {}", p.display());
        }
        let metrics = run.stats.metrics(run.wall_ns);
        let errors: Vec<String> = run
            .stats
            .errors
            .iter()
            .map(|e| crate::detect::request_failure(e).message)
            .take(5)
            .collect();
        let mut out = std::io::stdout().lock();
        if args.json {
            let mut v = serde_json::to_value(&metrics)?;
            v["prompt_tokens_target"] = args.prompt_tokens.into();
            v["prompt_tokens_measured"] = measured.into();
            v["context_limit"] = limit.into();
            v["errors"] = errors.into();
            writeln!(out, "{}", serde_json::to_string_pretty(&v)?)?;
        } else {
            let o = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "n/a".into());
            writeln!(
                out,
                "{} {} model {}",
                target.url(),
                if args.chat { "(chat)" } else { "" },
                target.model
            )?;
            writeln!(
                out,
                "requests      {} ({} failed, {} short)",
                metrics.requests, metrics.failed_requests, metrics.short_requests
            )?;
            writeln!(
                out,
                "output tokens {}{}",
                metrics.output_tokens,
                if metrics.tokens_estimated {
                    " (estimated)"
                } else {
                    ""
                }
            )?;
            writeln!(out, "duration      {:.2} s", metrics.duration_s)?;
            writeln!(
                out,
                "output tok/s  {:.2}   requests/s {:.2}",
                metrics.output_tok_s, metrics.request_per_s
            )?;
            writeln!(
                out,
                "decode tok/s  p50 {}   mean {}",
                o(metrics.decode_tok_s_p50),
                o(metrics.decode_tok_s_mean)
            )?;
            writeln!(
                out,
                "TTFT ms       p50 {:.2}   p90 {:.2}   p99 {:.2}   mean {:.2}",
                metrics.ttft_ms_p50, metrics.ttft_ms_p90, metrics.ttft_ms_p99, metrics.ttft_ms_mean
            )?;
            writeln!(
                out,
                "ITL ms        p50 {}   p90 {}   p99 {}   mean {}",
                o(metrics.itl_ms_p50),
                o(metrics.itl_ms_p90),
                o(metrics.itl_ms_p99),
                o(metrics.itl_ms_mean)
            )?;
            writeln!(out, "TPOT ms       p50 {}", o(metrics.tpot_ms_p50))?;
            writeln!(
                out,
                "E2E ms        p50 {:.2}   p99 {:.2}",
                metrics.e2e_ms_p50, metrics.e2e_ms_p99
            )?;
            writeln!(
                out,
                "prompt tokens {:.1} mean (target {}, measured {measured})",
                metrics.prompt_tokens_mean, args.prompt_tokens
            )?;
            for e in &errors {
                writeln!(out, "error: {e}")?;
            }
        }
        Ok(
            if metrics.failed_requests == 0 && metrics.output_tokens > 0 {
                0
            } else {
                1
            },
        )
    })
}

/// `--detach`: start the same sweep in the background in its own session, its
/// output in the run directory, and print how to attach. Returns the exit code.
pub fn detach(run_dir: &Path) -> Result<i32> {
    use std::os::unix::process::CommandExt;
    std::fs::create_dir_all(run_dir)
        .wrap_err_with(|| format!("cannot create {}", run_dir.display()))?;
    let log_path = run_dir.join("sweeptop.log");
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(&log_path)
        .wrap_err_with(|| format!("cannot open {}", log_path.display()))?;
    // The same command line, minus --detach, headless, into this run directory.
    let mut argv: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--detach")
        .collect();
    if !argv.iter().any(|a| a == "--headless") {
        argv.push("--headless".into());
    }
    if !argv
        .iter()
        .any(|a| a == "--out" || a.starts_with("--out=") || a == "--resume")
    {
        argv.push("--out".into());
        argv.push(run_dir.display().to_string());
    }
    let exe = std::env::current_exe().wrap_err("cannot find this program")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.args(&argv)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: setsid is async-signal-safe; it detaches from our terminal so a
    // closed SSH session (SIGHUP to its process group) does not reach the sweep.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = cmd.spawn().wrap_err("cannot start the background sweep")?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if crate::control::is_live(run_dir) {
            break;
        }
        if let Some(status) = child.try_wait()? {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            eprint!("{text}");
            return Err(eyre!("the background sweep exited at once ({status})"));
        }
        if std::time::Instant::now() > deadline {
            return Err(eyre!(
                "the background sweep did not open its control socket; see {}",
                log_path.display()
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let dir = run_dir.display();
    println!(
        "sweep running in the background (pid {}), output in {}",
        child.id(),
        log_path.display()
    );
    println!("attach with:  sweeptop attach {dir}");
    println!(
        "list runs:    sweeptop ls {}",
        run_dir
            .parent()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| ".".into())
    );
    Ok(0)
}

/// One run directory as `sweeptop ls` sees it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunInfo {
    pub dir: PathBuf,
    pub plan: String,
    /// running, finished or interrupted.
    pub state: String,
    pub started_at: String,
    pub done: usize,
    pub total: Option<usize>,
    pub failed: usize,
    pub command: String,
}

pub fn run_info(dir: &Path) -> Option<RunInfo> {
    let meta = store::read_meta(dir).ok()?;
    let results = store::read_results(dir).ok().unwrap_or_default();
    let total = Plan::load(&dir.join(store::PLAN))
        .ok()
        .map(|p| p.cells.len());
    let live = crate::control::is_live(dir);
    let state = if live {
        "running".to_string()
    } else if meta.state == "running" {
        // Recorded as running but nothing answers: it was killed.
        "interrupted".to_string()
    } else {
        meta.state.clone()
    };
    let command = match state.as_str() {
        "running" => format!("sweeptop attach {}", dir.display()),
        "finished" => format!("sweeptop export {} --format md", dir.display()),
        _ => format!("sweeptop run --resume {}", dir.display()),
    };
    Some(RunInfo {
        dir: dir.to_path_buf(),
        plan: meta.plan,
        state,
        started_at: meta.started_at,
        done: results.records.len(),
        total,
        failed: results
            .records
            .iter()
            .filter(|r| r.status == store::Status::Failed)
            .count(),
        command,
    })
}

/// Run directories under `root`, newest first.
pub fn list_runs(root: &Path) -> Vec<RunInfo> {
    let mut runs: Vec<RunInfo> = std::fs::read_dir(root)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| run_info(&e.path()))
                .collect()
        })
        .unwrap_or_default();
    runs.sort_by(|a, b| b.started_at.cmp(&a.started_at));
    runs
}

/// `sweeptop ls [DIR] [--json]`.
pub fn ls(root: &Path, json: bool) -> Result<i32> {
    let runs = list_runs(root);
    let mut out = std::io::stdout().lock();
    if json {
        writeln!(out, "{}", serde_json::to_string_pretty(&runs)?)?;
        return Ok(0);
    }
    if runs.is_empty() {
        writeln!(out, "no runs under {}", root.display())?;
        return Ok(0);
    }
    for r in &runs {
        let total = r.total.map(|t| t.to_string()).unwrap_or_else(|| "?".into());
        writeln!(
            out,
            "{:<12} {:<24} {:>5}/{:<5} cells  {:>3} failed  {}\n             {}",
            r.state,
            r.plan,
            r.done,
            total,
            r.failed,
            r.dir.display(),
            r.command
        )?;
    }
    Ok(0)
}

/// The run to attach to: the given directory, or the newest running one under ./runs.
pub fn attach_target(dir: Option<&Path>) -> Result<PathBuf> {
    match dir {
        Some(d) => Ok(d.to_path_buf()),
        None => list_runs(Path::new("runs"))
            .into_iter()
            .find(|r| r.state == "running")
            .map(|r| r.dir)
            .ok_or_else(|| eyre!("no running sweep under ./runs (see `sweeptop ls`)")),
    }
}

/// A command as typed on the command line.
pub fn parse_command(s: &str) -> Result<Command> {
    Ok(match s {
        "pause" => Command::Pause,
        "resume" => Command::Resume,
        "toggle-pause" => Command::TogglePause,
        "skip-config" => Command::SkipConfig,
        "skip-cell" => Command::SkipCell,
        "quit" => Command::Quit,
        other => {
            if let Some(t) = other.strip_prefix("retry=") {
                Command::Retry {
                    target: t.to_string(),
                }
            } else if let Some(c) = other.strip_prefix("exclude=") {
                Command::Exclude {
                    config: c.to_string(),
                }
            } else {
                return Err(eyre!(
                    "unknown command `{other}`: pause, resume, toggle-pause, skip-config, skip-cell, quit, retry=CELL|CONFIG, exclude=CONFIG"
                ));
            }
        }
    })
}

/// `sweeptop attach DIR --send CMD` / `--headless`: steer or follow a running
/// sweep without the dashboard.
pub fn attach_lines(dir: &Path, send: Option<Command>) -> Result<i32> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let mut conn = crate::control::Connection::connect(dir)
            .await
            .wrap_err_with(|| {
                format!("no sweep answers in {} (see `sweeptop ls`)", dir.display())
            })?;
        if let Some(cmd) = send {
            conn.send(cmd).await?;
            return Ok(0);
        }
        let mut live = false;
        let mut out = std::io::stdout();
        while let Some(msg) = conn.messages.recv().await {
            match msg {
                crate::control::ServerMsg::Live => live = true,
                crate::control::ServerMsg::Resync => live = false,
                crate::control::ServerMsg::Refused { reason } => return Err(eyre!(reason)),
                crate::control::ServerMsg::Event { event } if live => {
                    if let Some(l) = crate::headless::line(&event) {
                        let _ = writeln!(out, "{l}");
                    }
                    if matches!(
                        event,
                        crate::event::Event::SweepFinished { .. }
                            | crate::event::Event::SweepInterrupted { .. }
                    ) {
                        break;
                    }
                }
                _ => {}
            }
        }
        Ok(0)
    })
}
