//! A control plane with the CRD installed and the controller running in-process.

#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use database_api::Database;
use database_api::backup::DatabaseBackup;
use database_controller::context::{Context, Settings};
use database_controller::metrics::Metrics;
use database_controller::runner::{Scope, run};
use futures::FutureExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::{Value, json};
use testenv::{ControlPlane, Options};

pub mod real;
pub mod store;

pub const NAMESPACE: &str = "shop";
/// The user the controller runs as, so the audit log can tell its writes apart.
pub const CONTROLLER_USER: &str = "database-controller";

pub struct Env {
    pub plane: ControlPlane,
    /// Admin client for the test's own reads and writes.
    pub client: Client,
    pub metrics: Arc<Metrics>,
    pub settings: Settings,
    controller: Option<Running>,
}

struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Env {
    pub async fn start(options: Options) -> Self {
        Self::start_with(options, Settings::default()).await
    }

    pub async fn start_with(options: Options, settings: Settings) -> Self {
        // Controller logs in test output when asked for (RUST_LOG=...).
        if std::env::var_os("RUST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_test_writer()
                .try_init();
        }
        let plane = ControlPlane::start(options)
            .await
            .expect("control plane starts");
        let client = plane.client().await.expect("admin client");
        for crd in [Database::crd(), DatabaseBackup::crd()] {
            testenv::install_crd(&client, &crd)
                .await
                .expect("CRD installed");
        }
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let ns =
            serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("namespace");
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .expect("namespace created");
        let mut env = Self {
            plane,
            client,
            metrics: Arc::new(Metrics::default()),
            settings,
            controller: None,
        };
        env.start_controller().await;
        env
    }

    /// A client authenticated as the controller's own user (in system:masters).
    pub async fn controller_client(&self) -> Client {
        let kubeconfig = self
            .plane
            .kubeconfig_for(CONTROLLER_USER, &["system:masters"])
            .expect("kubeconfig");
        testenv::client_from(&kubeconfig)
            .await
            .expect("controller client")
    }

    pub async fn start_controller(&mut self) {
        self.start_controller_scoped(Scope::AllNamespaces).await;
    }

    pub async fn start_controller_in(&mut self, namespaces: Vec<String>) {
        self.start_controller_scoped(Scope::Namespaces(namespaces))
            .await;
    }

    async fn start_controller_scoped(&mut self, scope: Scope) {
        let client = self.controller_client().await;
        let ctx = Arc::new(Context::new(
            client,
            self.settings.clone(),
            self.metrics.clone(),
            Some("test".into()),
        ));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let shutdown = stopped.map(|_| ()).shared();
        let task = tokio::spawn(run(ctx, scope, 4, shutdown));
        self.controller = Some(Running {
            stop: Some(stop),
            task,
        });
    }

    /// Ends the controller at once, as SIGKILL would: nothing it had in flight finishes.
    pub fn kill_controller(&mut self) {
        if let Some(running) = self.controller.take() {
            running.task.abort();
        }
    }

    /// Stops the controller gracefully and waits for it.
    pub async fn stop_controller(&mut self) {
        if let Some(mut running) = self.controller.take() {
            if let Some(stop) = running.stop.take() {
                let _ = stop.send(());
            }
            let _ = tokio::time::timeout(Duration::from_secs(10), running.task).await;
        }
    }

    pub fn databases(&self) -> Api<Database> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    pub async fn create(&self, name: &str, spec: Value) -> Database {
        let db: Database = serde_json::from_value(json!({
            "apiVersion": "mycompany.io/v1", "kind": "Database",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": spec,
        }))
        .expect("Database");
        self.databases()
            .create(&PostParams::default(), &db)
            .await
            .expect("created")
    }

    /// Writes by the controller's user recorded in the audit log so far.
    pub fn controller_writes(&self) -> Vec<String> {
        self.plane.request_lines_by(CONTROLLER_USER)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if let Some(running) = self.controller.take() {
            running.task.abort();
        }
    }
}

/// The events about object `kind`/`name` in the test namespace: (type, reason, note).
pub async fn events_of(env: &Env, kind: &str, name: &str) -> Vec<(String, String, String)> {
    let events: Api<k8s_openapi::api::events::v1::Event> = env.api();
    events
        .list(&kube::api::ListParams::default())
        .await
        .map(|list| list.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| {
            e.regarding
                .as_ref()
                .is_some_and(|r| r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name))
        })
        .map(|e| {
            (
                e.type_.unwrap_or_default(),
                e.reason.unwrap_or_default(),
                e.note.unwrap_or_default(),
            )
        })
        .collect()
}

/// Polls `check` every 100 ms until it returns `Some`, failing after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub const WAIT: Duration = Duration::from_secs(30);

/// Waits until StatefulSet `name` asks for `replicas` instances, and returns it.
pub async fn statefulset_with_replicas(
    sets: &Api<StatefulSet>,
    name: &str,
    replicas: i32,
    timeout: Duration,
) -> StatefulSet {
    let what = format!("StatefulSet {name} with {replicas} replicas");
    eventually(timeout, &what, || async {
        sets.get(name)
            .await
            .ok()
            .filter(|s| s.spec.as_ref().and_then(|s| s.replicas) == Some(replicas))
    })
    .await
}
