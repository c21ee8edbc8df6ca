//! The webhook called by a real kube-apiserver through the configurations of
//! deploy/webhook: kubectl sees its denials, warnings and defaults.

mod common;

use common::cluster::{cluster_with_webhook, database, databases, kubectl};
use database_api::constants::labels;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

const MINIMAL: &str = "apiVersion: mycompany.io/v1
kind: Database
metadata:
  name: orders-db
  namespace: production
spec:
  engine: postgres
  version: \"16.4\"
  storage: 10Gi
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_applied_without_defaults_is_stored_with_them_and_the_engine_label() {
    let (plane, client, _webhook) = cluster_with_webhook().await;
    let (ok, stdout, stderr) = kubectl(&plane, &["apply", "-f", "-"], MINIMAL).await;
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("database.mycompany.io/orders-db created"),
        "{stdout}"
    );
    let stored = databases(&client).get("orders-db").await.expect("stored");
    assert_eq!(stored.data["spec"]["replicas"], 1);
    assert_eq!(stored.data["spec"]["deletionPolicy"], "Retain");
    // The CRD schema defaults the two spec fields as well; only the webhook's patch can
    // have added the label.
    assert_eq!(
        stored
            .metadata
            .labels
            .unwrap_or_default()
            .get(labels::NAME)
            .map(String::as_str),
        Some("postgres")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_database_is_denied_with_every_message_of_the_webhook() {
    let (plane, client, _webhook) = cluster_with_webhook().await;
    let invalid = MINIMAL
        .replace("\"16.4\"", "\"12\"")
        .replace("10Gi", "20000Gi")
        .replace("orders-db", &"a".repeat(53));
    let (ok, _, stderr) = kubectl(&plane, &["apply", "-f", "-"], &invalid).await;
    assert!(!ok, "accepted");
    assert!(stderr.contains("denied the request"), "{stderr}");
    for message in [
        "metadata.name: must be at most 52 characters",
        "spec.version: postgres 12 is not supported; supported series: 13, 14, 15, 16, 17, 18",
        "spec.storage: must be at most 16384Gi",
    ] {
        assert!(stderr.contains(message), "missing {message:?} in {stderr}");
    }
    let stored = databases(&client)
        .list(&kube::api::ListParams::default())
        .await
        .expect("list");
    assert!(stored.items.is_empty(), "an invalid Database was stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_reach_kubectl_stderr_and_the_database_is_created() {
    let (plane, _client, _webhook) = cluster_with_webhook().await;
    let replicated = MINIMAL
        .replace("postgres", "mongodb")
        .replace("\"16.4\"", "\"7.0\"")
        + "  replicas: 4\n";
    let (ok, stdout, stderr) = kubectl(&plane, &["apply", "-f", "-"], &replicated).await;
    assert!(ok, "{stderr}");
    assert!(stdout.contains("created"), "{stdout}");
    assert!(
        stderr.contains("Warning: spec.replicas is 4: the extra instances are independent"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Warning: spec.replicas is 4: an even number of mongodb members"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shrinking_storage_and_downgrading_a_major_version_are_refused_on_update() {
    let (plane, client, _webhook) = cluster_with_webhook().await;
    let api = databases(&client);
    api.create(
        &PostParams::default(),
        &database(
            "orders-db",
            &json!({"engine": "postgres", "version": "16.4", "storage": "100Gi"}),
        ),
    )
    .await
    .expect("created");

    let shrink = Patch::Merge(json!({"spec": {"storage": "50Gi"}}));
    let err = api
        .patch("orders-db", &PatchParams::default(), &shrink)
        .await
        .expect_err("storage may not shrink");
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err}")
    };
    assert!(
        status
            .message
            .contains("spec.storage: may not shrink (from 100Gi to 50Gi)"),
        "{}",
        status.message
    );

    let downgrade = Patch::Merge(json!({"spec": {"version": "15.8"}}));
    let err = api
        .patch("orders-db", &PatchParams::default(), &downgrade)
        .await
        .expect_err("no major downgrade");
    let kube::Error::Api(status) = err else {
        panic!("expected an API error, got {err}")
    };
    assert!(
        status
            .message
            .contains("spec.version: may not move back a major version (from 16.4 to 15.8)"),
        "{}",
        status.message
    );

    // Allowed changes go through, with the webhook's warning on kubectl's stderr.
    let (ok, _, stderr) = kubectl(
        &plane,
        &[
            "patch",
            "db",
            "orders-db",
            "-n",
            "production",
            "--type=merge",
            "-p",
            r#"{"spec":{"storage":"200Gi"}}"#,
        ],
        "",
    )
    .await;
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("Warning: spec.storage grows from 100Gi to 200Gi"),
        "{stderr}"
    );
    let stored = api.get("orders-db").await.expect("get");
    assert_eq!(stored.data["spec"]["storage"], "200Gi");
    assert_eq!(stored.data["spec"]["version"], "16.4");
}
