//! The controller's metrics served as `deploy/components/metrics-secure` serves them,
//! against a real API server: HTTPS only, a caller without a token gets 401, one whose
//! ServiceAccount lacks the `metrics-reader` ClusterRole 403, one bound to it the
//! metrics; and the controller's ServiceAccount needs no more than the component's
//! `metrics-auth` ClusterRole to ask.

use std::path::Path;
use std::sync::Arc;

use database_controller::metrics::Metrics;
use database_controller::metrics_server::access::Gate;
use database_controller::metrics_server::{Serving, serve};
use e2e::workspace_root;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use testenv::https::TlsClient;
use testenv::toolkit::Cluster;
use testenv::toolkit::cluster::{create_object, service_account_token};
use testenv::{Options, TestCa, client_from};

const NAMESPACE: &str = "operator";

/// The component's RBAC objects, bound to ServiceAccounts of the test's namespace.
fn component_rbac() -> Vec<Value> {
    let dir = workspace_root().join("deploy/components/metrics-secure");
    ["metrics_auth_role.yaml", "metrics_reader_role.yaml"]
        .iter()
        .flat_map(|file| {
            let text = std::fs::read_to_string(dir.join(file)).expect("component file");
            serde_saphyr::from_multiple::<Value>(&text).expect("YAML")
        })
        .map(|mut object| {
            if let Some(subjects) = object["subjects"].as_array_mut() {
                for subject in subjects {
                    subject["namespace"] = json!(NAMESPACE);
                }
            }
            object
        })
        .collect()
}

async fn create_service_accounts(cluster: &Cluster, names: &[&str]) {
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), NAMESPACE);
    for name in names {
        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": name}})).expect("account");
        accounts
            .create(&PostParams::default(), &account)
            .await
            .expect("ServiceAccount created");
    }
}

async fn get(client: &TlsClient, port: u16, token: Option<&str>) -> (u16, String) {
    let mut connection = client
        .connect(([127, 0, 0, 1], port).into())
        .await
        .expect("TLS handshake");
    let (status, body) = connection.get("/metrics", token).await.expect("answer");
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn only_a_metrics_reader_gets_the_metrics_over_https() {
    let cluster = Cluster::start(Options::default(), &[], NAMESPACE).await;
    for object in component_rbac() {
        create_object(&cluster.client, &object).await;
    }
    create_service_accounts(&cluster, &["controller", "prometheus", "intruder"]).await;
    create_object(
        &cluster.client,
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "prometheus-reads-metrics"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": NAMESPACE}],
        }),
    )
    .await;
    let token = |name: &'static str| service_account_token(&cluster.plane, NAMESPACE, name);
    let (controller, prometheus, intruder) = (
        token("controller").await,
        token("prometheus").await,
        token("intruder").await,
    );
    let as_controller = cluster
        .plane
        .kubeconfig_for_token("controller", &controller)
        .expect("kubeconfig");
    let gate = Gate::new(client_from(&as_controller).await.expect("client"));

    let (ca, port, _certs) = serve_securely(gate);

    let client = TlsClient::with_versions(ca.cert_pem(), &[&rustls::version::TLS12])
        .expect("TLS 1.2 client");
    let (status, body) = get(&client, port, None).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = get(&client, port, Some("not-a-token")).await;
    assert_eq!(status, 401, "{body}");
    let (status, body) = get(&client, port, Some(&intruder)).await;
    assert_eq!(status, 403, "{body}");
    assert!(
        body.contains("system:serviceaccount:operator:intruder"),
        "{body}"
    );
    let (status, body) = get(&client, port, Some(&prometheus)).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("workqueue_depth"), "{body}");
    // Asked again within seconds, the decision is reused, and still right.
    let (status, _) = get(&client, port, Some(&intruder)).await;
    assert_eq!(status, 403);
}

/// Serves fresh metrics over HTTPS with a certificate of a new CA, reading allowed by
/// `gate`: the CA, the port, and the certificate folder (deleted when dropped).
fn serve_securely(gate: Gate) -> (TestCa, u16, tempfile::TempDir) {
    let ca = TestCa::new("metrics CA").expect("CA");
    let serving = ca.issue_server(&["127.0.0.1"]).expect("certificate");
    let dir = tempfile::tempdir().expect("temp dir");
    write(dir.path(), "tls.crt", &serving.cert_pem);
    write(dir.path(), "tls.key", &serving.key_pem);
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let secure = Serving::Secure {
        cert_dir: Some(dir.path().to_owned()),
        gate: Arc::new(gate),
    };
    serve(
        listener,
        Arc::new(Metrics::default()),
        secure,
        std::future::pending(),
    )
    .expect("serving");

    (ca, port, dir)
}

fn write(dir: &Path, name: &str, contents: &str) {
    std::fs::write(dir.join(name), contents).expect("write");
}
