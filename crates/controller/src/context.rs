//! What every reconcile shares: the client, settings, event publisher and metrics.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::Client;

use crate::events::{Publisher, Reporter};
use crate::metrics::Metrics;
use crate::replication::outage::Outages;
use crate::resources::BuildConfig;

/// Controller settings that are not part of any Database.
#[derive(Clone)]
pub struct Settings {
    pub build: BuildConfig,
    /// Largest `spec.storage` accepted, in GiB (the same limit the webhook enforces).
    pub max_storage_gi: u64,
    /// Called at the start of every reconcile; `None` in the binary. Fault tests use it
    /// to make a reconcile panic.
    pub before_reconcile: Option<ReconcileHook>,
}

/// A function run before each reconcile.
pub type ReconcileHook = Arc<dyn Fn(&database_api::Database) + Send + Sync>;

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("build", &self.build)
            .field("max_storage_gi", &self.max_storage_gi)
            .field("before_reconcile", &self.before_reconcile.is_some())
            .finish()
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            build: BuildConfig::default(),
            max_storage_gi: database_api::validation::Limits::default().max_storage_gi,
            before_reconcile: None,
        }
    }
}

/// Longest wait between retries of a failing Database.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Consecutive failures per Database, for exponential backoff.
#[derive(Default)]
pub struct Backoff(Mutex<HashMap<String, u32>>);

impl Backoff {
    pub fn failed(&self, key: &str) {
        if let Ok(mut map) = self.0.lock() {
            *map.entry(key.to_owned()).or_default() += 1;
        }
    }

    pub fn reset(&self, key: &str) {
        if let Ok(mut map) = self.0.lock() {
            map.remove(key);
        }
    }

    /// 1 s after the first failure, doubling up to [`MAX_BACKOFF`].
    pub fn delay(&self, key: &str) -> Duration {
        let failures = self
            .0
            .lock()
            .map_or(1, |m| m.get(key).copied().unwrap_or(1));
        let exponent = failures.saturating_sub(1).min(16);
        Duration::from_secs(1u64 << exponent).min(MAX_BACKOFF)
    }
}

pub struct Context {
    pub client: Client,
    /// A client on kube's own HTTP/1.1 stack, for `exec` (a WebSocket upgrade, which the
    /// HTTP/2 client cannot make); `None` when `client` can.
    pub exec: Option<Client>,
    pub backoff: Backoff,
    pub settings: Settings,
    pub events: Publisher,
    pub metrics: Arc<Metrics>,
    /// When each Database's primary was first seen not ready (see [`Outages`]).
    pub outages: Outages,
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
            backoff: Backoff::default(),
            outages: Outages::default(),
        }
    }
}

impl Context {
    /// The client to run commands in Pods with.
    pub fn exec_client(&self) -> &Client {
        self.exec.as_ref().unwrap_or(&self.client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_per_failure_up_to_the_cap_and_resets() {
        let backoff = Backoff::default();
        backoff.failed("a");
        assert_eq!(backoff.delay("a"), Duration::from_secs(1));
        backoff.failed("a");
        backoff.failed("a");
        assert_eq!(backoff.delay("a"), Duration::from_secs(4));
        for _ in 0..20 {
            backoff.failed("a");
        }
        assert_eq!(backoff.delay("a"), MAX_BACKOFF);
        backoff.reset("a");
        assert_eq!(backoff.delay("a"), Duration::from_secs(1));
        assert_eq!(backoff.delay("other"), Duration::from_secs(1));
    }
}
