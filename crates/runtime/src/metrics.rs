//! What a work queue reports; the application registers it under its own names.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use tokio::time::Instant;

/// How many keys wait for a worker, how long each waited and was worked on, and how
/// many were added and retried: enough for both the application's own names and
/// client-go's `workqueue_*` ones.
#[derive(Clone, Debug)]
pub struct QueueMetrics {
    /// Keys due and waiting for a worker.
    pub depth: Gauge,
    /// How long each key waited for a worker, in the buckets this queue always had, so
    /// the application's existing histogram keeps its shape.
    pub wait: Histogram,
    /// Keys that started waiting, counted as client-go's workqueue counts adds: a
    /// request for a key already waiting is not counted, a retry is once it falls due.
    pub adds: Counter,
    /// Keys put back after their retry backoff (a rate-limited add).
    pub retries: Counter,
    /// The same waits as `wait`, in controller-runtime's buckets.
    pub queue_duration: Histogram,
    /// How long a worker spent on each key, in controller-runtime's buckets.
    pub work_duration: Histogram,
    /// The keys being worked on, read when the metrics are encoded.
    pub running: Running,
}

impl Default for QueueMetrics {
    fn default() -> Self {
        Self {
            depth: Gauge::default(),
            wait: Histogram::new([
                0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0,
            ]),
            adds: Counter::default(),
            retries: Counter::default(),
            queue_duration: Histogram::new(workqueue_buckets()),
            work_duration: Histogram::new(workqueue_buckets()),
            running: Running::default(),
        }
    }
}

/// controller-runtime's workqueue buckets, 10 ns to 1000 s: the same bounds make
/// dashboards written for client-go controllers read these histograms unchanged.
fn workqueue_buckets() -> impl Iterator<Item = f64> {
    exponential_buckets(10e-9, 10.0, 12)
}

/// When each key being worked on started, shared by every loop that reports to the same
/// metrics.
///
/// Its two gauges ([`Running::unfinished_gauge`], [`Running::longest_gauge`]) are
/// computed at scrape time, not updated on a timer as client-go does: a loop waiting on
/// a long reconcile has no turn in which to update them, and the longest run across
/// several loops is a maximum no single loop can add its part to.
#[derive(Clone, Debug, Default)]
pub struct Running {
    /// Start times, each with how many keys started then.
    starts: Arc<Mutex<BTreeMap<Instant, u32>>>,
}

impl Running {
    /// A key started being worked on at `at`.
    pub fn started(&self, at: Instant) {
        let mut starts = self.starts();
        let count = starts.entry(at).or_default();
        *count = count.saturating_add(1);
    }

    /// The key that started at `at` is finished.
    pub fn ended(&self, at: Instant) {
        if let Entry::Occupied(mut entry) = self.starts().entry(at) {
            *entry.get_mut() -= 1;
            if *entry.get() == 0 {
                entry.remove();
            }
        }
    }

    /// Seconds the keys being worked on have run by `now`, summed. Folded from 0.0:
    /// `sum` of no floats is -0.0, which would show as `-0.0` on a scrape.
    pub fn unfinished_seconds(&self, now: Instant) -> f64 {
        self.starts().iter().fold(0.0, |sum, (start, count)| {
            sum + now.saturating_duration_since(*start).as_secs_f64() * f64::from(*count)
        })
    }

    /// Seconds the longest-running key has run by `now`; 0 when none runs.
    pub fn longest_seconds(&self, now: Instant) -> f64 {
        self.starts().keys().next().map_or(0.0, |start| {
            now.saturating_duration_since(*start).as_secs_f64()
        })
    }

    /// A gauge of [`Running::unfinished_seconds`] at scrape time.
    pub fn unfinished_gauge(&self) -> RunningGauge {
        RunningGauge {
            running: self.clone(),
            read: Self::unfinished_seconds,
        }
    }

    /// A gauge of [`Running::longest_seconds`] at scrape time.
    pub fn longest_gauge(&self) -> RunningGauge {
        RunningGauge {
            running: self.clone(),
            read: Self::longest_seconds,
        }
    }

    /// The start times; a panic while they were held left them whole (each change is a
    /// single map operation), so a poisoned lock is used as it is.
    fn starts(&self) -> MutexGuard<'_, BTreeMap<Instant, u32>> {
        self.starts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A gauge read from [`Running`] each time the metrics are encoded.
#[derive(Clone, Debug)]
pub struct RunningGauge {
    running: Running,
    read: fn(&Running, Instant) -> f64,
}

impl EncodeMetric for RunningGauge {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&(self.read)(&self.running, Instant::now()))
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn running_keys_sum_and_the_longest_is_the_oldest() {
        let running = Running::default();
        let t0 = Instant::now();
        running.started(t0);
        running.started(t0 + Duration::from_secs(2));
        running.started(t0 + Duration::from_secs(2));
        let now = t0 + Duration::from_secs(5);
        assert!((running.unfinished_seconds(now) - 11.0).abs() < 1e-9);
        assert!((running.longest_seconds(now) - 5.0).abs() < 1e-9);
        running.ended(t0);
        running.ended(t0 + Duration::from_secs(2));
        assert!((running.unfinished_seconds(now) - 3.0).abs() < 1e-9);
        assert!((running.longest_seconds(now) - 3.0).abs() < 1e-9);
        running.ended(t0 + Duration::from_secs(2));
        assert_eq!(running.unfinished_seconds(now).to_bits(), 0.0_f64.to_bits());
        assert_eq!(running.longest_seconds(now).to_bits(), 0.0_f64.to_bits());
    }
}
