use std::path::PathBuf;

use clap::{Parser, Subcommand};
use sweeptop::commands;

/// Drive benchmark sweeps of LLM inference servers and watch them live.
#[derive(Parser)]
#[command(name = "sweeptop", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a sweep from a plan file (or continue one with --resume DIR).
    Run {
        /// The plan file (TOML).
        #[arg(required_unless_present = "resume", conflicts_with = "resume")]
        plan: Option<PathBuf>,
        /// Continue the sweep recorded in this run directory.
        #[arg(long, value_name = "DIR")]
        resume: Option<PathBuf>,
        /// Run directory (default runs/<plan>-<UTC timestamp>).
        #[arg(long, value_name = "DIR", conflicts_with = "resume")]
        out: Option<PathBuf>,
        /// Print line progress instead of the dashboard.
        #[arg(long)]
        headless: bool,
        /// Run in the background (its own session); attach with `sweeptop attach`.
        #[arg(long)]
        detach: bool,
        #[command(flatten)]
        gpu: commands::GpuArgs,
        #[command(flatten)]
        view: sweeptop::tui::ViewArgs,
    },
    /// Run the bundled demo sweep against the simulated server (no GPU needed).
    Demo {
        #[arg(long)]
        headless: bool,
        #[arg(long)]
        detach: bool,
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        #[command(flatten)]
        gpu: commands::GpuArgs,
        #[command(flatten)]
        view: sweeptop::tui::ViewArgs,
    },
    /// Show a finished or interrupted run in the dashboard (read-only).
    Open {
        /// The run directory.
        dir: PathBuf,
        #[command(flatten)]
        view: sweeptop::tui::ViewArgs,
    },
    /// Show what NVML reports about this machine's GPUs.
    Gpus {
        #[arg(long)]
        json: bool,
        /// Repeat every --gpu-interval-ms until interrupted.
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        gpu: commands::GpuArgs,
    },
    /// List run directories with their state and the command to attach or resume.
    Ls {
        /// Where runs are (default ./runs).
        #[arg(default_value = "runs")]
        dir: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Watch and steer a running sweep (default: the newest running one under ./runs).
    Attach {
        dir: Option<PathBuf>,
        /// Print line progress instead of the dashboard.
        #[arg(long)]
        headless: bool,
        /// Send one command (pause, resume, skip-config, skip-cell, quit) and exit.
        #[arg(long, value_name = "COMMAND")]
        send: Option<String>,
        #[command(flatten)]
        view: sweeptop::tui::ViewArgs,
    },
    /// Validate a plan and print its expanded matrix.
    Check {
        plan: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Export a run's results grid.
    Export {
        dir: PathBuf,
        #[arg(long, value_enum)]
        format: sweeptop::export::Format,
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Print the failure kind found in a log excerpt or HTTP error body.
    Classify {
        /// A file, or - for standard input (the default).
        input: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Measure one cell against a server that is already running.
    Loadtest(commands::LoadtestArgs),
    /// The simulated inference server used by the demo and the tests.
    SimServer(sweeptop_sim::SimArgs),
}

fn main() -> color_eyre::Result<()> {
    color_eyre::install()?;
    let cli = Cli::parse();
    let code = match cli.command {
        Cmd::Run {
            plan,
            resume,
            out,
            headless,
            detach,
            gpu,
            view,
        } => commands::run(commands::RunArgs {
            plan,
            resume,
            out,
            headless,
            detach,
            demo: false,
            gpu,
            view,
        })?,
        Cmd::Demo {
            headless,
            detach,
            out,
            gpu,
            view,
        } => commands::run(commands::RunArgs {
            plan: None,
            resume: None,
            out,
            headless,
            detach,
            demo: true,
            gpu,
            view,
        })?,
        Cmd::Open { dir, view } => commands::open(&dir, &view)?,
        Cmd::Ls { dir, json } => commands::ls(&dir, json)?,
        Cmd::Attach {
            dir,
            headless,
            send,
            view,
        } => {
            let dir = commands::attach_target(dir.as_deref())?;
            let send = send.map(|s| commands::parse_command(&s)).transpose()?;
            use std::io::IsTerminal;
            if send.is_some() || headless || !std::io::stdout().is_terminal() {
                commands::attach_lines(&dir, send)?
            } else {
                sweeptop::tui::attach(&dir, &view).map_err(|e| color_eyre::eyre::eyre!(e))?
            }
        }
        Cmd::Gpus { json, watch, gpu } => commands::gpus(&gpu, json, watch)?,
        Cmd::Check { plan, json } => commands::check(&plan, json)?,
        Cmd::Export {
            dir,
            format,
            output,
        } => commands::export(&dir, format, output.as_deref())?,
        Cmd::Classify { input, json } => commands::classify(input.as_deref(), json)?,
        Cmd::Loadtest(args) => commands::loadtest(args)?,
        Cmd::SimServer(args) => commands::sim_server(args)?,
    };
    std::process::exit(code);
}
