//! Prometheus metrics of the controller, served on `/metrics` in OpenMetrics text.

use std::borrow::Cow;

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

/// The controller's name in the `workqueue_*` metrics' `name` and `controller` labels.
pub const CONTROLLER_NAME: &str = "database";

pub struct Metrics {
    /// Unprefixed: the controller's own metrics sit in a `database_controller_`
    /// sub-registry, and the `workqueue_*` ones keep client-go's names.
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
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("database_controller");
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
        register_queue(registry, &queue);
        let backup_failures = Family::<DatabaseLabels, Counter>::default();
        registry.register(
            "backup_failures",
            "Backups that failed, by Database",
            backup_failures.clone(),
        );
        register_workqueue(&mut root, &queue);
        Self {
            registry: root,
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

/// The work queue under the controller's own names.
fn register_queue(registry: &mut Registry, queue: &QueueMetrics) {
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
}

/// The work queue again under the names, labels and buckets client-go and
/// controller-runtime export, so dashboards written for those controllers read this one.
/// The two running gauges are computed at scrape time (see
/// [`operator_runtime::metrics::Running`]).
fn register_workqueue(root: &mut Registry, queue: &QueueMetrics) {
    let labels =
        ["name", "controller"].map(|label| (Cow::Borrowed(label), Cow::Borrowed(CONTROLLER_NAME)));
    let registry = root.sub_registry_with_labels(labels.into_iter());
    registry.register(
        "workqueue_depth",
        "Keys waiting for a worker",
        queue.depth.clone(),
    );
    registry.register(
        "workqueue_adds",
        "Keys added to the queue, retries included",
        queue.adds.clone(),
    );
    registry.register(
        "workqueue_queue_duration_seconds",
        "Time a key waited in the queue before a worker took it",
        queue.queue_duration.clone(),
    );
    registry.register(
        "workqueue_work_duration_seconds",
        "Time a worker spent on a key",
        queue.work_duration.clone(),
    );
    registry.register(
        "workqueue_retries",
        "Keys put back after a retry backoff",
        queue.retries.clone(),
    );
    registry.register(
        "workqueue_unfinished_work_seconds",
        "Seconds the keys being worked on have been running, summed; a steady rise means stuck workers",
        queue.running.unfinished_gauge(),
    );
    registry.register(
        "workqueue_longest_running_processor_seconds",
        "Seconds the longest-running worker has been on its key",
        queue.running.longest_gauge(),
    );
}

impl Metrics {
    /// Counts one write call.
    pub fn wrote(&self, action: &'static str) {
        self.writes.get_or_create(&WriteLabels { action }).inc();
    }

    /// Counts one failed backup of a Database.
    pub fn backup_failed(&self, namespace: &str, database: &str) {
        self.backups_scheduled(namespace, database);
        self.backup_failures
            .get_or_create(&DatabaseLabels {
                namespace: namespace.to_owned(),
                database: database.to_owned(),
            })
            .inc();
    }

    /// Shows a Database with scheduled backups at 0 failures, so its first failure is
    /// an increase an alert's `increase()` sees, not a series appearing at 1.
    pub fn backups_scheduled(&self, namespace: &str, database: &str) {
        let _ = self.backup_failures.get_or_create(&DatabaseLabels {
            namespace: namespace.to_owned(),
            database: database.to_owned(),
        });
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
    fn a_database_with_scheduled_backups_starts_at_no_failures() {
        let metrics = Metrics::default();
        metrics.backups_scheduled("shop", "orders");
        let text = metrics.encode();
        assert!(
            text.contains(
                "database_controller_backup_failures_total{namespace=\"shop\",database=\"orders\"} 0"
            ),
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
    fn the_work_queue_shows_under_client_go_names_and_the_old_names_stay() {
        let metrics = Metrics::default();
        // A family with no labelled child is left out of the text.
        let result = ResultLabels { result: "ok" };
        metrics.reconciles.get_or_create(&result).inc();
        metrics.duration.get_or_create(&result).observe(0.1);
        metrics
            .errors
            .get_or_create(&ErrorLabels { kind: "conflict" })
            .inc();
        metrics.wrote("apply");
        metrics.backup_failed("shop", "orders");
        let text = metrics.encode();
        let labels = "{name=\"database\",controller=\"database\"}";
        for sample in [
            "workqueue_depth",
            "workqueue_adds_total",
            "workqueue_queue_duration_seconds_count",
            "workqueue_work_duration_seconds_count",
            "workqueue_retries_total",
            "workqueue_unfinished_work_seconds",
            "workqueue_longest_running_processor_seconds",
        ] {
            assert!(
                text.contains(&format!("\n{sample}{labels} ")),
                "{sample}: {text}"
            );
        }
        let buckets = text
            .lines()
            .filter(|line| line.starts_with("workqueue_work_duration_seconds_bucket{"))
            .count();
        assert_eq!(
            buckets, 13,
            "controller-runtime's 12 buckets and +Inf: {text}"
        );
        for old in [
            "reconciles counter",
            "reconcile_errors counter",
            "writes counter",
            "reconcile_duration_seconds histogram",
            "leader gauge",
            "queue_depth gauge",
            "queue_wait_seconds histogram",
            "backup_failures counter",
        ] {
            assert!(
                text.contains(&format!("# TYPE database_controller_{old}\n")),
                "{old}: {text}"
            );
        }
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
