use clap::Parser;

fn main() -> std::process::ExitCode {
    sweeptop::cli::run(sweeptop::cli::Cli::parse())
}
