//! `webhook certs bootstrap` against a real kube-apiserver: it creates the Secret and
//! writes the caBundle, keeps a valid Secret on later runs, and replaces one that does
//! not fit.

use std::path::Path;

use database_webhook::certs::{self, BootstrapOptions, Bundle, Outcome, service_dns_names};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use testenv::{ControlPlane, Options};

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

async fn secret_bundle(secrets: &Api<Secret>) -> Bundle {
    let secret = secrets
        .get("webhook-server-cert")
        .await
        .expect("Secret exists");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let data = secret.data.expect("data");
    let text = |key: &str| String::from_utf8(data.get(key).expect(key).0.clone()).expect("PEM");
    Bundle {
        ca_pem: text("ca.crt"),
        cert_pem: text("tls.crt"),
        key_pem: text("tls.key"),
    }
}

async fn ca_bundles(client: &kube::Client) -> Vec<Vec<u8>> {
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let v = validating
        .get("validating-webhook")
        .await
        .expect("validating");
    let m = mutating.get("mutating-webhook").await.expect("mutating");
    let mut bundles: Vec<Vec<u8>> = Vec::new();
    for hook in v.webhooks.unwrap_or_default() {
        bundles.push(
            hook.client_config
                .ca_bundle
                .map(|b| b.0)
                .unwrap_or_default(),
        );
    }
    for hook in m.webhooks.unwrap_or_default() {
        bundles.push(
            hook.client_config
                .ca_bundle
                .map(|b| b.0)
                .unwrap_or_default(),
        );
    }
    bundles
}

#[tokio::test]
async fn bootstrap_creates_then_reuses_then_replaces_the_secret_and_writes_the_ca_bundle() {
    let plane = ControlPlane::start(Options::default())
        .await
        .expect("control plane");
    let client = plane.client().await.expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("ns"),
        )
        .await
        .expect("namespace");
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

    // The first run goes through the binary, as a Job would run it.
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
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);
    let created = secret_bundle(&secrets).await;
    let names = service_dns_names("database-webhook", NAMESPACE);
    assert_eq!(certs::check(&created, &names), Ok(()));
    assert_eq!(
        ca_bundles(&client).await,
        vec![created.ca_pem.as_bytes().to_vec(); 2]
    );

    // A second run keeps everything as it is.
    assert_eq!(
        certs::bootstrap(&client, &options())
            .await
            .expect("bootstrap"),
        Outcome::Reused
    );
    assert_eq!(secret_bundle(&secrets).await, created);

    // A Secret for another Service is replaced, and the configurations follow.
    let mut secret = secrets.get("webhook-server-cert").await.expect("secret");
    let other = certs::issue(&service_dns_names("other", "elsewhere")).expect("issue");
    secret
        .data
        .get_or_insert_with(Default::default)
        .insert("tls.crt".into(), ByteString(other.cert_pem.into_bytes()));
    secrets
        .replace("webhook-server-cert", &PostParams::default(), &secret)
        .await
        .expect("tampered");
    assert_eq!(
        certs::bootstrap(&client, &options())
            .await
            .expect("bootstrap"),
        Outcome::Replaced
    );
    let replaced = secret_bundle(&secrets).await;
    assert_ne!(replaced.ca_pem, created.ca_pem);
    assert_eq!(certs::check(&replaced, &names), Ok(()));
    assert_eq!(
        ca_bundles(&client).await,
        vec![replaced.ca_pem.as_bytes().to_vec(); 2]
    );
}
