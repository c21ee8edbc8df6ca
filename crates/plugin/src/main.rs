//! The `kubectl-database` binary: parses the line, runs the command, and reports a
//! failure as one sentence on standard error with exit code 1.

use std::process::ExitCode;

use clap::Parser as _;
use clap::error::ErrorKind;
use kubectl_database::cli::Cli;

/// One thread: a command makes a few requests one after another, and a CLI should start
/// and stop quickly.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return usage(&error),
    };
    match kubectl_database::run(cli).await {
        Ok(code) => code,
        Err(error) => {
            eprintln!("kubectl database: {error}");
            ExitCode::FAILURE
        }
    }
}

/// `--help` and `--version` print and succeed; a line that does not parse fails like
/// any other error (exit code 1, not clap's 2), with clap's explanation and usage after
/// the plugin's prefix, or the help when no command was given.
fn usage(error: &clap::Error) -> ExitCode {
    if !error.use_stderr() {
        let _ = error.print();
        return ExitCode::SUCCESS;
    }
    if error.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = error.print();
        return ExitCode::FAILURE;
    }
    let text = error.render().to_string();
    eprint!("kubectl database: {}", text.trim_start_matches("error: "));
    ExitCode::FAILURE
}
