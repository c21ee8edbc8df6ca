//! The rules for `spec.backup` and `spec.restoreFrom`, and for a DatabaseBackup's
//! destination.

use super::Outcome;
use crate::DatabaseSpec;
use crate::backup::{BackupDestination, RestoreSource, S3Destination, Schedule, max_age_hours};

pub(super) fn check_backup(spec: &DatabaseSpec, outcome: &mut Outcome) {
    let Some(backup) = &spec.backup else {
        return;
    };
    if let Err(rule) = Schedule::parse(&backup.schedule) {
        outcome.error("spec.backup.schedule", rule);
    }
    if let Some(count) = backup.retention.count
        && !(1..=1000).contains(&count)
    {
        outcome.error("spec.backup.retention.count", "must be between 1 and 1000");
    }
    if let Some(age) = &backup.retention.max_age
        && max_age_hours(age).is_none()
    {
        outcome.error(
            "spec.backup.retention.maxAge",
            r#"must be whole hours or days, like "36h" or "30d""#,
        );
    }
    check_destination("spec.backup.destination", &backup.destination, outcome);
}

pub(super) fn check_restore(spec: &DatabaseSpec, outcome: &mut Outcome) {
    let Some(source) = spec.restore_from.as_deref() else {
        return;
    };
    match source {
        RestoreSource {
            backup: Some(name),
            location: None,
        } => {
            if name.is_empty() {
                outcome.error("spec.restoreFrom.backup", "must name a DatabaseBackup");
            }
        }
        RestoreSource {
            backup: None,
            location: Some(location),
        } => {
            check_destination(
                "spec.restoreFrom.location.destination",
                &location.destination,
                outcome,
            );
            if !is_safe_key(&location.key) {
                outcome.error(
                    "spec.restoreFrom.location.key",
                    "must be a relative object key without empty, '.' or '..' segments",
                );
            }
        }
        _ => outcome.error(
            "spec.restoreFrom",
            "must name exactly one source: backup or location",
        ),
    }
}

/// Checks one destination; `path` names it in the errors.
pub fn check_destination(path: &str, destination: &BackupDestination, outcome: &mut Outcome) {
    match (&destination.s3, &destination.volume) {
        (Some(s3), None) => check_s3(&format!("{path}.s3"), s3, outcome),
        (None, Some(volume)) => {
            if !is_dns_subdomain(&volume.claim_name) {
                outcome.error(
                    &format!("{path}.volume.claimName"),
                    "must be the name of a PersistentVolumeClaim (a DNS subdomain)",
                );
            }
            check_prefix(&format!("{path}.volume.prefix"), &volume.prefix, outcome);
        }
        _ => outcome.error(path, "must name exactly one destination: s3 or volume"),
    }
}

fn check_s3(path: &str, s3: &S3Destination, outcome: &mut Outcome) {
    let host = s3
        .endpoint
        .strip_prefix("https://")
        .map(|rest| rest.trim_end_matches('/'));
    if !host.is_some_and(|h| !h.is_empty() && !h.contains(['/', '?', '#', '@'])) {
        outcome.error(
            &format!("{path}.endpoint"),
            r#"must be https://host[:port] with no path, like "https://s3.eu-west-1.amazonaws.com": dumps and keys travel only over TLS"#,
        );
    }
    if !is_bucket_name(&s3.bucket) {
        outcome.error(
            &format!("{path}.bucket"),
            "must be a bucket name: 3 to 63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit",
        );
    }
    check_prefix(&format!("{path}.prefix"), &s3.prefix, outcome);
    if s3.credentials_secret.is_empty() {
        outcome.error(
            &format!("{path}.credentialsSecret"),
            "must name a Secret with the keys access-key-id and secret-access-key",
        );
    }
}

fn check_prefix(path: &str, prefix: &str, outcome: &mut Outcome) {
    if !prefix.is_empty() && !is_safe_key(prefix.trim_end_matches('/')) {
        outcome.error(
            path,
            "must be relative, without empty, '.' or '..' segments, like \"prod/\"",
        );
    }
}

/// A relative key whose segments are all real names: it cannot climb out of a
/// volume's directory or alias another key.
fn is_safe_key(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with('/')
        && key
            .split('/')
            .all(|segment| !segment.is_empty() && segment != "." && segment != "..")
        && !key.contains(['\\', '\0'])
}

fn is_bucket_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'.' || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            let bytes = label.as_bytes();
            !bytes.is_empty()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
                && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
        })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::validation::{Limits, validate, validate_update};
    use crate::{Database, backup::DEFAULT_KEEP};

    fn database(extra: &Value) -> Database {
        let mut spec = json!({"engine": "postgres", "version": "17", "storage": "1Gi"});
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        serde_json::from_value(json!({
            "apiVersion": "mycompany.io/v1", "kind": "Database",
            "metadata": {"name": "orders", "namespace": "shop"},
            "spec": spec,
        }))
        .expect("a Database")
    }

    fn s3() -> Value {
        json!({"s3": {"endpoint": "https://s3.example.com:9000", "bucket": "backups",
                      "prefix": "prod/", "credentialsSecret": "backup-keys"}})
    }

    fn errors(db: &Database) -> Vec<String> {
        validate(db, &Limits::default())
            .errors
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_daily_backup_to_a_bucket_is_allowed_and_keeps_seven_by_default() {
        let db = database(&json!({"backup": {"schedule": "0 3 * * *", "destination": s3()}}));
        assert_eq!(errors(&db), Vec::<String>::new());
        let backup = db.spec.backup.expect("a schedule");
        assert_eq!(backup.retention.count, None);
        assert_eq!(DEFAULT_KEEP, 7);
    }

    #[test]
    fn each_broken_backup_rule_names_its_field() {
        let db = database(&json!({"backup": {
            "schedule": "0 0 3 * * *",
            "retention": {"count": 0, "maxAge": "2w"},
            "destination": {"s3": {"endpoint": "http://s3.example.com", "bucket": "B",
                                   "prefix": "../up", "credentialsSecret": ""}},
        }}));
        let errors = errors(&db).join("\n");
        for path in [
            "spec.backup.schedule: must have five fields",
            "spec.backup.retention.count: must be between 1 and 1000",
            "spec.backup.retention.maxAge: must be whole hours or days",
            "spec.backup.destination.s3.endpoint: must be https://",
            "spec.backup.destination.s3.bucket: must be a bucket name",
            "spec.backup.destination.s3.prefix: must be relative",
            "spec.backup.destination.s3.credentialsSecret: must name a Secret",
        ] {
            assert!(errors.contains(path), "{path} missing from:\n{errors}");
        }
    }

    #[test]
    fn a_destination_names_exactly_one_place() {
        let both = database(&json!({"backup": {"schedule": "@daily", "destination": {
            "s3": s3()["s3"], "volume": {"claimName": "dumps"}}}}));
        assert!(
            errors(&both)
                .iter()
                .any(|e| e.starts_with("spec.backup.destination: must name exactly one")),
            "{:?}",
            errors(&both)
        );
        let volume = database(&json!({"backup": {"schedule": "@daily", "destination": {
            "volume": {"claimName": "dumps", "prefix": "orders/"}}}}));
        assert_eq!(errors(&volume), Vec::<String>::new());
    }

    #[test]
    fn a_restore_names_one_source_and_a_safe_key() {
        let by_name = database(&json!({"restoreFrom": {"backup": "orders-20261205"}}));
        assert_eq!(errors(&by_name), Vec::<String>::new());
        let escaping = database(&json!({"restoreFrom": {"location": {
            "destination": {"volume": {"claimName": "dumps"}}, "key": "../etc/passwd"}}}));
        assert!(
            errors(&escaping)
                .iter()
                .any(|e| e.starts_with("spec.restoreFrom.location.key")),
            "{:?}",
            errors(&escaping)
        );
        let neither = database(&json!({"restoreFrom": {}}));
        assert!(
            errors(&neither)
                .iter()
                .any(|e| e.starts_with("spec.restoreFrom: must name exactly one source"))
        );
    }

    #[test]
    fn a_restore_is_given_only_at_creation() {
        let plain = database(&json!({}));
        let restoring = database(&json!({"restoreFrom": {"backup": "orders-20261205"}}));
        for (old, new) in [(&plain, &restoring), (&restoring, &plain)] {
            let outcome = validate_update(old, new, &Limits::default());
            assert!(
                outcome.errors.iter().any(|e| e.path == "spec.restoreFrom"),
                "{:?}",
                outcome.errors
            );
        }
        assert!(validate_update(&restoring, &restoring, &Limits::default()).is_allowed());
    }
}
