//! What the test saw, shared by its tasks, and the timeline printed at the end.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use database_webhook::certs::ders;
use k8s_openapi::api::core::v1::Secret;

/// What the test saw, shared by its tasks.
#[derive(Default)]
pub struct Record {
    /// (seconds since the first run, serving leaf, CA) of every version of the Secret.
    pub secret_versions: Vec<(u64, Vec<u8>, Vec<u8>)>,
    /// (seconds, CAs of every webhook's caBundle) whenever that changed.
    pub bundles: Vec<(u64, Vec<BTreeSet<Vec<u8>>>)>,
    /// (seconds, leaf) whenever the certificate served by the webhook changed.
    pub served: Vec<(u64, Vec<u8>)>,
    pub failures: Vec<String>,
    pub requests: usize,
    pub runs: usize,
}

pub type Shared = Arc<Mutex<Record>>;

pub fn with<T>(record: &Shared, f: impl FnOnce(&mut Record) -> T) -> T {
    f(&mut record.lock().expect("record"))
}

/// Notes the Secret's serving leaf and CA.
pub fn record_secret(record: &Shared, secret: &Secret, start: Instant) {
    let data = secret.data.clone().unwrap_or_default();
    let first_der = |key: &str| {
        let pem = data.get(key).map(|v| v.0.clone()).unwrap_or_default();
        ders(&String::from_utf8_lossy(&pem))
            .into_iter()
            .next()
            .unwrap_or_default()
    };
    let at = start.elapsed().as_secs();
    with(record, |r| {
        r.secret_versions
            .push((at, first_der("tls.crt"), first_der("ca.crt")));
    });
}

/// The timeline, with leaves and CAs numbered in the order the Secret held them.
pub fn summarize(record: &Record) -> String {
    let mut leaves: Vec<&Vec<u8>> = Vec::new();
    let mut cas: Vec<&Vec<u8>> = Vec::new();
    let index = |list: &[&Vec<u8>], der: &Vec<u8>| list.iter().position(|d| *d == der);
    for (_, leaf, ca) in &record.secret_versions {
        if index(&leaves, leaf).is_none() {
            leaves.push(leaf);
        }
        if index(&cas, ca).is_none() {
            cas.push(ca);
        }
    }
    let name = |list: &[&Vec<u8>], der: &Vec<u8>, prefix: &str| {
        index(list, der).map_or_else(|| format!("{prefix}?"), |i| format!("{prefix}{i}"))
    };
    let mut lines = vec![format!(
        "{} requests, {} bootstrap runs, {} failures",
        record.requests,
        record.runs,
        record.failures.len()
    )];
    for (at, leaf, ca) in &record.secret_versions {
        lines.push(format!(
            "{at:>4}s Secret: {} by {}",
            name(&leaves, leaf, "leaf"),
            name(&cas, ca, "CA")
        ));
    }
    for (at, bundles) in &record.bundles {
        let sets: Vec<String> = bundles
            .iter()
            .map(|set| {
                set.iter()
                    .map(|ca| name(&cas, ca, "CA"))
                    .collect::<Vec<_>>()
                    .join("+")
            })
            .collect();
        lines.push(format!("{at:>4}s caBundles: {}", sets.join(", ")));
    }
    for (at, leaf) in &record.served {
        lines.push(format!("{at:>4}s served: {}", name(&leaves, leaf, "leaf")));
    }
    lines.join("\n")
}
