//! The webhook registered with a real kube-apiserver through the configurations of
//! deploy/webhook, and the helpers the acceptance tests drive it with.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::Webhook;

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
            hook["clientConfig"] =
                serde_json::json!({"url": webhook.url(&path), "caBundle": ca_bundle});
        }
        (config, file)
    })
}

/// A control plane with the Database CRD, the `production` namespace, a running webhook
/// and both webhook configurations of deploy/webhook registered and in effect.
pub async fn cluster_with_webhook() -> (testenv::ControlPlane, kube::Client, Webhook) {
    use kube::CustomResourceExt as _;
    let plane = testenv::ControlPlane::start(testenv::Options::default())
        .await
        .expect("control plane starts");
    let client = plane.client().await.expect("admin client");
    testenv::install_crd(&client, &database_api::Database::crd())
        .await
        .expect("CRD Established");
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(client.clone());
    namespaces
        .create(
            &kube::api::PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "production"}}))
                .expect("namespace"),
        )
        .await
        .expect("namespace created");
    let webhook = Webhook::start();
    register(&client, &webhook).await;
    wait_until_in_effect(&client).await;
    (plane, client, webhook)
}

/// Creates both webhook configurations, pointed at `webhook`.
pub async fn register(client: &kube::Client, webhook: &Webhook) {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    let post = kube::api::PostParams::default();
    for (config, file) in configurations_for(webhook) {
        if file.starts_with("validating") {
            let api: kube::Api<ValidatingWebhookConfiguration> = kube::Api::all(client.clone());
            api.create(&post, &serde_json::from_value(config).expect("config"))
                .await
                .expect("validating configuration created");
        } else {
            let api: kube::Api<MutatingWebhookConfiguration> = kube::Api::all(client.clone());
            api.create(&post, &serde_json::from_value(config).expect("config"))
                .await
                .expect("mutating configuration created");
        }
    }
}

/// The Database API in `production`.
pub fn databases(client: &kube::Client) -> kube::Api<kube::api::DynamicObject> {
    kube::Api::namespaced_with(
        client.clone(),
        "production",
        &kube::api::ApiResource::erase::<database_api::Database>(&()),
    )
}

/// A Database object named `name` with `spec`.
pub fn database(name: &str, spec: &Value) -> kube::api::DynamicObject {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "mycompany.io/v1", "kind": "Database",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("a Database")
}

/// The API server learns about webhook configurations through an informer: dry-run
/// creates are retried until both webhooks act (a denial from the validating one, the
/// label from the mutating one). Dry runs leave nothing behind.
pub async fn wait_until_in_effect(client: &kube::Client) {
    let api = databases(client);
    let dry_run = kube::api::PostParams {
        dry_run: true,
        ..Default::default()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let invalid = database(
            "probe",
            &serde_json::json!({"engine": "postgres", "version": "12", "storage": "1Gi"}),
        );
        let denied = matches!(
            api.create(&dry_run, &invalid).await,
            Err(kube::Error::Api(status)) if status.message.contains("postgres 12 is not supported")
        );
        let valid = database(
            "probe",
            &serde_json::json!({"engine": "postgres", "version": "16", "storage": "1Gi"}),
        );
        let labelled = api.create(&dry_run, &valid).await.is_ok_and(|created| {
            created
                .metadata
                .labels
                .unwrap_or_default()
                .contains_key(database_api::constants::labels::NAME)
        });
        if denied && labelled {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the webhooks did not take effect (denied: {denied}, labelled: {labelled})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Runs kubectl with `args` and `stdin`, returning (success, stdout, stderr). tokio's
/// Command keeps the test's runtime, and so the webhook, running meanwhile.
pub async fn kubectl(
    plane: &testenv::ControlPlane,
    args: &[&str],
    stdin: &str,
) -> (bool, String, String) {
    use tokio::io::AsyncWriteExt as _;
    let mut command = tokio::process::Command::from(plane.kubectl().expect("kubectl"));
    command
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().expect("kubectl starts");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).await.expect("stdin");
    }
    let output = child.wait_with_output().await.expect("kubectl runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
