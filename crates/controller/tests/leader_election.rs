//! Two controllers with leader election against a real API server: only the holder of
//! the Lease reconciles (the standby writes nothing), a crashed holder is replaced after
//! the lease duration, and a cleanly stopped one hands over at once.

// The election trials and their measurements are one scenario, told in one function.
#![allow(clippy::too_many_lines)]

use std::time::{Duration, Instant};

use clap::Parser;
use database_api::Database;
use database_api::backup::DatabaseBackup;
use database_controller::cli::Cli;
use futures::FutureExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::json;
use testenv::toolkit::operator::controller_args;
use testenv::toolkit::wait::{WAIT, eventually};
use testenv::toolkit::{Cluster, fixtures};
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
    let mut args = controller_args(&kubeconfig);
    args.extend(
        [
            "--leader-elect",
            "--leader-election-namespace",
            LEASE_NAMESPACE,
            "--identity",
            identity,
        ]
        .map(str::to_owned),
    );
    let cli = Cli::parse_from(std::iter::once("controller".to_owned()).chain(args));
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

/// Waits until `wanted` holds the Lease; how long that took.
async fn wait_for_holder(leases: &Api<Lease>, wanted: &str, timeout: Duration) -> Duration {
    let started = Instant::now();
    let what = format!("{wanted} to take the Lease");
    eventually(timeout, &what, || async {
        (holder(leases).await.as_deref() == Some(wanted)).then_some(())
    })
    .await;
    started.elapsed()
}

async fn create_and_wait(client: &Client, name: &str) {
    let api: Api<Database> = Api::namespaced(client.clone(), "default");
    let spec = json!({"engine": "postgres", "version": "16", "storage": "1Gi"});
    api.create(&PostParams::default(), &fixtures::database(name, &spec))
        .await
        .expect("created");
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let what = format!("{name} reconciled");
    eventually(WAIT, &what, || async {
        sets.get_opt(name).await.expect("get")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_reconciles_and_a_standby_takes_over() {
    let crds = [Database::crd(), DatabaseBackup::crd()];
    let Cluster { plane, client, .. } =
        Cluster::start(Options::default().with_audit(), &crds, LEASE_NAMESPACE).await;
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
