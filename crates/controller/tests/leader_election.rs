//! Two controllers with leader election against a real API server: only the holder of
//! the Lease reconciles (the standby writes nothing), a crashed holder is replaced after
//! the lease duration, and a cleanly stopped one hands over at once.

use std::time::{Duration, Instant};

use clap::Parser;
use database_api::Database;
use database_api::backup::DatabaseBackup;
use database_controller::cli::Cli;
use futures::FutureExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::json;
use testenv::{ControlPlane, Options};

const LEASE_NAMESPACE: &str = "database-operator-system";
const LEASE_NAME: &str = "database-operator-leader";

struct Replica {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

fn start_replica(plane: &ControlPlane, identity: &str) -> Replica {
    let kubeconfig = plane
        .kubeconfig_for(identity, &["system:masters"])
        .expect("kubeconfig");
    let cli = Cli::parse_from([
        "controller",
        "--kubeconfig",
        kubeconfig.to_str().expect("path"),
        "--leader-elect",
        "--leader-election-namespace",
        LEASE_NAMESPACE,
        "--identity",
        identity,
        "--metrics-bind-address",
        "127.0.0.1:0",
        "--health-probe-bind-address",
        "127.0.0.1:0",
        "--log-format",
        "plain",
    ]);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(database_controller::app::run(cli, stopped.map(|_| ())));
    Replica {
        stop: Some(stop),
        task,
    }
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt(LEASE_NAME)
        .await
        .ok()
        .flatten()?
        .spec?
        .holder_identity
}

async fn wait_for_holder(leases: &Api<Lease>, wanted: &str, timeout: Duration) -> Duration {
    let started = Instant::now();
    while holder(leases).await.as_deref() != Some(wanted) {
        assert!(
            started.elapsed() < timeout,
            "{wanted} did not take the Lease within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    started.elapsed()
}

async fn create_and_wait(client: &Client, name: &str) {
    let api: Api<Database> = Api::namespaced(client.clone(), "default");
    let db = serde_json::from_value(json!({
        "apiVersion": "mycompany.io/v1", "kind": "Database",
        "metadata": {"name": name}, "spec": {"engine": "postgres", "version": "16", "storage": "1Gi"},
    }))
    .expect("Database");
    api.create(&PostParams::default(), &db)
        .await
        .expect("created");
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let started = Instant::now();
    while sets.get_opt(name).await.expect("get").is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{name} was not reconciled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_reconciles_and_a_standby_takes_over() {
    let plane = ControlPlane::start(Options::default().with_audit())
        .await
        .expect("control plane");
    let client = plane.client().await.expect("client");
    for crd in [Database::crd(), DatabaseBackup::crd()] {
        testenv::install_crd(&client, &crd).await.expect("CRD");
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = serde_json::from_value(json!({"metadata": {"name": LEASE_NAMESPACE}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);

    let a = start_replica(&plane, "replica-a");
    wait_for_holder(&leases, "replica-a", Duration::from_secs(20)).await;
    let b = start_replica(&plane, "replica-b");
    create_and_wait(&client, "first").await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let standby_writes = plane.request_lines_by("replica-b");
    assert!(
        standby_writes.is_empty(),
        "the standby wrote: {standby_writes:#?}"
    );
    assert!(
        plane
            .request_lines_by("replica-a")
            .iter()
            .any(|w| w.contains("statefulsets")),
        "the leader reconciled"
    );

    // Repeated trials, alternating the roles. A crash: the leader stops without
    // releasing the Lease. A clean stop: it releases it, and the standby takes it on its
    // next try.
    let (mut leader, mut leader_name, mut standby, mut standby_name) =
        (a, "replica-a", b, "replica-b");
    let (mut crashes, mut clean_stops) = (Vec::new(), Vec::new());
    // FAILOVER_TRIALS makes a longer run.
    for trial in 0..testenv::count_from_env("FAILOVER_TRIALS", 4) {
        let crash = trial % 2 == 0;
        let stopped = Instant::now();
        if crash {
            leader.task.abort();
        } else {
            if let Some(stop) = leader.stop.take() {
                let _ = stop.send(());
            }
            let result = tokio::time::timeout(Duration::from_secs(15), leader.task)
                .await
                .expect("stops")
                .expect("joins");
            assert!(result.is_ok(), "clean stop: {result:?}");
        }
        wait_for_holder(&leases, standby_name, Duration::from_secs(30)).await;
        let takeover = stopped.elapsed();
        create_and_wait(&client, &format!("trial-{trial}")).await;
        if crash {
            crashes.push(takeover);
        } else {
            clean_stops.push(takeover);
        }
        // The stopped replica comes back as the new standby.
        let restarted = start_replica(&plane, leader_name);
        (leader, standby) = (standby, restarted);
        std::mem::swap(&mut leader_name, &mut standby_name);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!("takeover after a crash: {crashes:.1?} (lease duration 15 s, retry 2 s)");
    eprintln!("takeover after a clean stop: {clean_stops:.1?}");
    assert!(
        crashes.iter().all(|t| *t <= Duration::from_secs(20)),
        "{crashes:?}"
    );
    assert!(
        clean_stops.iter().all(|t| *t <= Duration::from_secs(5)),
        "{clean_stops:?}"
    );
    drop(standby);
}
