//! `webhook certs bootstrap` against a real kube-apiserver: it creates the Secret and
//! writes the caBundle, writes nothing on later runs while nothing is due, reissues a
//! serving certificate that does not fit with the same CA, and replaces a CA that cannot
//! be kept while still trusting the old one for the overlap.

// The runs of bootstrap, each on what the last left, are one story, told in one function.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use database_webhook::certs::{self, BootstrapOptions, Outcome, State, Step, service_dns_names};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::Value;
use testenv::toolkit::Cluster;
use testenv::toolkit::cluster::webhook_ca_bundles;
use testenv::{ControlPlane, Options};
use time::OffsetDateTime;

const NAMESPACE: &str = "database-operator-system";

fn options() -> BootstrapOptions {
    BootstrapOptions {
        namespace: NAMESPACE.into(),
        service: "database-webhook".into(),
        secret: "webhook-server-cert".into(),
        validating_config: "validating-webhook".into(),
        mutating_config: "mutating-webhook".into(),
    }
}

fn manifest(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/webhook")
        .join(file);
    serde_saphyr::from_str(&std::fs::read_to_string(path).expect("manifest")).expect("YAML")
}

async fn stored(secrets: &Api<Secret>) -> State {
    let secret = secrets
        .get("webhook-server-cert")
        .await
        .expect("Secret exists");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    State::from_secret(&secret, OffsetDateTime::now_utc()).expect("a CA and a certificate")
}

/// The CAs (DER) in each webhook's caBundle, validating then mutating.
async fn ca_bundles(client: &kube::Client) -> Vec<Vec<Vec<u8>>> {
    webhook_ca_bundles(client, "validating-webhook", "mutating-webhook")
        .await
        .expect("both configurations")
        .iter()
        .map(|bundle| certs::ders(bundle))
        .collect()
}

fn unchanged() -> Outcome {
    Outcome {
        steps: Vec::new(),
        configurations_written: 0,
    }
}

/// A control plane with the namespace and both configurations of deploy/webhook.
async fn cluster_with_configurations() -> (ControlPlane, kube::Client) {
    let Cluster { plane, client, .. } = Cluster::start(Options::default(), &[], NAMESPACE).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    validating
        .create(
            &PostParams::default(),
            &serde_json::from_value(manifest("validating.yaml")).expect("config"),
        )
        .await
        .expect("validating configuration");
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    mutating
        .create(
            &PostParams::default(),
            &serde_json::from_value(manifest("mutating.yaml")).expect("config"),
        )
        .await
        .expect("mutating configuration");
    (plane, client)
}

/// `webhook certs bootstrap` through the binary, as the Job runs it.
async fn run_binary(plane: &ControlPlane) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_webhook"))
        .args([
            "--log-format",
            "plain",
            "certs",
            "bootstrap",
            "--namespace",
            NAMESPACE,
            "--service",
            "database-webhook",
            "--validating-config",
            "validating-webhook",
            "--mutating-config",
            "mutating-webhook",
        ])
        .env("KUBECONFIG", plane.kubeconfig())
        .output()
        .await
        .expect("webhook runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[tokio::test]
async fn bootstrap_creates_then_keeps_then_reissues_then_replaces_and_writes_the_ca_bundle() {
    let (plane, client) = cluster_with_configurations().await;
    run_binary(&plane).await;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let created = stored(&secrets).await;
    let names = service_dns_names("database-webhook", NAMESPACE);
    let now = OffsetDateTime::now_utc();
    assert_eq!(
        certs::check_serving(&created.ca.cert_pem, &created.serving, &names, now),
        Ok(())
    );
    assert!(
        created.ca.key_pem.is_some(),
        "the CA key is kept for renewals"
    );
    assert_eq!(
        ca_bundles(&client).await,
        vec![certs::ders(&created.ca.cert_pem); 2]
    );

    // A second run writes nothing.
    assert_eq!(
        certs::bootstrap(&client, &options())
            .await
            .expect("bootstrap"),
        unchanged()
    );
    assert_eq!(stored(&secrets).await, created);

    // A serving certificate for another Service is reissued by the same CA; the
    // configurations need no change.
    let other = certs::issue_serving(
        &created.ca,
        &service_dns_names("other", "elsewhere"),
        std::time::Duration::from_secs(3600),
        now,
    )
    .expect("issue");
    tamper(&secrets, "tls.crt", &other.cert_pem).await;
    let outcome = certs::bootstrap(&client, &options())
        .await
        .expect("bootstrap");
    assert!(
        matches!(&outcome.steps[..], [Step::ReissuedServing(_)]),
        "{outcome:?}"
    );
    assert_eq!(outcome.configurations_written, 0);
    let reissued = stored(&secrets).await;
    assert_eq!(reissued.ca, created.ca);
    assert_eq!(
        certs::check_serving(&reissued.ca.cert_pem, &reissued.serving, &names, now),
        Ok(())
    );

    // A CA that cannot be kept is replaced; the old one stays trusted (its certificate
    // may still be served) until a run after the overlap.
    tamper(&secrets, "ca.crt", &reissued.serving.cert_pem).await;
    let outcome = certs::bootstrap(&client, &options())
        .await
        .expect("bootstrap");
    assert!(
        matches!(&outcome.steps[..], [Step::ReplacedCa(why)] if why.contains("not a CA")),
        "{outcome:?}"
    );
    assert_eq!(outcome.configurations_written, 2);
    let replaced = stored(&secrets).await;
    assert_ne!(replaced.ca, created.ca);
    let both = [
        certs::ders(&replaced.ca.cert_pem),
        certs::ders(&created.ca.cert_pem),
    ]
    .concat();
    assert_eq!(ca_bundles(&client).await, vec![both; 2]);
    assert_eq!(
        certs::bootstrap(&client, &options())
            .await
            .expect("bootstrap"),
        unchanged(),
        "the overlap (an hour by default) has not passed"
    );
}

/// Overwrites one key of the Secret, as someone editing it by hand would.
async fn tamper(secrets: &Api<Secret>, key: &str, value: &str) {
    let mut secret = secrets.get("webhook-server-cert").await.expect("secret");
    secret
        .data
        .get_or_insert_with(Default::default)
        .insert(key.into(), ByteString(value.as_bytes().to_vec()));
    secrets
        .replace("webhook-server-cert", &PostParams::default(), &secret)
        .await
        .expect("tampered");
}
