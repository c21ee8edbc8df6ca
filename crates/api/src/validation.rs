//! Validation of a Database: every broken rule at once, each naming its field path and
//! the rule, plus warnings for choices that are allowed but deserve a second look.
//!
//! The webhook calls [`validate`] and [`validate_update`] at admission; the controller
//! calls the same functions, so a Database is held to the same rules where no webhook
//! is installed.

mod backup;
mod names;
mod parameters;
mod pods;
mod update;

use std::fmt;

use kube::api::ObjectMeta;

use crate::storage::parse_gi;
use crate::versions::{self, Version};
use crate::{Database, DatabaseSpec, Engine, MAX_REPLICAS, MIN_REPLICAS};

pub use backup::check_destination;
pub use names::{is_dns_subdomain, label_value_problem, qualified_name_problem};
pub use update::validate_update;

/// Longest Database name. The StatefulSet's Pods carry the label
/// `controller-revision-hash=<name>-<10 characters>`, and a label value is at most 63
/// characters; every other derived name (`<name>-<ordinal>`, `<name>-credentials`,
/// `<name>-connection`) is shorter than that.
pub const MAX_NAME_LEN: usize = 52;
/// Length of the random suffix the API server appends to `metadata.generateName`.
const GENERATED_SUFFIX_LEN: usize = 5;
/// Largest `spec.storage` accepted unless configured otherwise: 16 TiB.
pub const DEFAULT_MAX_STORAGE_GI: u64 = 16_384;

/// One broken rule: the field path (`spec.storage`) and what the rule asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub message: String,
}

impl FieldError {
    /// An error on the field at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Site-specific bounds, set by flags on the webhook and the controller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest `spec.storage`, in gibibytes.
    pub max_storage_gi: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_storage_gi: DEFAULT_MAX_STORAGE_GI,
        }
    }
}

/// The verdict on one Database: the broken rules (empty when allowed) and warnings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub errors: Vec<FieldError>,
    pub warnings: Vec<String>,
}

impl Outcome {
    /// True when no rule is broken; warnings do not refuse anything.
    pub fn is_allowed(&self) -> bool {
        self.errors.is_empty()
    }

    /// Every error on one line, `path: rule; path: rule`, as an admission denial shows it.
    pub fn message(&self) -> String {
        self.errors
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub(crate) fn error(&mut self, path: &str, message: impl Into<String>) {
        self.errors.push(FieldError::new(path, message));
    }

    fn warn(&mut self, warning: impl Into<String>) {
        self.warnings.push(warning.into());
    }
}

/// Checks a Database on its own (creation, or the new side of an update).
pub fn validate(db: &Database, limits: &Limits) -> Outcome {
    let mut outcome = Outcome::default();
    check_name(&db.metadata, &mut outcome);
    check_version(&db.spec, &mut outcome);
    check_storage(&db.spec, *limits, &mut outcome);
    check_replicas(&db.spec, &mut outcome);
    backup::check_backup(&db.spec, &mut outcome);
    backup::check_restore(&db.spec, &mut outcome);
    pods::check(&db.spec, &mut outcome);
    parameters::check(&db.spec, &mut outcome);
    check_monitoring(&db.spec, &mut outcome);
    outcome
}

fn check_monitoring(spec: &DatabaseSpec, outcome: &mut Outcome) {
    let Some(image) = spec.monitoring.as_ref().and_then(|m| m.image.as_deref()) else {
        return;
    };
    if image.is_empty() || image.chars().any(char::is_whitespace) {
        outcome.error(
            "spec.monitoring.image",
            format!(
                "must be an image reference without spaces, such as {}, or be left out for that default",
                crate::monitoring::exporter(spec.engine).image
            ),
        );
    }
}

fn check_name(meta: &ObjectMeta, outcome: &mut Outcome) {
    // With generateName the API server picks the name; its prefix must leave room for
    // the suffix it appends.
    let (path, name, suffix) = match (&meta.name, &meta.generate_name) {
        (Some(name), _) => ("metadata.name", name.as_str(), 0),
        (None, Some(prefix)) => (
            "metadata.generateName",
            prefix.as_str(),
            GENERATED_SUFFIX_LEN,
        ),
        (None, None) => return,
    };
    if name.len() + suffix > MAX_NAME_LEN {
        outcome.error(
            path,
            format!(
                "must be at most {} characters so that every name derived from it (the Pods' controller-revision-hash label is <name>-<10 characters>) stays within 63",
                MAX_NAME_LEN - suffix
            ),
        );
    }
    let generated = suffix > 0;
    if !is_dns1035_label(name, generated) {
        outcome.error(
            path,
            "must be a DNS-1035 label (lowercase letters, digits and '-', starting with a letter and ending with a letter or digit) because it is also the Service's name",
        );
    }
}

/// A DNS-1035 label; a `generateName` prefix may end in '-' since a suffix follows.
fn is_dns1035_label(name: &str, prefix_only: bool) -> bool {
    let bytes = name.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first.is_ascii_lowercase()
        && (prefix_only || last.is_ascii_lowercase() || last.is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

fn check_version(spec: &DatabaseSpec, outcome: &mut Outcome) {
    let Some(version) = Version::parse(&spec.version) else {
        outcome.error(
            "spec.version",
            r#"must be MAJOR[.MINOR[.PATCH]] in digits without leading zeros, like "16.4" (the version names the image tag, and only that spelling names one)"#,
        );
        return;
    };
    if let Some(when) = versions::end_of_life(spec.engine, version) {
        outcome.warn(format!(
            "spec.version: {} {} reached its end of life in {when}: it gets no more fixes and its image is no longer built; plan an upgrade",
            spec.engine, spec.version
        ));
    }
    if versions::series_of(spec.engine, version).is_none() {
        outcome.error(
            "spec.version",
            format!(
                "{} {} is not supported; supported series: {}",
                spec.engine,
                spec.version,
                versions::supported_list(spec.engine)
            ),
        );
    }
}

fn check_storage(spec: &DatabaseSpec, limits: Limits, outcome: &mut Outcome) {
    match parse_gi(&spec.storage) {
        None => outcome.error("spec.storage", r#"must be whole gibibytes like "10Gi""#),
        Some(0) => outcome.error("spec.storage", "must be at least 1Gi"),
        Some(gi) if gi > limits.max_storage_gi => outcome.error(
            "spec.storage",
            format!("must be at most {}Gi", limits.max_storage_gi),
        ),
        Some(_) => {}
    }
}

fn check_replicas(spec: &DatabaseSpec, outcome: &mut Outcome) {
    let replicas = spec.replicas;
    if !(MIN_REPLICAS..=MAX_REPLICAS).contains(&replicas) {
        outcome.error(
            "spec.replicas",
            format!("must be between {MIN_REPLICAS} and {MAX_REPLICAS}"),
        );
        return;
    }
    for warning in replica_warnings(replicas, Some(spec.engine)) {
        outcome.warn(warning);
    }
}

/// The warnings for `replicas` instances of `engine` (unknown to a `kubectl scale` whose
/// Scale does not name it), shared with the webhook's scale rules so both read alike.
pub fn replica_warnings(replicas: i32, engine: Option<Engine>) -> Vec<String> {
    // Every engine replicates: one primary, the others its replicas.
    let mut warnings = Vec::new();
    if engine == Some(Engine::Mongodb) && replicas > 1 && replicas % 2 == 0 {
        warnings.push(format!(
            "spec.replicas is {replicas}: an even number of mongodb members cannot break a tie in an election; prefer an odd number"
        ));
    }
    warnings
}

#[cfg(test)]
mod spec_tests;
#[cfg(test)]
mod tests;
