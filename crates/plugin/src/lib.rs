//! `kubectl database`: a kubectl plugin for the Databases of the database operator.
//!
//! kubectl runs any executable named `kubectl-<name>` on PATH as `kubectl <name>`,
//! passing the rest of the line and its environment. Each subcommand is a module:
//! [`status`] reads and renders, [`connect`] hands over to `kubectl exec`, [`logs`]
//! streams, and [`switchover`], [`backup`] and [`pause`] write the one annotation or
//! object the operator acts on. The operator does the work; the plugin asks and shows.

pub mod backup;
pub mod cli;
pub mod cluster;
pub mod connect;
pub mod database;
pub mod error;
pub mod instances;
pub mod logs;
pub mod pause;
pub mod status;
pub mod switchover;
mod words;

use std::io::Write as _;
use std::process::ExitCode;

use cli::{Cli, Command};
use error::Error;

/// Runs the command `cli` asks for; the exit code on success (`connect` ends with its
/// client's).
pub async fn run(cli: Cli) -> Result<ExitCode, Error> {
    let target = cluster::connect(&cli.connection).await?;
    let text = match cli.command {
        Command::Status { name } => status::run(&target, &name).await?,
        Command::Connect { name, client_args } => {
            return connect::run(&target, &cli.connection, &name, &client_args).await;
        }
        Command::Switchover { name, to } => switchover::run(&target, &name, &to).await?,
        Command::Backup { name, backup_name } => {
            backup::run(&target, &name, backup_name.as_deref()).await?
        }
        Command::Pause { name } => pause::run(&target, &name, true).await?,
        Command::Resume { name } => pause::run(&target, &name, false).await?,
        Command::Logs {
            name,
            instance,
            follow,
            tail,
        } => {
            logs::run(&target, &name, instance.as_deref(), follow, tail).await?;
            String::new()
        }
    };
    print(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` to standard output; a reader that went away (`| head`) is not an
/// error.
fn print(text: &str) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Error::WriteOutput(e)),
        _ => Ok(()),
    }
}
