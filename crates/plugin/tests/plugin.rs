//! The built plugin against a real API server, as a user runs it: a Database whose
//! status is written the way the controller writes it (no controller runs), then
//! `status`, `pause`/`resume`, `backup` and `switchover`, run as the binary with
//! `--kubeconfig` and as `kubectl database` found by kubectl on PATH.

use std::ffi::OsString;
use std::path::Path;

use database_api::backup::DatabaseBackup;
use database_api::constants::PAUSED_ANNOTATION;
use database_api::replication::SWITCHOVER_ANNOTATION;
use database_api::{Database, conditions};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use serde_json::json;
use testenv::Options;
use testenv::toolkit::Cluster;

const NAMESPACE: &str = "shop";
const PLUGIN: &str = env!("CARGO_BIN_EXE_kubectl-database");

/// What a run of the plugin printed and how it ended.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `program` with `args` and `env`, and waits for it.
async fn run(program: &Path, args: &[&str], env: &[(&str, OsString)]) -> Run {
    let output = tokio::process::Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .await
        .expect("the program runs");
    Run {
        code: output.status.code(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The plugin binary with `args`, the test's namespace and the admin kubeconfig.
async fn plugin(cluster: &Cluster, args: &[&str]) -> Run {
    let kubeconfig = cluster.plane.kubeconfig().to_str().expect("a UTF-8 path");
    let mut all = args.to_vec();
    all.extend(["--kubeconfig", kubeconfig, "-n", NAMESPACE]);
    run(Path::new(PLUGIN), &all, &[]).await
}

/// The plugin with `args`, which must succeed; its standard output.
async fn plugin_ok(cluster: &Cluster, args: &[&str]) -> String {
    let run = plugin(cluster, args).await;
    assert_eq!(run.code, Some(0), "{args:?}: {}", run.stderr);
    run.stdout
}

/// A control plane with the CRDs, and Database `orders` as the controller leaves a
/// Running one: `orders-0` the primary, `orders-1` its replica, Ready, one event.
async fn cluster_with_orders() -> Cluster {
    let cluster = Cluster::start(
        Options::default(),
        &[Database::crd(), DatabaseBackup::crd()],
        NAMESPACE,
    )
    .await;
    let db = cluster
        .create_database(
            "orders",
            json!({
                "engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2,
                "backup": {"schedule": "0 3 * * *", "destination": {"volume": {"claimName": "dumps"}}},
            }),
        )
        .await;
    write_status(&cluster).await;
    record_event(&cluster, &db).await;
    cluster
}

async fn write_status(cluster: &Cluster) {
    let now = Timestamp::now().to_string();
    let status = json!({"status": {
        "phase": "Running", "ready": true, "replicas": 2, "primary": "orders-0",
        "endpoint": "orders-0.orders.shop.svc.cluster.local:5432",
        "instances": [
            {"name": "orders-0", "role": "Primary", "ready": true},
            {"name": "orders-1", "role": "Replica", "ready": true, "lagBytes": 512},
        ],
        "conditions": [{
            "type": conditions::READY, "status": "True", "reason": "AllReplicasReady",
            "message": "2/2 instances ready", "lastTransitionTime": now,
        }],
    }});
    cluster
        .databases()
        .patch_status("orders", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status written");
}

async fn record_event(cluster: &Cluster, db: &Database) {
    let event = Event {
        metadata: ObjectMeta {
            name: Some("orders.created".to_owned()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(Timestamp::now())),
        reporting_controller: Some("mycompany.io/database-controller".to_owned()),
        reporting_instance: Some("database-controller-0".to_owned()),
        action: Some("Reconcile".to_owned()),
        reason: Some("Created".to_owned()),
        type_: Some("Normal".to_owned()),
        note: Some("Created StatefulSet orders".to_owned()),
        regarding: Some(ObjectReference {
            api_version: Some("mycompany.io/v1".to_owned()),
            kind: Some("Database".to_owned()),
            name: Some("orders".to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            uid: db.uid(),
            ..ObjectReference::default()
        }),
        ..Event::default()
    };
    cluster
        .api::<Event>()
        .create(&PostParams::default(), &event)
        .await
        .expect("event recorded");
}

fn assert_shows_orders(screen: &str) {
    for expected in [
        "Name:       orders\n",
        "Engine:     postgres 17\n",
        "Phase:      Running\n",
        "Primary:    orders-0\n",
        "Instances:  2/2 ready\n",
        "orders-0   Primary   true    -\n",
        "orders-1   Replica   true    512 bytes\n",
        "Ready   True     AllReplicasReady",
        "Normal   Created   Created StatefulSet orders\n",
    ] {
        assert!(screen.contains(expected), "no {expected:?} in:\n{screen}");
    }
}

#[tokio::test]
async fn status_shows_the_phase_the_instances_and_the_events_also_as_a_kubectl_plugin() {
    let cluster = cluster_with_orders().await;
    assert_shows_orders(&plugin_ok(&cluster, &["status", "orders"]).await);

    // kubectl finds `kubectl-database` on PATH; the kubeconfig comes from KUBECONFIG,
    // which kubectl hands on with the rest of its environment.
    let kubectl = testenv::assets::find("kubectl").expect("kubectl");
    let bin_dir = Path::new(PLUGIN).parent().expect("the binary's folder");
    let path = std::env::join_paths(std::iter::once(bin_dir.to_owned()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .expect("a PATH");
    let env = [
        ("PATH", path),
        (
            "KUBECONFIG",
            cluster.plane.kubeconfig().as_os_str().to_owned(),
        ),
    ];
    let through_kubectl = run(
        &kubectl,
        &["database", "status", "orders", "-n", NAMESPACE],
        &env,
    )
    .await;
    assert_eq!(through_kubectl.code, Some(0), "{}", through_kubectl.stderr);
    assert_shows_orders(&through_kubectl.stdout);

    let missing = plugin(&cluster, &["status", "users"]).await;
    assert_eq!(missing.code, Some(1));
    assert_eq!(
        missing.stderr,
        "kubectl database: no Database users in namespace shop\n"
    );
}

async fn annotation(cluster: &Cluster, key: &str) -> Option<String> {
    let db = cluster.databases().get("orders").await.expect("orders");
    db.annotations().get(key).cloned()
}

#[tokio::test]
async fn pause_then_resume_set_and_remove_the_annotation_on_the_server() {
    let cluster = cluster_with_orders().await;
    let paused = plugin_ok(&cluster, &["pause", "orders"]).await;
    assert!(paused.contains("Database orders is paused"), "{paused}");
    assert_eq!(
        annotation(&cluster, PAUSED_ANNOTATION).await.as_deref(),
        Some("true")
    );
    let resumed = plugin_ok(&cluster, &["resume", "orders"]).await;
    assert!(
        resumed.contains("Database orders is not paused"),
        "{resumed}"
    );
    assert_eq!(annotation(&cluster, PAUSED_ANNOTATION).await, None);
}

#[tokio::test]
async fn backup_creates_a_database_backup_of_the_database_named_or_timestamped() {
    let cluster = cluster_with_orders().await;
    let printed = plugin_ok(
        &cluster,
        &["backup", "orders", "--backup-name", "orders-manual"],
    )
    .await;
    assert!(
        printed.contains("kubectl get dbbackup orders-manual -w"),
        "{printed}"
    );
    plugin_ok(&cluster, &["backup", "orders"]).await;
    let backups = cluster
        .api::<DatabaseBackup>()
        .list(&ListParams::default())
        .await
        .expect("backups");
    let mut names: Vec<String> = backups.items.iter().map(ResourceExt::name_any).collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert_eq!(names[1], "orders-manual");
    let stamp = names[0].strip_prefix("orders-").expect("orders-<time>");
    assert!(
        stamp.len() == 14 && stamp.bytes().all(|b| b.is_ascii_digit()),
        "{stamp}"
    );
    for backup in &backups.items {
        assert_eq!(backup.spec.database, "orders");
    }
}

#[tokio::test]
async fn switchover_refuses_a_pod_that_is_not_an_instance_and_annotates_for_a_replica() {
    let cluster = cluster_with_orders().await;
    let before = cluster.databases().get("orders").await.expect("orders");
    let refused = plugin(&cluster, &["switchover", "orders", "--to", "orders-7"]).await;
    assert_eq!(refused.code, Some(1));
    assert_eq!(
        refused.stderr,
        "kubectl database: switchover of orders refused: orders-7 is not an instance of \
         orders (instances: orders-0, orders-1)\n"
    );
    let after = cluster.databases().get("orders").await.expect("orders");
    assert_eq!(
        after.resource_version(),
        before.resource_version(),
        "changed nothing"
    );

    let asked = plugin_ok(&cluster, &["switchover", "orders", "--to", "orders-1"]).await;
    assert!(
        asked.contains("Switchover of orders to orders-1 requested"),
        "{asked}"
    );
    assert_eq!(
        annotation(&cluster, SWITCHOVER_ANNOTATION).await.as_deref(),
        Some("orders-1")
    );
}
