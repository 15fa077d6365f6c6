//! The command line: one file per subcommand behind [`Cmd`], the flags they
//! share, and the one place errors become what the user sees.
//!
//! A mistake of the user's (a bad plan, a directory that is not a run, an
//! unknown `--send` command) is an [`Error::User`]: one plain line on stderr,
//! `error: …`, saying what to do next where there is something to do, and
//! exit 2. Anything else is an [`Error::Internal`] with its whole cause chain,
//! exit 1; a backtrace only with `-v` or `RUST_BACKTRACE=1`. Output cut short
//! by a closed pipe (`… | head`) ends quietly.

mod attach;
mod check;
mod classify;
mod compare;
mod export;
mod gpus;
mod loadtest;
mod ls;
mod open;
mod report;
mod resume;
mod run;
mod sim_server;
mod slurm;

use crate::model::text::display_lines;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use color_eyre::eyre;

/// Drive benchmark sweeps of LLM inference servers and watch them live.
#[derive(Parser, Debug)]
#[command(name = "sweeptop", version, about)]
pub struct Cli {
    /// Internal errors with their backtrace (also RUST_BACKTRACE=1).
    #[arg(short, long, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Cmd,
}

#[derive(Subcommand, Debug)]
pub enum Cmd {
    /// Run a sweep from a plan file (or continue one with --resume DIR).
    Run(run::RunArgs),
    /// After a reboot: resume every unfinished run under a folder (--all),
    /// re-running the prepare steps they need; or print the systemd unit or
    /// crontab line that does it at every boot.
    Resume(resume::ResumeArgs),
    /// Spread a sweep over a Slurm cluster (a job array, one shard per task),
    /// or submit again the shards of one with cells left (--resume SWEEP_DIR).
    Slurm(slurm::SlurmArgs),
    /// Run the bundled demo sweep against the simulated server (no GPU needed).
    Demo(run::DemoArgs),
    /// Show a finished or interrupted run in the dashboard (read-only).
    Open(open::OpenArgs),
    /// Show what NVML reports about this machine's GPUs.
    Gpus(gpus::GpusArgs),
    /// List run directories with their state and the command to attach or resume.
    Ls(ls::LsArgs),
    /// Watch and steer a running sweep (default: the newest running one under ./runs).
    Attach(attach::AttachArgs),
    /// Validate a plan and print its expanded matrix.
    Check(check::CheckArgs),
    /// Export a run's results grid.
    Export(export::ExportArgs),
    /// Put the same cells of several runs side by side, with their changes.
    Compare(compare::CompareArgs),
    /// One self-contained HTML report of one or more runs (charts, failures).
    Report(report::ReportArgs),
    /// Print the failure kind found in a log excerpt or HTTP error body.
    Classify(classify::ClassifyArgs),
    /// Measure one cell against a server that is already running.
    Loadtest(loadtest::LoadtestArgs),
    /// The simulated inference server used by the demo and the tests.
    SimServer(sweeptop_sim::SimArgs),
}

/// Run a parsed command line; the process's exit code.
pub fn run(cli: Cli) -> ExitCode {
    let verbose = cli.verbose || std::env::var_os("RUST_BACKTRACE").is_some_and(|v| v != "0");
    if verbose {
        // Colours only for a terminal.
        let theme = if io::stderr().is_terminal() {
            color_eyre::config::Theme::dark()
        } else {
            color_eyre::config::Theme::new()
        };
        let _ = color_eyre::config::HookBuilder::default()
            .theme(theme)
            .install();
    }
    let result = match cli.command {
        Cmd::Run(args) => run::run(args),
        Cmd::Demo(args) => run::demo(args),
        Cmd::Resume(args) => resume::resume(args),
        Cmd::Slurm(args) => slurm::slurm(args),
        Cmd::Open(args) => open::open(args),
        Cmd::Gpus(args) => gpus::gpus(args),
        Cmd::Ls(args) => ls::ls(args),
        Cmd::Attach(args) => attach::attach(args),
        Cmd::Check(args) => check::check(args),
        Cmd::Export(args) => export::export(args),
        Cmd::Compare(args) => compare::compare(args),
        Cmd::Report(args) => report::report(args),
        Cmd::Classify(args) => classify::classify(args),
        Cmd::Loadtest(args) => loadtest::loadtest(args),
        Cmd::SimServer(args) => sim_server::sim_server(args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => e.report(verbose),
    }
}

/// How a subcommand fails.
#[derive(Debug)]
pub enum Error {
    /// The user's to fix: one line, exit 2.
    User(String),
    /// Anything else, with its cause chain: exit 1.
    Internal(eyre::Report),
    /// Standard output's reader went away (`… | head`): nothing to say.
    StdoutClosed,
}

pub type Result<T> = std::result::Result<T, Error>;

/// A mistake of the user's, in a sentence that says what to do about it.
pub fn user(message: impl std::fmt::Display) -> Error {
    Error::User(message.to_string())
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for Error {
    fn from(e: E) -> Error {
        Error::Internal(eyre::Report::new(e))
    }
}

/// A run directory's trouble: a directory that is not what was expected is the
/// user's to fix; a failing disk is not.
pub fn store_error(e: crate::store::StoreError) -> Error {
    match e {
        crate::store::StoreError::Invalid(problem) => user(problem),
        io => Error::Internal(eyre::Report::new(io)),
    }
}

/// A finished or running run's plan (when its copy reads) and the latest
/// record of each of the plan's cells, for the commands that read runs
/// (`export`, `compare`, `report`); what could not be read is a warning on
/// stderr, a directory that is no run is the user's mistake.
pub fn read_run(
    dir: &std::path::Path,
) -> Result<(
    Option<std::sync::Arc<crate::plan::Plan>>,
    crate::store::Results,
)> {
    use crate::store;
    if !dir.join(store::RESULTS).exists() && store::sweep::Sweep::open(dir).is_none() {
        return Err(user(format!(
            "{} has no {}: is it a run directory? (see `sweeptop ls`)",
            dir.display(),
            store::RESULTS
        )));
    }
    let mut results = store::read_results(dir).map_err(store_error)?;
    let plan = crate::view::replay::plan_of_run(dir)
        .ok()
        .map(std::sync::Arc::new);
    if let Some(plan) = &plan {
        results.only_cells(plan.cells.iter().map(|c| c.id.as_str()));
    }
    for p in &results.problems {
        eprintln!("warning: {}: {p}", dir.display());
    }
    Ok((plan, results))
}

/// Context for an internal error: what was being done when it happened.
pub trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: std::error::Error + Send + Sync + 'static> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| Error::Internal(eyre::Report::new(e).wrap_err(what())))
    }
}

impl Error {
    fn report(self, verbose: bool) -> ExitCode {
        let mut err = io::stderr().lock();
        match self {
            Error::User(message) => {
                let _ = writeln!(err, "error: {}", display_lines(&message));
                ExitCode::from(2)
            }
            Error::StdoutClosed => ExitCode::SUCCESS,
            Error::Internal(report) if verbose => {
                let _ = writeln!(err, "error: {}", display_lines(&format!("{report:?}")));
                ExitCode::from(1)
            }
            Error::Internal(report) => {
                let _ = writeln!(err, "error: {}", display_lines(&report.to_string()));
                let mut said = report.to_string();
                for cause in report.chain().skip(1) {
                    let cause = cause.to_string();
                    // A message that already ends with its cause says it once.
                    if !said.ends_with(&cause) {
                        let _ = writeln!(err, "  caused by: {}", display_lines(&cause));
                    }
                    said = cause;
                }
                ExitCode::from(1)
            }
        }
    }
}

/// Write `text` to stdout. Its reader having gone away is
/// [`Error::StdoutClosed`], which ends quietly; any other failure is an error.
pub fn print(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| match e.kind() {
            io::ErrorKind::BrokenPipe => Error::StdoutClosed,
            _ => Error::Internal(eyre::Report::new(e).wrap_err("cannot write to standard output")),
        })
}

/// Start `cmd` in the background in a session of its own (a closed SSH
/// session's SIGHUP does not reach it), stdin closed, its output appended to
/// `log`.
fn spawn_detached(
    mut cmd: std::process::Command,
    log: &std::path::Path,
    what: &str,
) -> Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let file = std::fs::File::options()
        .create(true)
        .append(true)
        .open(log)
        .context(|| format!("cannot open {}", log.display()))?;
    cmd.stdin(std::process::Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    // SAFETY: the closure only calls setsid, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()?;
            Ok(())
        });
    }
    cmd.spawn().context(|| format!("cannot start {what}"))
}

/// A multi-threaded runtime with `workers` threads.
fn runtime(workers: usize) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .context(|| "cannot start the async runtime".into())
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
    /// GPU sampling interval in milliseconds, 250 to 60000.
    #[arg(long, value_name = "MS", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(250..=60_000))]
    pub gpu_interval_ms: u64,
    /// Simulated GPUs instead of NVML, 1 to 64 (the demo's default: 8).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
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

/// How the dashboard looks: `--theme`, `--ascii`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ViewArgs {
    /// Dashboard theme: dark, light, high-contrast, mono, a theme in
    /// ~/.config/sweeptop/themes/, or a path to a theme file.
    #[arg(long, value_name = "NAME|PATH")]
    pub theme: Option<String>,
    /// ASCII characters only (automatic when the locale is not UTF-8).
    #[arg(long)]
    pub ascii: bool,
    /// Mouse: a click selects a cell or a pane, the wheel scrolls (off by
    /// default, so the terminal's own text selection keeps working).
    #[arg(long)]
    pub mouse: bool,
}

impl ViewArgs {
    /// The dashboard's settings; a bad keys or theme file is the user's to fix.
    fn setup(&self, show_gpu: bool) -> Result<crate::tui::Setup> {
        crate::tui::Setup::load(self.theme.as_deref(), self.ascii, self.mouse, show_gpu)
            .map_err(|e| user(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_valid() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn every_subcommand_describes_every_argument() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "sweeptop", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:?}");
    }

    #[test]
    fn the_send_commands_are_listed_alike_everywhere() {
        let forms = crate::model::COMMAND_FORMS;
        let readme = include_str!("../../README.md");
        assert!(readme.contains(forms), "README does not list: {forms}");
        use clap::CommandFactory;
        let cli = Cli::command();
        let attach = cli.find_subcommand("attach").unwrap();
        let send = attach
            .get_arguments()
            .find(|a| a.get_id() == "send")
            .unwrap();
        assert!(send.get_help().unwrap().to_string().contains(forms));
        assert!("jump"
            .parse::<crate::model::Command>()
            .unwrap_err()
            .to_string()
            .contains(forms));
    }
}
