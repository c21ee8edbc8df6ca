//! The generated CRD against a real kube-apiserver: accepted, validating, defaulting,
//! printing, scaling, and keeping status behind its subresource.

use database_api::{Database, DatabaseStatus, Phase};
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::{Value, json};
use testenv::toolkit::Cluster;
use testenv::toolkit::fixtures::{database_object, database_objects};
use testenv::toolkit::kubectl::{kubectl_fails, kubectl_ok};
use testenv::toolkit::refusal::refused;
use testenv::{ControlPlane, Options};

const NAMESPACE: &str = "production";

/// A control plane with the CRD installed and the `production` namespace created.
async fn cluster() -> (ControlPlane, Client) {
    let Cluster { plane, client, .. } =
        Cluster::start(Options::default(), &[Database::crd()], NAMESPACE).await;
    (plane, client)
}

/// The Databases of `production`, untyped, so that invalid objects reach the API server.
fn databases(client: &Client) -> Api<DynamicObject> {
    database_objects(client, NAMESPACE)
}

fn orders_db() -> DynamicObject {
    database_object(
        "orders-db",
        &json!({"engine": "postgres", "version": "15.4", "storage": "100Gi", "replicas": 3}),
    )
}

#[tokio::test]
async fn the_issue_example_is_accepted_as_written() {
    let (_plane, client) = cluster().await;
    let created = databases(&client)
        .create(&PostParams::default(), &orders_db())
        .await
        .expect("accepted");
    assert_eq!(created.data["spec"]["engine"], "postgres");
    assert_eq!(created.data["spec"]["version"], "15.4");
    assert_eq!(created.data["spec"]["storage"], "100Gi");
    assert_eq!(created.data["spec"]["replicas"], 3);
    assert_eq!(created.data["spec"]["deletionPolicy"], "Retain");
}

#[tokio::test]
async fn the_schema_rejects_bad_fields_naming_each_one() {
    let (_plane, client) = cluster().await;
    let api = databases(&client);
    let cases = [
        (
            "oracle",
            json!({"engine": "oracle", "version": "19", "storage": "10Gi"}),
            "spec.engine",
        ),
        (
            "mebibytes",
            json!({"engine": "postgres", "version": "16", "storage": "100Mi"}),
            "spec.storage",
        ),
        (
            "gigabytes",
            json!({"engine": "postgres", "version": "16", "storage": "10GB"}),
            "spec.storage",
        ),
        (
            "zero",
            json!({"engine": "mysql", "version": "8.4", "storage": "10Gi", "replicas": 0}),
            "spec.replicas",
        ),
        (
            "six",
            json!({"engine": "mysql", "version": "8.4", "storage": "10Gi", "replicas": 6}),
            "spec.replicas",
        ),
        (
            "no-version",
            json!({"engine": "mongodb", "storage": "10Gi"}),
            "spec.version",
        ),
    ];
    for (name, spec, field) in cases {
        let created = api
            .create(&PostParams::default(), &database_object(name, &spec))
            .await;
        let status = refused(created, name, &[field]);
        eprintln!("{name}: {}", status.message);
        assert_eq!(status.code, 422, "{name}: {status:?}");
    }
    let stored = api.list(&ListParams::default()).await.expect("list");
    assert!(
        stored.items.is_empty(),
        "an invalid object was stored: {:?}",
        stored.items
    );
}

#[tokio::test]
async fn engine_cannot_change_after_creation() {
    let (_plane, client) = cluster().await;
    let api = databases(&client);
    api.create(&PostParams::default(), &orders_db())
        .await
        .expect("created");
    let patch = Patch::Merge(json!({"spec": {"engine": "mysql"}}));
    let patched = api
        .patch("orders-db", &PatchParams::default(), &patch)
        .await;
    let status = refused(
        patched,
        "an engine change",
        &["spec.engine", "engine is immutable"],
    );
    assert_eq!(status.code, 422, "{status:?}");
}

/// The API server's refusal of `patch` on `orders-db`, as its message.
async fn patch_refused(api: &Api<DynamicObject>, patch: Value) -> String {
    let patched = api
        .patch("orders-db", &PatchParams::default(), &Patch::Merge(patch))
        .await;
    let status = refused(patched, "the patch", &[]);
    assert_eq!(status.code, 422, "{status:?}");
    status.message
}

#[tokio::test]
async fn restore_from_is_given_at_creation_only_and_a_destination_names_one_place() {
    let (_plane, client) = cluster().await;
    let api = databases(&client);
    api.create(&PostParams::default(), &orders_db())
        .await
        .expect("created");
    let added = patch_refused(
        &api,
        json!({"spec": {"restoreFrom": {"backup": "nightly"}}}),
    )
    .await;
    assert!(
        added.contains("restoreFrom is given only when a Database is created"),
        "{added}"
    );
    let both = patch_refused(
        &api,
        json!({"spec": {"backup": {"schedule": "@daily", "destination": {
            "s3": {"endpoint": "https://s3.example.com", "bucket": "backups", "credentialsSecret": "keys"},
            "volume": {"claimName": "dumps"},
        }}}}),
    )
    .await;
    assert!(
        both.contains("spec.backup.destination") && both.contains("name exactly one destination"),
        "{both}"
    );
    let plain_http = patch_refused(
        &api,
        json!({"spec": {"backup": {"schedule": "@daily", "destination": {
            "s3": {"endpoint": "http://s3.example.com", "bucket": "backups", "credentialsSecret": "keys"},
        }}}}),
    )
    .await;
    assert!(
        plain_http.contains("spec.backup.destination.s3.endpoint"),
        "{plain_http}"
    );
}

#[tokio::test]
async fn replicas_default_to_one_and_kubectl_shows_the_printer_columns() {
    let (plane, client) = cluster().await;
    let minimal = database_object(
        "small",
        &json!({"engine": "mysql", "version": "8.4", "storage": "5Gi"}),
    );
    let created = databases(&client)
        .create(&PostParams::default(), &minimal)
        .await
        .expect("created");
    assert_eq!(
        created.data["spec"]["replicas"], 1,
        "the API server applies the schema default"
    );

    let table = kubectl_ok(&plane, &["get", "db", "-n", NAMESPACE]).await;
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        [
            "NAME", "ENGINE", "VERSION", "REPLICAS", "READY", "STATUS", "AGE"
        ],
        "{table}"
    );
    let row: Vec<&str> = table
        .lines()
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(&row[..4], ["small", "mysql", "8.4", "1"], "{table}");

    let wide = kubectl_ok(
        &plane,
        &[
            "get",
            "databases.mycompany.io",
            "-n",
            NAMESPACE,
            "-o",
            "wide",
        ],
    )
    .await;
    assert!(
        wide.lines().next().unwrap_or_default().contains("ENDPOINT"),
        "{wide}"
    );
}

#[tokio::test]
async fn kubectl_scale_changes_spec_replicas_through_the_scale_subresource() {
    let (plane, client) = cluster().await;
    let api = databases(&client);
    api.create(&PostParams::default(), &orders_db())
        .await
        .expect("created");

    kubectl_ok(
        &plane,
        &["scale", "db", "orders-db", "-n", NAMESPACE, "--replicas=2"],
    )
    .await;
    let scaled = api.get("orders-db").await.expect("get");
    assert_eq!(scaled.data["spec"]["replicas"], 2);

    let scale = kubectl_ok(
        &plane,
        &[
            "get",
            "--raw",
            "/apis/mycompany.io/v1/namespaces/production/databases/orders-db/scale",
        ],
    )
    .await;
    let scale: Value = serde_json::from_str(&scale).expect("Scale JSON");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["spec"]["replicas"], 2);

    let err = kubectl_fails(
        &plane,
        &["scale", "db", "orders-db", "-n", NAMESPACE, "--replicas=9"],
    )
    .await;
    assert!(err.contains("spec.replicas"), "{err}");
}

#[tokio::test]
async fn status_is_only_written_through_the_status_subresource() {
    let (_plane, client) = cluster().await;
    let typed: Api<Database> = Api::namespaced(client.clone(), NAMESPACE);
    databases(&client)
        .create(&PostParams::default(), &orders_db())
        .await
        .expect("created");

    let mut db = typed.get("orders-db").await.expect("get");
    db.status = Some(DatabaseStatus {
        phase: Phase::Running,
        ready: true,
        replicas: 3,
        ..DatabaseStatus::default()
    });
    let replaced = typed
        .replace("orders-db", &PostParams::default(), &db)
        .await
        .expect("replace");
    assert_eq!(
        replaced.status, None,
        "the main resource ignored the status"
    );

    let patch = Patch::Merge(json!({"status": {"phase": "Running", "ready": true, "replicas": 3}}));
    let patched = typed
        .patch_status("orders-db", &PatchParams::default(), &patch)
        .await
        .expect("status patch");
    let status = patched.status.expect("status set");
    assert_eq!(
        (status.phase, status.ready, status.replicas),
        (Phase::Running, true, 3)
    );
}
