//! The webhook registered with a real kube-apiserver through the configurations of
//! deploy/webhook, for the tests of admission through the API server (with `mod common`,
//! which serves the webhook).

use std::path::Path;

use database_api::Database;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DynamicObject, PostParams};
use kube::{Client, CustomResourceExt as _};
use serde_json::{Value, json};
use testenv::toolkit::cluster::wait_for_webhooks;
use testenv::toolkit::{Cluster, fixtures};
use testenv::{ControlPlane, Options};

use crate::common::Webhook;

/// The namespace the tests create their Databases in.
pub const NAMESPACE: &str = "production";

/// The webhook configurations of deploy/webhook, with each clientConfig pointed at
/// `webhook` by URL and trusting its CA instead of the in-cluster Service.
pub fn configurations_for(webhook: &Webhook) -> [(Value, &'static str); 2] {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/webhook");
    let ca_bundle = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(webhook.ca.cert_pem())
    };
    ["validating.yaml", "mutating.yaml"].map(|file| {
        let yaml = std::fs::read_to_string(deploy.join(file)).expect("deploy manifest");
        let mut config: Value = serde_saphyr::from_str(&yaml).expect("YAML");
        for hook in config["webhooks"].as_array_mut().expect("webhooks") {
            let path = hook["clientConfig"]["service"]["path"]
                .as_str()
                .expect("service path")
                .to_owned();
            let url = format!("https://{}{path}", webhook.addr);
            hook["clientConfig"] = json!({"url": url, "caBundle": ca_bundle});
        }
        (config, file)
    })
}

/// A control plane with the Database CRD, the `production` namespace, a running webhook
/// and both webhook configurations of deploy/webhook registered and in effect.
pub async fn cluster_with_webhook() -> (ControlPlane, Client, Webhook) {
    let Cluster { plane, client, .. } =
        Cluster::start(Options::default(), &[Database::crd()], NAMESPACE).await;
    let webhook = Webhook::start();
    register(&client, &webhook).await;
    wait_for_webhooks(&client, NAMESPACE).await;
    (plane, client, webhook)
}

/// Creates both webhook configurations, pointed at `webhook`.
pub async fn register(client: &Client, webhook: &Webhook) {
    let post = PostParams::default();
    for (config, file) in configurations_for(webhook) {
        if file.starts_with("validating") {
            let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
            api.create(&post, &serde_json::from_value(config).expect("config"))
                .await
                .expect("validating configuration created");
        } else {
            let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
            api.create(&post, &serde_json::from_value(config).expect("config"))
                .await
                .expect("mutating configuration created");
        }
    }
}

/// The Database API in `production`, untyped, so that invalid objects reach the API
/// server.
pub fn databases(client: &Client) -> Api<DynamicObject> {
    fixtures::database_objects(client, NAMESPACE)
}
