//! The `controller` binary.

use std::process::ExitCode;

use clap::Parser;
use database_controller::app;
use database_controller::cli::Cli;
use operator_runtime::telemetry;

/// mimalloc rather than glibc malloc: see the benchmark figures in the README.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let _telemetry = match telemetry::init(cli.log_format, "database-controller") {
        Ok(t) => t,
        Err(err) => {
            eprintln!("error: setting up telemetry: {err:#}");
            return ExitCode::FAILURE;
        }
    };
    match app::run(cli, shutdown_signal()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %format!("{err:#}"), "controller stopped");
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM (how Kubernetes stops a Pod) or Ctrl-C.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        () = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("shutdown requested");
}
