//! Steps of the real tier's replication scenarios, on Database `orders`: waiting for
//! every replica to stream and for a new primary, scaling, losing or killing the
//! primary, a switchover under writes, and the check that no acknowledged write was lost.

use std::fmt::Write as _;
use std::future::Future;
use std::ops::DerefMut;
use std::time::Duration;

use database_api::Database;
use database_api::replication::{Role, SWITCHOVER_ANNOTATION};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, LogParams};
use serde_json::{Value, json};

use super::cluster::Cluster;
use super::real_tier::{REAL_WAIT, cordon, exec, hang_server, run_client, wait_running};
use super::wait::{Wait, eventually};
use crate::clients;

/// The controller a test runs, which a scenario may kill and start again.
pub trait Controller {
    /// Ends the controller at once, as SIGKILL would: nothing it had in flight finishes.
    fn kill(&mut self);
    /// Starts the controller again, for every namespace.
    fn restart(&mut self) -> impl Future<Output = ()>;
}

/// Waits until the status shows every replica streaming.
pub async fn replicated(cluster: &Cluster, name: &str) -> Database {
    eventually(REAL_WAIT, "Replicated=True", || async {
        cluster.databases().get(name).await.ok().filter(|d| {
            d.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Replicated" && c.status == "True")
            })
        })
    })
    .await
}

/// The status' primary once it differs from `old`.
pub async fn new_primary(cluster: &Cluster, name: &str, old: &str) -> String {
    eventually(REAL_WAIT, "a new primary", || async {
        cluster
            .databases()
            .get(name)
            .await
            .ok()
            .and_then(|d| d.status?.primary)
            .filter(|p| p != old)
    })
    .await
}

/// Scales Database `name` to `replicas` and waits until that many instances are ready
/// and replicated (a single instance has nothing to replicate).
pub async fn scale_and_wait_replicated(cluster: &Cluster, name: &str, replicas: i32) -> Database {
    cluster
        .patch_database(name, json!({"spec": {"replicas": replicas}}))
        .await;
    let count = usize::try_from(replicas).unwrap_or(0);
    let done = |d: &Database| {
        d.status.as_ref().is_some_and(|s| {
            s.replicas == replicas
                && s.instances.len() == count
                && s.conditions.iter().any(|c| {
                    c.type_ == "Replicated"
                        && (c.status == "True" || (replicas == 1 && c.reason == "SingleInstance"))
                })
        })
    };
    // Each added instance copies the primary and starts in turn: allow for two.
    let outcome = Wait::new("", REAL_WAIT * 2)
        .every(Duration::from_millis(200))
        .poll(|| async {
            match cluster.databases().get(name).await {
                Ok(db) if done(&db) => Ok(db),
                Ok(db) => Err(format!("status {:#?}", db.status)),
                Err(err) => Err(format!("Database {name} not read: {err}")),
            }
        })
        .await;
    let outcome = match outcome {
        Ok(db) => Ok(db),
        Err(last) => Err(format!(
            "not within {:?}; last seen: {last}\n{}",
            REAL_WAIT * 2,
            server_logs(cluster, name).await
        )),
    };
    let what = format!("{replicas} instances, replicated");
    outcome.expect(&what)
}

/// The last lines each of Database `name`'s instances' servers wrote, to show why a
/// wait on them failed.
async fn server_logs(cluster: &Cluster, name: &str) -> String {
    let pods: Api<Pod> = cluster.api();
    let listed = pods.list(&ListParams::default()).await.map(|l| l.items);
    let mut logs = String::new();
    for pod in listed.unwrap_or_default() {
        let pod = pod.name_any();
        let instance = pod
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('-'))
            .is_some_and(|ordinal| ordinal.bytes().all(|b| b.is_ascii_digit()));
        if !instance {
            continue;
        }
        let params = LogParams {
            container: Some("database".to_owned()),
            tail_lines: Some(40),
            ..LogParams::default()
        };
        let text = pods
            .logs(&pod, &params)
            .await
            .unwrap_or_else(|err| format!("(not read: {err})"));
        let _ = writeln!(logs, "--- {pod}, its server's last lines:\n{text}");
    }
    logs
}

/// Creates Database `orders` with `spec` and waits until it runs with every replica
/// streaming.
pub async fn create_replicated(cluster: &Cluster, spec: Value) {
    cluster.create_database("orders", spec).await;
    wait_running(cluster, "orders").await;
    replicated(cluster, "orders").await;
}

/// Creates Database `orders`, three instances of `engine` `version` failing over after
/// 10 s, and waits until it runs with every replica streaming.
pub async fn three_with_a_short_bound(cluster: &Cluster, engine: &str, version: &str) {
    create_replicated(
        cluster,
        json!({"engine": engine, "version": version, "storage": "1Gi", "replicas": 3,
               "replication": {"failoverAfterSeconds": 10}}),
    )
    .await;
}

/// A write through `-rw` landed on a primary. The tests' write scripts print `written on
/// primary=<answer>` with what the server that took the write says of itself, and
/// `primary` is the answer a primary gives (`t` from postgres, `0` for mysql's
/// read_only, `true` from mongodb). Earlier attempts may have failed while the Service
/// still routed to the old primary.
pub fn assert_written_on_a_primary(output: &str, primary: &str) {
    let written = format!("written on primary={primary}");
    assert!(
        output.lines().any(|line| line.trim() == written),
        "-rw reaches a writable primary: {output}"
    );
}

/// Runs the write script `script` (see [`assert_written_on_a_primary`]) in the database
/// container of instance `pod`, one that already runs where the node takes no new Pods,
/// and checks that the write landed on a primary, which answers `primary`.
pub async fn write_from(cluster: &Cluster, pod: &str, script: &str, primary: &str) {
    let output = exec(cluster, pod, &["sh", "-c", script])
        .await
        .expect("a write through -rw");
    assert_written_on_a_primary(&output, primary);
}

/// The status of Database `orders` names `primary` as its primary.
pub async fn assert_primary(cluster: &Cluster, primary: &str) {
    let db = cluster.databases().get("orders").await.expect("database");
    assert_eq!(db.status.and_then(|s| s.primary).as_deref(), Some(primary));
}

/// Creates Database `orders` with `spec` (more than one instance), kills its primary's
/// Pod on a cordoned node, and kills the controller the moment a new primary is named
/// in the topology, before it does anything else. Once the controller is back, the
/// change must be finished: that instance the primary in status, the only one with the
/// primary role, and the only Pod behind `-rw`.
pub async fn controller_killed_mid_failover_finishes_it<E>(env: &mut E, spec: Value)
where
    E: Controller + DerefMut<Target = Cluster>,
{
    create_replicated(env, spec).await;
    cordon(env, true).await;
    let pods: Api<Pod> = env.api();
    pods.delete("orders-0", &DeleteParams::default().grace_period(0))
        .await
        .expect("primary killed");
    let maps: Api<ConfigMap> = env.api();
    let named = eventually(REAL_WAIT, "a new primary named", || async {
        maps.get("orders-topology")
            .await
            .ok()
            .and_then(|c| c.data?.get("primary").cloned())
            .filter(|p| p != "orders-0")
    })
    .await;
    env.kill();
    tokio::time::sleep(Duration::from_secs(3)).await;
    env.restart().await;
    assert_eq!(new_primary(env, "orders", "orders-0").await, named);
    cordon(env, false).await;
    let db = replicated(env, "orders").await;
    let status = db.status.expect("status");
    assert_eq!(status.primary.as_deref(), Some(named.as_str()));
    let primaries = status
        .instances
        .iter()
        .filter(|i| i.role == Role::Primary)
        .count();
    assert_eq!(primaries, 1, "{:?}", status.instances);
    let labelled = pods
        .list(&ListParams::default().labels("mycompany.io/role=primary"))
        .await
        .expect("pods");
    let behind_rw: Vec<String> = labelled.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(behind_rw, [named], "one Pod behind -rw");
}

/// Runs `writer` in a client Pod of `client` against Database `orders` and, 8 s into
/// it, asks for a switchover to `target`. Returns the writer's output once it is done,
/// and the primary status named once it changed from `orders-0`.
pub async fn switchover_under_writes(
    cluster: &Cluster,
    client: &str,
    writer: &str,
    target: &str,
) -> (String, String) {
    let switch = async {
        tokio::time::sleep(Duration::from_secs(8)).await;
        let switchover = json!({"metadata": {"annotations": {SWITCHOVER_ANNOTATION: target}}});
        cluster.patch_database("orders", switchover).await;
        let started = std::time::Instant::now();
        let primary = new_primary(cluster, "orders", "orders-0").await;
        eprintln!("switchover to {primary} in {:.1?}", started.elapsed());
        primary
    };
    let ((ok, output), primary) =
        tokio::join!(run_client(cluster, "orders", client, writer), switch);
    assert!(ok, "{output}");
    (output, primary)
}

/// Deletes the primary's Pod `orders-0` (gracefully) on a cordoned node, so it cannot
/// come back, and returns the new primary once status names it.
pub async fn lose_the_primary(cluster: &Cluster) -> String {
    cordon(cluster, true).await;
    let pods: Api<Pod> = cluster.api();
    pods.delete("orders-0", &DeleteParams::default())
        .await
        .expect("primary deleted");
    let started = std::time::Instant::now();
    let promoted = new_primary(cluster, "orders", "orders-0").await;
    eprintln!(
        "new primary {promoted} in {:.1?} after the primary's Pod went",
        started.elapsed()
    );
    promoted
}

/// Hangs the server `process` of the primary's Pod `orders-0` (see [`hang_server`]), and
/// returns its host process id and the new primary once status names it.
pub async fn hang_the_primary(cluster: &Cluster, process: &str) -> (u32, String) {
    let pid = hang_server(cluster, "orders-0", process).await;
    let started = std::time::Instant::now();
    let promoted = new_primary(cluster, "orders", "orders-0").await;
    eprintln!(
        "new primary {promoted} in {:.1?} after the primary hung",
        started.elapsed()
    );
    (pid, promoted)
}

/// Every write the writer's `output` acknowledged is among the ids the client script
/// `written` prints for Database `orders`, and the writer wrote a fair number.
pub async fn assert_none_lost(cluster: &Cluster, client: &str, written: &str, output: &str) {
    let acknowledged = clients::acknowledged(output);
    let (ok, stored) = run_client(cluster, "orders", client, written).await;
    assert!(ok, "{stored}");
    let lost = clients::lost(&acknowledged, &stored);
    eprintln!(
        "{} writes acknowledged, {} lost",
        acknowledged.len(),
        lost.len()
    );
    assert!(acknowledged.len() > 50, "the writer hardly wrote: {output}");
    assert_eq!(lost, Vec::<u32>::new(), "acknowledged writes lost");
}

/// Runs `writer` in a client Pod of `client` against Database `orders` and, 8 s into
/// it, kills the primary's Pod `old` (force-deleted, as a crashed node loses it) while
/// the node takes no new Pods; once status names another primary the node takes Pods
/// again. Returns the writer's output and the time from the kill to the new primary.
pub async fn kill_the_primary_under_writes(
    cluster: &Cluster,
    client: &str,
    writer: &str,
    old: &str,
) -> (String, Duration) {
    let kill = async {
        tokio::time::sleep(Duration::from_secs(8)).await;
        cordon(cluster, true).await;
        let pods: Api<Pod> = cluster.api();
        pods.delete(old, &DeleteParams::default().grace_period(0))
            .await
            .expect("primary killed");
        let started = std::time::Instant::now();
        let primary = new_primary(cluster, "orders", old).await;
        let took = started.elapsed();
        eprintln!("new primary {primary} in {took:.1?} after the kill");
        cordon(cluster, false).await;
        took
    };
    let ((ok, output), took) = tokio::join!(run_client(cluster, "orders", client, writer), kill);
    assert!(ok, "{output}");
    (output, took)
}
