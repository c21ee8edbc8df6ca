//! Prometheus metrics of the controller, served on `/metrics` in OpenMetrics text.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub use operator_runtime::metrics::QueueMetrics;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// `ok` or `error`.
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ErrorLabels {
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DatabaseLabels {
    pub namespace: String,
    pub database: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    /// What was written: `apply`, `status`, `finalizer`, `delete`, `create`.
    pub action: &'static str,
}

pub struct Metrics {
    pub registry: Registry,
    pub reconciles: Family<ResultLabels, Counter>,
    pub errors: Family<ErrorLabels, Counter>,
    pub writes: Family<WriteLabels, Counter>,
    pub duration: Family<ResultLabels, Histogram>,
    pub leader: Gauge,
    pub queue: QueueMetrics,
    pub backup_failures: Family<DatabaseLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("database_controller");
        let reconciles = Family::<ResultLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let writes = Family::<WriteLabels, Counter>::default();
        let duration = Family::<ResultLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ])
        });
        let leader = Gauge::default();
        registry.register("reconciles", "Reconciles by result", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Failed reconciles by error kind",
            errors.clone(),
        );
        registry.register(
            "writes",
            "Write calls to the API server by action",
            writes.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Reconcile duration by result",
            duration.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease",
            leader.clone(),
        );
        let queue = QueueMetrics::default();
        registry.register(
            "queue_depth",
            "Databases due for a reconcile and waiting for a worker",
            queue.depth.clone(),
        );
        registry.register(
            "queue_wait_seconds",
            "Time from a Database falling due to its reconcile starting",
            queue.wait.clone(),
        );
        let backup_failures = Family::<DatabaseLabels, Counter>::default();
        registry.register(
            "backup_failures",
            "Backups that failed, by Database",
            backup_failures.clone(),
        );
        Self {
            registry,
            reconciles,
            errors,
            writes,
            duration,
            leader,
            queue,
            backup_failures,
        }
    }
}

impl Metrics {
    /// Counts one write call.
    pub fn wrote(&self, action: &'static str) {
        self.writes.get_or_create(&WriteLabels { action }).inc();
    }

    /// Counts one failed backup of a Database.
    pub fn backup_failed(&self, namespace: &str, database: &str) {
        self.backup_failures
            .get_or_create(&DatabaseLabels {
                namespace: namespace.to_owned(),
                database: database.to_owned(),
            })
            .inc();
    }

    /// The metrics in OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Encoding into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_writes_show_in_the_encoded_text() {
        let metrics = Metrics::default();
        metrics.wrote("apply");
        metrics.wrote("apply");
        let text = metrics.encode();
        assert!(
            text.contains("database_controller_writes_total{action=\"apply\"} 2"),
            "{text}"
        );
    }

    #[test]
    fn failed_backups_are_counted_per_database() {
        let metrics = Metrics::default();
        metrics.backup_failed("shop", "orders");
        let text = metrics.encode();
        assert!(
            text.contains(
                "database_controller_backup_failures_total{namespace=\"shop\",database=\"orders\"} 1"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_work_queue_shows_in_the_encoded_text() {
        let metrics = Metrics::default();
        metrics.queue.depth.set(3);
        metrics.queue.wait.observe(0.002);
        let text = metrics.encode();
        assert!(text.contains("database_controller_queue_depth 3"), "{text}");
        assert!(
            text.contains("database_controller_queue_wait_seconds_count 1"),
            "{text}"
        );
    }
}
