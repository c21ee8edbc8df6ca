//! The webhook called by a real kube-apiserver through the configurations of
//! deploy/webhook: kubectl sees its denials, warnings and defaults, on the Database and
//! through its scale subresource.

// Each request and the API server's answer are one scenario, told in one function.
#![allow(clippy::too_many_lines)]

mod cluster;
mod common;

use cluster::{cluster_with_webhook, databases};
use database_api::constants::labels;
use http_body_util::BodyExt as _;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testenv::toolkit::fixtures::database_object;
use testenv::toolkit::kubectl::kubectl;
use testenv::toolkit::refusal::refused;

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
    assert!(!stderr.contains("independent"), "{stderr}");
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
        &database_object(
            "orders-db",
            &json!({"engine": "postgres", "version": "16.4", "storage": "100Gi"}),
        ),
    )
    .await
    .expect("created");

    let shrink = Patch::Merge(json!({"spec": {"storage": "50Gi"}}));
    let smaller = api
        .patch("orders-db", &PatchParams::default(), &shrink)
        .await;
    refused(
        smaller,
        "storage may not shrink",
        &["spec.storage: may not shrink (from 100Gi to 50Gi)"],
    );

    let downgrade = Patch::Merge(json!({"spec": {"version": "15.8"}}));
    let downgraded = api
        .patch("orders-db", &PatchParams::default(), &downgrade)
        .await;
    refused(
        downgraded,
        "no major downgrade",
        &["spec.version: may not move back from 16.4 to 15.8"],
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

/// Sends a request kube's `patch_scale` or `replace_scale` built, itself, so that the
/// `Warning` headers the API server relays from the webhook can be read (kube's `Api`
/// drops response headers). Returns the status code, the warnings and the body.
async fn send_for_warnings(
    client: &kube::Client,
    request: Result<axum::http::Request<Vec<u8>>, kube::core::request::Error>,
) -> (u16, Vec<String>, Value) {
    let request = request.expect("request").map(kube::client::Body::from);
    let response = client.send(request).await.expect("answered");
    let status = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|value| value.to_str().unwrap_or_default().to_owned())
        .collect();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (
        status,
        warnings,
        serde_json::from_slice(&body).unwrap_or(Value::Null),
    )
}

fn scale_requests(client: &kube::Client) -> kube::core::Request {
    kube::core::Request::new(databases(client).resource_url())
}

/// `kubectl scale db NAME --replicas=N`: whether it succeeded, and its stderr.
async fn kubectl_scale(plane: &testenv::ControlPlane, name: &str, replicas: i32) -> (bool, String) {
    let replicas = format!("--replicas={replicas}");
    let (ok, _, stderr) = kubectl(
        plane,
        &["scale", "db", name, "-n", "production", &replicas],
        "",
    )
    .await;
    (ok, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_scale_and_scale_patches_and_puts_reach_the_webhook_and_carry_its_warnings() {
    let (plane, client, _webhook) = cluster_with_webhook().await;
    let api = databases(&client);
    // Once the controller has reported the selector (written here as it would), the
    // Scale names the engine, and mongodb's warning about even member counts comes.
    api.create(
        &PostParams::default(),
        &database_object(
            "events-db",
            &json!({"engine": "mongodb", "version": "7.0", "storage": "10Gi"}),
        ),
    )
    .await
    .expect("created");
    api.patch_status(
        "events-db",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "selector": "app.kubernetes.io/instance=events-db,app.kubernetes.io/name=mongodb"
        }})),
    )
    .await
    .expect("status written");
    let (ok, stderr) = kubectl_scale(&plane, "events-db", 3).await;
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("Warning"), "an odd count: {stderr}");
    let (ok, stderr) = kubectl_scale(&plane, "events-db", 2).await;
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("independent"), "{stderr}");
    assert!(
        stderr.contains("Warning: spec.replicas is 2: an even number of mongodb members"),
        "{stderr}"
    );

    // The PATCH kube's patch_scale sends.
    let patch = Patch::Merge(json!({"spec": {"replicas": 4}}));
    let (status, warnings, body) = send_for_warnings(
        &client,
        scale_requests(&client).patch_subresource(
            "scale",
            "events-db",
            &PatchParams::default(),
            &patch,
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        warnings.iter().any(|w| w.contains("spec.replicas is 4:")),
        "{warnings:?}"
    );

    // The PUT kube's replace_scale sends, of the Scale just read.
    let mut scale = api.get_scale("events-db").await.expect("scale");
    scale.spec.get_or_insert_default().replicas = Some(2);
    let (status, warnings, body) = send_for_warnings(
        &client,
        scale_requests(&client).replace_subresource(
            "scale",
            "events-db",
            &PostParams::default(),
            serde_json::to_vec(&scale).expect("json"),
        ),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        warnings.iter().any(|w| w.contains("spec.replicas is 2:")),
        "{warnings:?}"
    );
    let stored = api.get("events-db").await.expect("get");
    assert_eq!(stored.data["spec"]["replicas"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scale_out_of_bounds_is_refused_naming_spec_replicas_and_changes_nothing() {
    let (plane, client, _webhook) = cluster_with_webhook().await;
    let api = databases(&client);
    api.create(
        &PostParams::default(),
        &database_object(
            "orders-db",
            &json!({"engine": "postgres", "version": "16.4", "storage": "10Gi"}),
        ),
    )
    .await
    .expect("created");

    let too_many = Patch::Merge(json!({"spec": {"replicas": 6}}));
    let scaled = api
        .patch_scale("orders-db", &PatchParams::default(), &too_many)
        .await;
    refused(scaled, "6 replicas are refused", &["spec.replicas"]);

    let mut scale = api.get_scale("orders-db").await.expect("scale");
    scale.spec.get_or_insert_default().replicas = Some(0);
    let scaled = api
        .replace_scale("orders-db", &PostParams::default(), &scale)
        .await;
    refused(scaled, "0 replicas are refused", &["spec.replicas"]);

    let (ok, stderr) = kubectl_scale(&plane, "orders-db", 7).await;
    assert!(!ok, "7 replicas were accepted");
    assert!(stderr.contains("spec.replicas"), "{stderr}");

    let stored = api.get("orders-db").await.expect("get");
    assert_eq!(stored.data["spec"]["replicas"], 1);
}
