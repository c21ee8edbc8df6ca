//! Developer commands for the workspace: `cargo xtask <command>`.

mod bench;
mod cluster;
mod control_plane;
mod demo;
mod images;
mod local_webhook;
mod manifests;
mod test;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "xtask", about = "Developer commands for the database operator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write the generated manifests (the CRD) into deploy/, or check they are current.
    Manifests {
        /// Exit non-zero and show the difference if deploy/ is stale, writing nothing.
        #[arg(long)]
        check: bool,
    },
    /// The local control plane's binaries.
    ControlPlane {
        #[command(subcommand)]
        command: ControlPlaneCommand,
    },
    /// A local control plane in the background, for trying things by hand.
    Cluster {
        #[command(subcommand)]
        command: cluster::ClusterCommand,
    },
    /// The container images of the real tier, built from Debian packages.
    Images {
        #[command(subcommand)]
        command: images::ImagesCommand,
    },
    /// Every test: unit tests and the acceptance tests against a real control plane.
    Test(test::TestArgs),
    /// Benchmarks on the local control plane: latency, throughput, memory, CPU, writes.
    Bench(bench::BenchArgs),
    /// The whole product locally: control plane, CRD, webhook, controller and samples.
    Demo(demo::DemoArgs),
}

#[derive(Subcommand)]
enum ControlPlaneCommand {
    /// Build (or find cached) etcd, kube-apiserver, kube-controller-manager,
    /// kube-scheduler, kubectl and kwok at the pinned versions.
    Build,
    /// Print where the binaries are and their versions.
    Info,
}

fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            // The client logs every refused probe while the API server starts; those are expected.
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kube_client::client::builder=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let result = match Cli::parse().command {
        Command::Manifests { check } => manifests::run(check),
        Command::ControlPlane {
            command: ControlPlaneCommand::Build,
        } => control_plane::ensure_built(control_plane::Tier::Real).map(|_| ()),
        Command::ControlPlane {
            command: ControlPlaneCommand::Info,
        } => {
            control_plane::print_info();
            Ok(())
        }
        Command::Cluster { command } => cluster::run(command),
        Command::Images { command } => images::run(command),
        Command::Test(args) => test::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Bench(args) => bench::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The workspace root (the parent of `xtask/`).
fn workspace_root() -> std::path::PathBuf {
    let manifest_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}
