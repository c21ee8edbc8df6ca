//! The pieces every benchmark shares: a control plane with the CRD, the controller as
//! its own process (so its memory and CPU are its own), and Database creation.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use database_api::Database;
use database_api::backup::DatabaseBackup;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Client, CustomResourceExt, ResourceExt};
use serde_json::json;
use testenv::process::Process;
use testenv::{ControlPlane, Options, free_port};

pub const NAMESPACE: &str = "bench";
pub const CONTROLLER_USER: &str = "database-controller";

pub struct Bench {
    pub plane: ControlPlane,
    pub client: Client,
    pub metrics_port: u16,
}

impl Bench {
    pub async fn start(options: Options) -> anyhow::Result<Self> {
        let plane = ControlPlane::start(options).await?;
        let client = plane.client().await?;
        for crd in [Database::crd(), DatabaseBackup::crd()] {
            testenv::install_crd(&client, &crd).await?;
        }
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?,
            )
            .await?;
        Ok(Self {
            plane,
            client,
            metrics_port: free_port()?,
        })
    }

    /// Starts the controller binary from `bin_dir` with settings tuned for load.
    pub fn spawn_controller(&self, bin_dir: &Path) -> anyhow::Result<Process> {
        let kubeconfig = self
            .plane
            .kubeconfig_for(CONTROLLER_USER, &["system:masters"])?;
        let args = vec![
            format!("--kubeconfig={}", kubeconfig.display()),
            format!("--metrics-bind-address=127.0.0.1:{}", self.metrics_port),
            format!("--health-probe-bind-address=127.0.0.1:{}", free_port()?),
            "--log-format=plain".to_owned(),
            "--kube-api-qps=1000".to_owned(),
            "--kube-api-burst=2000".to_owned(),
            "--max-concurrent-reconciles=16".to_owned(),
            format!("--backup-agent-image={}", testenv::images::OPERATOR_IMAGE),
        ];
        Ok(Process::spawn(
            "controller",
            &bin_dir.join("controller"),
            &args,
            self.plane.dir(),
        )?)
    }

    /// A counter from the controller's /metrics, summed over its labels.
    pub async fn metric(&self, name: &str) -> Option<f64> {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.metrics_port))
            .await
            .ok()?;
        let request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
            .await
            .ok()?;
        let mut body = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut stream, &mut body)
            .await
            .ok()?;
        let total = body
            .lines()
            .filter(|l| l.starts_with(name) && !l.starts_with('#'))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        Some(total)
    }

    pub fn databases(&self) -> Api<Database> {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    /// Creates `count` Databases named `<prefix>-<i>`, `parallel` at a time; returns each
    /// one's create time (when the API server answered) and the call's latency.
    pub async fn create_many(
        &self,
        prefix: &str,
        count: usize,
        parallel: usize,
    ) -> anyhow::Result<Vec<(String, Instant, Duration)>> {
        let api = self.databases();
        futures::stream::iter(0..count)
            .map(|i| {
                let api = api.clone();
                async move {
                    let name = format!("{prefix}-{i}");
                    let db: Database = serde_json::from_value(json!({
                        "apiVersion": "mycompany.io/v1", "kind": "Database",
                        "metadata": {"name": name},
                        "spec": {"engine": "postgres", "version": "16.4", "storage": "1Gi"},
                    }))?;
                    let sent = Instant::now();
                    api.create(&PostParams::default(), &db)
                        .await
                        .with_context(|| format!("creating {name}"))?;
                    Ok::<_, anyhow::Error>((name, Instant::now(), sent.elapsed()))
                }
            })
            .buffer_unordered(parallel)
            .try_collect()
            .await
    }

    /// Writes by the controller's user in the audit log.
    pub fn controller_writes(&self) -> usize {
        self.plane
            .requests_by(CONTROLLER_USER)
            .iter()
            .filter(|e| {
                matches!(
                    e["verb"].as_str(),
                    Some("create" | "update" | "patch" | "delete" | "deletecollection")
                )
            })
            .count()
    }

    /// The controller's requests the audit log holds so far (writes, or every request
    /// with a full audit log) by `<verb> <resource>[/<subresource>]`.
    pub fn controller_writes_by_request(&self) -> std::collections::BTreeMap<String, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for event in self.plane.requests_by(CONTROLLER_USER) {
            *counts.entry(request_of(&event)).or_insert(0) += 1;
        }
        counts
    }
}

/// An audit event's request as `<verb> <resource>[/<subresource>]`.
pub fn request_of(event: &serde_json::Value) -> String {
    let object = &event["objectRef"];
    let mut resource = object["resource"].as_str().unwrap_or("?").to_owned();
    if let Some(sub) = object["subresource"].as_str() {
        resource = format!("{resource}/{sub}");
    }
    let verb = event["verb"].as_str().unwrap_or("?");
    format!("{verb} {resource}")
}

/// Marks every StatefulSet's Pods ready by writing its status, standing in for
/// kube-controller-manager and kubelets where thousands of Pods would not fit.
pub async fn fake_readiness(client: Client) {
    let sets: Api<StatefulSet> = Api::namespaced(client, NAMESPACE);
    let stream = watcher(sets.clone(), watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream.applied_objects());
    // A watch error (e.g. 410 Gone under load) is retried by the backoff; the loop
    // goes on.
    while let Some(item) = stream.next().await {
        let Ok(set) = item else { continue };
        let replicas = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let generation = set.metadata.generation;
        let status = set.status.as_ref();
        if status.and_then(|s| s.ready_replicas) == Some(replicas)
            && status.and_then(|s| s.observed_generation) == generation
        {
            continue;
        }
        let body = json!({"status": {"replicas": replicas, "readyReplicas": replicas, "currentReplicas": replicas,
            "updatedReplicas": replicas, "availableReplicas": replicas, "observedGeneration": generation}});
        let _ = sets
            .patch_status(
                &set.name_any(),
                &PatchParams::default(),
                &Patch::Merge(&body),
            )
            .await;
    }
}

pub async fn wait_until<F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while !check().await {
        if Instant::now() > deadline {
            bail!("{what} did not happen within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}
