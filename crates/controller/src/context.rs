//! What every reconcile shares: the client, settings, event publisher and metrics.

use std::sync::{Arc, Mutex};

use database_api::backup::DatabaseBackup;
use kube::Client;
use kube::runtime::reflector::Store;

use crate::metrics::Metrics;
use crate::objects::ledger::Ledger;
use crate::reconcile::status_writes::StatusWrites;
use crate::replication::outage::Outages;
use crate::resources::BuildConfig;
use k8s_openapi::api::core::v1::ObjectReference;
use operator_runtime::events::{Notice, Publisher, Reporter};

/// Controller settings that are not part of any Database.
#[derive(Clone)]
pub struct Settings {
    pub build: BuildConfig,
    /// Largest `spec.storage` accepted, in GiB (the same limit the webhook enforces).
    pub max_storage_gi: u64,
    /// Called at the start of every reconcile; `None` in the binary. Fault tests use it
    /// to make a reconcile panic.
    pub before_reconcile: Option<ReconcileHook>,
    /// The image backup and restore Jobs run the backup agent from (the operator's
    /// own); `None` when it is not known, and then backups fail saying so.
    pub backup_agent_image: Option<String>,
}

/// A function run before each reconcile.
pub type ReconcileHook = Arc<dyn Fn(&database_api::Database) + Send + Sync>;

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("build", &self.build)
            .field("max_storage_gi", &self.max_storage_gi)
            .field("before_reconcile", &self.before_reconcile.is_some())
            .field("backup_agent_image", &self.backup_agent_image)
            .finish()
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            build: BuildConfig::default(),
            max_storage_gi: database_api::validation::Limits::default().max_storage_gi,
            before_reconcile: None,
            backup_agent_image: None,
        }
    }
}

pub struct Context {
    pub client: Client,
    /// A client on kube's own HTTP/1.1 stack, for `exec` (a WebSocket upgrade, which the
    /// HTTP/2 client cannot make); `None` when `client` can.
    pub exec: Option<Client>,
    pub settings: Settings,
    pub events: Publisher,
    pub metrics: Arc<Metrics>,
    /// When each Database's primary was first seen not ready (see [`Outages`]).
    pub outages: Outages,
    /// What the owned objects' watches and the passes know of each owned object
    /// (see [`Ledger`]); empty, and so never consulted, where no watch runs.
    pub ledger: Arc<Ledger>,
    /// The status writes the Database cache has not caught up with (see
    /// [`StatusWrites`]).
    pub status_writes: StatusWrites,
    /// The caches of DatabaseBackups the backup watches keep (one per watched
    /// namespace, or one for all), which a Database's reconcile reads its backups from.
    backups: Mutex<Vec<Store<DatabaseBackup>>>,
}

impl Context {
    pub fn new(
        client: Client,
        settings: Settings,
        metrics: Arc<Metrics>,
        instance: Option<String>,
    ) -> Self {
        let controller = database_api::constants::FIELD_MANAGER.to_owned();
        let reporter = Reporter {
            instance: instance.unwrap_or_else(|| controller.clone()),
            controller,
        };
        Self {
            events: Publisher::new(client.clone(), reporter),
            exec: None,
            client,
            settings,
            metrics,
            outages: Outages::default(),
            ledger: Arc::default(),
            status_writes: StatusWrites::default(),
            backups: Mutex::default(),
        }
    }

    /// Keeps a cache of DatabaseBackups for [`Context::backups_of`].
    pub fn remember_backups(&self, store: Store<DatabaseBackup>) {
        if let Ok(mut stores) = self.backups.lock() {
            stores.push(store);
        }
    }

    /// The cached DatabaseBackups of the Database `namespace/name`; `None` when no
    /// watch keeps a cache (a test driving the reconcile alone).
    pub fn backups_of(&self, namespace: &str, name: &str) -> Option<Vec<DatabaseBackup>> {
        let stores = self.backups.lock().ok()?;
        if stores.is_empty() {
            return None;
        }
        Some(
            stores
                .iter()
                .flat_map(Store::state)
                .filter(|b| {
                    b.spec.database == name && b.metadata.namespace.as_deref() == Some(namespace)
                })
                .map(|b| (*b).clone())
                .collect(),
        )
    }
}

impl Context {
    /// Publishes an event about `regarding`; a failure to record one never fails the
    /// pass that tells it.
    pub async fn tell(&self, regarding: &ObjectReference, notice: &Notice) {
        match self.events.publish(notice, regarding).await {
            Ok(()) => self.metrics.wrote("event"),
            Err(err) => tracing::debug!(error = %err, "could not publish event"),
        }
    }

    /// The client to run commands in Pods with.
    pub fn exec_client(&self) -> &Client {
        self.exec.as_ref().unwrap_or(&self.client)
    }
}
