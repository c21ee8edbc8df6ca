//! `connect` and `logs` against a postgres the operator runs on the real tier (a real
//! kubelet, containerd and the postgres image): the engine's own client in the
//! primary's container, logged in as the application user, and the server's log.

use std::ffi::OsString;
use std::path::Path;

use clap::Parser as _;
use database_api::Database;
use database_api::backup::DatabaseBackup;
use database_controller::cli::Cli;
use futures::FutureExt as _;
use kube::CustomResourceExt as _;
use serde_json::json;
use testenv::Options;
use testenv::toolkit::Cluster;
use testenv::toolkit::operator::controller_args;
use testenv::toolkit::real_tier::wait_running;

const NAMESPACE: &str = "shop";
const PLUGIN: &str = env!("CARGO_BIN_EXE_kubectl-database");

/// Runs the plugin with `args` as a user would, kubectl on PATH; exit code and output.
async fn plugin(cluster: &Cluster, args: &[&str]) -> (Option<i32>, String, String) {
    let kubeconfig = cluster.plane.kubeconfig().to_str().expect("a UTF-8 path");
    let kubectl = testenv::assets::find("kubectl").expect("kubectl");
    let mut path = OsString::from(kubectl.parent().unwrap_or(Path::new("/")));
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let output = tokio::process::Command::new(PLUGIN)
        // The connection flags first: after `--`, everything is the client's.
        .args(["--kubeconfig", kubeconfig, "-n", NAMESPACE])
        .args(args)
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("the plugin runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[tokio::test]
async fn connect_runs_the_client_as_the_application_user_and_logs_show_the_server() {
    let crds = [Database::crd(), DatabaseBackup::crd()];
    let cluster = Cluster::start(Options::real(&["postgres-17"]), &crds, NAMESPACE).await;
    let kubeconfig = cluster.plane.kubeconfig().to_path_buf();
    let cli = Cli::parse_from(
        std::iter::once("controller".to_owned()).chain(controller_args(&kubeconfig)),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(database_controller::app::run(cli, stopped.map(|_| ())));
    cluster
        .create_database(
            "orders",
            json!({"engine": "postgres", "version": "17", "storage": "1Gi"}),
        )
        .await;
    wait_running(&cluster, "orders").await;

    // Piped (not a terminal): the client takes its arguments and ends with its own code.
    let (code, stdout, stderr) = plugin(
        &cluster,
        &[
            "connect",
            "orders",
            "--",
            "-tAc",
            "SELECT current_user, current_database()",
        ],
    )
    .await;
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        stdout.trim(),
        "app|app",
        "the application user on its database"
    );
    let (code, _, stderr) =
        plugin(&cluster, &["connect", "orders", "--", "-c", "SELECT nope"]).await;
    assert_eq!(code, Some(1), "psql's own exit code comes back: {stderr}");

    let (code, stdout, stderr) = plugin(&cluster, &["logs", "orders", "--tail", "50"]).await;
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("database system is ready to accept connections"),
        "{stdout}"
    );

    let _ = stop.send(());
    let _ = controller.await;
}
