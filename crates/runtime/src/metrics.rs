//! What a work queue reports; the application registers it under its own names.

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;

/// How many keys wait for a worker, and how long each waited.
#[derive(Clone, Debug)]
pub struct QueueMetrics {
    pub depth: Gauge,
    pub wait: Histogram,
}

impl Default for QueueMetrics {
    fn default() -> Self {
        Self {
            depth: Gauge::default(),
            wait: Histogram::new([
                0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0,
            ]),
        }
    }
}
