//! `backup-agent`: run in a backup or restore Job beside the engine's dump or restore
//! tool, it moves the dump between a named pipe and the destination the environment
//! names, and leaves a one-line JSON report in the container's termination message.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use database_backup::agent::{self, Report};

#[derive(Parser)]
#[command(name = "backup-agent", version, about)]
struct Cli {
    /// Where the report goes (the container's termination message).
    #[arg(long, default_value = "/dev/termination-log")]
    report: PathBuf,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Reads a dump from `input` to its end, compressed into `key`, and keeps it once
    /// the dump command reports success in `status`.
    Upload {
        #[arg(long)]
        key: String,
        #[arg(long)]
        input: PathBuf,
        #[arg(long)]
        status: PathBuf,
        /// How long to wait for the status once the dump's output ended.
        #[arg(long, default_value_t = 120)]
        status_wait_seconds: u64,
    },
    /// Writes the dump at `key`, decompressed, into `output`.
    Download {
        #[arg(long)]
        key: String,
        #[arg(long)]
        output: PathBuf,
    },
    /// Deletes the dump at `key`.
    Delete {
        #[arg(long)]
        key: String,
    },
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let report = match run(cli.command).await {
        Ok(report) => report,
        Err(error) => Report {
            error: Some(error),
            ..Report::default()
        },
    };
    let line = serde_json::to_string(&report).unwrap_or_default();
    println!("{line}");
    // The report is also the termination message; without one, the log says it all.
    let _ = std::fs::write(&cli.report, &line);
    if report.error.is_some() {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}

async fn run(command: Command) -> Result<Report, String> {
    let store = agent::store_from_env(|name| std::env::var(name).ok())?;
    match command {
        Command::Upload {
            key,
            input,
            status,
            status_wait_seconds,
        } => {
            let source = std::fs::File::open(&input)
                .map_err(|err| format!("{} cannot be opened: {err}", input.display()))?;
            let patience = Duration::from_secs(status_wait_seconds);
            let written = store
                .upload(&key, source, agent::verdict(&status, patience))
                .await
                .map_err(|err| err.to_string())?;
            Ok(Report {
                location: Some(store.location(&key)),
                stored_bytes: Some(written.stored_bytes),
                source_bytes: Some(written.source_bytes),
                error: None,
            })
        }
        Command::Download { key, output } => {
            let sink = std::fs::OpenOptions::new()
                .write(true)
                .open(&output)
                .map_err(|err| format!("{} cannot be opened: {err}", output.display()))?;
            let bytes = store
                .download(&key, sink)
                .await
                .map_err(|err| err.to_string())?;
            Ok(Report {
                location: Some(store.location(&key)),
                source_bytes: Some(bytes),
                ..Report::default()
            })
        }
        Command::Delete { key } => {
            store.delete(&key).await.map_err(|err| err.to_string())?;
            Ok(Report {
                location: Some(store.location(&key)),
                ..Report::default()
            })
        }
    }
}
