//! A control plane with the CRDs installed and the controller running in-process.

use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;

use database_api::Database;
use database_api::backup::DatabaseBackup;
use database_controller::context::{Context, Settings};
use database_controller::metrics::Metrics;
use database_controller::runner::{Scope, run};
use futures::FutureExt;
use kube::{Client, CustomResourceExt};
use testenv::Options;
use testenv::toolkit::Cluster;
use testenv::toolkit::failover::Controller;

pub const NAMESPACE: &str = "shop";
/// The user the controller runs as, so the audit log can tell its writes apart.
pub const CONTROLLER_USER: &str = "database-controller";

/// What a test runs: the control plane's options and the controller's settings.
pub struct Setup {
    pub options: Options,
    pub settings: Settings,
}

impl From<Options> for Setup {
    fn from(options: Options) -> Self {
        Self {
            options,
            settings: Settings::default(),
        }
    }
}

/// The cluster of the test (its namespace [`NAMESPACE`]) and the controller running on
/// it; the cluster's reads and writes are the environment's.
pub struct Env {
    cluster: Cluster,
    pub metrics: Arc<Metrics>,
    settings: Settings,
    controller: Option<Running>,
}

struct Running {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Env {
    /// Starts the control plane, installs the CRDs, creates the namespace and starts the
    /// controller for every namespace.
    pub async fn start(setup: impl Into<Setup>) -> Self {
        let Setup { options, settings } = setup.into();
        // Controller logs in test output when asked for (RUST_LOG=...).
        if std::env::var_os("RUST_LOG").is_some() {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_test_writer()
                .try_init();
        }
        let crds = [Database::crd(), DatabaseBackup::crd()];
        let mut env = Self {
            cluster: Cluster::start(options, &crds, NAMESPACE).await,
            metrics: Arc::new(Metrics::default()),
            settings,
            controller: None,
        };
        env.start_controller(Scope::AllNamespaces).await;
        env
    }

    /// A client authenticated as the controller's own user (in system:masters); on an
    /// existing cluster, whose CA this side cannot sign with, the admin's.
    pub async fn controller_client(&self) -> Client {
        let kubeconfig = if self.plane.is_attached() {
            self.plane.kubeconfig().to_owned()
        } else {
            self.plane
                .kubeconfig_for(CONTROLLER_USER, &["system:masters"])
                .expect("kubeconfig")
        };
        testenv::client_from(&kubeconfig)
            .await
            .expect("controller client")
    }

    /// Starts the controller for `scope`, once the one running (if any) has stopped.
    pub async fn start_controller(&mut self, scope: Scope) {
        self.stop_controller().await;
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
}

impl Deref for Env {
    type Target = Cluster;

    fn deref(&self) -> &Cluster {
        &self.cluster
    }
}

impl DerefMut for Env {
    fn deref_mut(&mut self) -> &mut Cluster {
        &mut self.cluster
    }
}

impl Controller for Env {
    fn kill(&mut self) {
        self.kill_controller();
    }

    fn restart(&mut self) -> impl Future<Output = ()> {
        self.start_controller(Scope::AllNamespaces)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.kill_controller();
    }
}
