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
        #[command(flatten)]
        gpu: commands::GpuArgs,
        #[command(flatten)]
        view: sweeptop::tui::ViewArgs,
    },
    /// Run the bundled demo sweep against the simulated server (no GPU needed).
    Demo {
        #[arg(long)]
        headless: bool,
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
    SimServer(sweeptop::sim::SimArgs),
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
            gpu,
            view,
        } => commands::run(commands::RunArgs {
            plan,
            resume,
            out,
            headless,
            demo: false,
            gpu,
            view,
        })?,
        Cmd::Demo {
            headless,
            out,
            gpu,
            view,
        } => commands::run(commands::RunArgs {
            plan: None,
            resume: None,
            out,
            headless,
            demo: true,
            gpu,
            view,
        })?,
        Cmd::Open { dir, view } => commands::open(&dir, &view)?,
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
