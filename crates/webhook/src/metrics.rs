//! Prometheus metrics of the admission endpoints, served at `/metrics` on the TLS port.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Which admission endpoint answered.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Endpoint {
    Validate,
    Mutate,
}

/// How a request ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Verdict {
    /// Allowed without change.
    Allowed,
    /// Allowed with a patch of defaults.
    Patched,
    /// Refused: the Database breaks a rule.
    Denied,
    /// Not an AdmissionReview the webhook can read (answered 4xx).
    Rejected,
}

impl Endpoint {
    fn as_str(self) -> &'static str {
        match self {
            Endpoint::Validate => "validate",
            Endpoint::Mutate => "mutate",
        }
    }
}

impl Verdict {
    fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Patched => "patched",
            Verdict::Denied => "denied",
            Verdict::Rejected => "rejected",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    endpoint: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EndpointLabels {
    endpoint: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FieldLabels {
    field: &'static str,
}

/// Field paths that label denials; anything else (a decoding error deep in an object)
/// counts as `object`, so a client cannot grow the label set.
const KNOWN_FIELDS: [&str; 6] = [
    "metadata.name",
    "metadata.generateName",
    "spec.engine",
    "spec.version",
    "spec.storage",
    "spec.replicas",
];

/// The webhook's metric families and the registry that encodes them.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    denials: Family<FieldLabels, Counter>,
    latency: Family<EndpointLabels, Histogram, fn() -> Histogram>,
}

fn latency_histogram() -> Histogram {
    // 100 µs to about 1.6 s: admission answers are sub-millisecond when healthy and the
    // API server gives up after the configured timeoutSeconds.
    Histogram::new(exponential_buckets(0.000_1, 2.0, 15))
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("database_webhook");
        let requests = Family::<RequestLabels, Counter>::default();
        let denials = Family::<FieldLabels, Counter>::default();
        let latency = Family::<EndpointLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        registry.register(
            "requests",
            "Admission requests by endpoint and result",
            requests.clone(),
        );
        registry.register(
            "denials",
            "Broken rules in denied admission requests, by field path",
            denials.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time to decode, decide and encode an admission request",
            latency.clone(),
        );
        Self {
            registry,
            requests,
            denials,
            latency,
        }
    }
}

impl Metrics {
    /// Counts one answered request and how long it took.
    pub fn observe(&self, endpoint: Endpoint, result: Verdict, elapsed: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                endpoint: endpoint.as_str(),
                result: result.as_str(),
            })
            .inc();
        self.latency
            .get_or_create(&EndpointLabels {
                endpoint: endpoint.as_str(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// Counts one broken rule of a denied request.
    pub fn denied_field(&self, path: &str) {
        let field = KNOWN_FIELDS
            .iter()
            .find(|known| **known == path)
            .copied()
            .unwrap_or("object");
        self.denials.get_or_create(&FieldLabels { field }).inc();
    }

    /// The OpenMetrics text exposition of every family.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_denials_and_latency_appear_in_the_exposition() {
        let metrics = Metrics::default();
        metrics.observe(
            Endpoint::Validate,
            Verdict::Denied,
            Duration::from_millis(1),
        );
        metrics.denied_field("spec.storage");
        metrics.denied_field("spec.some.unknown[3]");
        let text = metrics.encode();
        assert!(
            text.contains(
                r#"database_webhook_requests_total{endpoint="validate",result="denied"} 1"#
            ),
            "{text}"
        );
        assert!(text.contains(r#"database_webhook_denials_total{field="spec.storage"} 1"#));
        assert!(text.contains(r#"database_webhook_denials_total{field="object"} 1"#));
        assert!(
            text.contains(
                r#"database_webhook_request_duration_seconds_count{endpoint="validate"} 1"#
            )
        );
    }
}
