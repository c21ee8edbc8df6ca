//! Backups: where a Database's logical dumps go (`spec.backup`), the `DatabaseBackup`
//! resource that records one dump, and where a new Database is restored from
//! (`spec.restoreFrom`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

mod schedule;

pub use schedule::Schedule;

/// The environment of the backup agent's container, which the controller sets.
pub mod agent {
    /// The directory a volume destination is mounted on.
    pub const VOLUME: &str = "BACKUP_VOLUME";
    pub const S3_ENDPOINT: &str = "BACKUP_S3_ENDPOINT";
    pub const S3_BUCKET: &str = "BACKUP_S3_BUCKET";
    pub const S3_REGION: &str = "BACKUP_S3_REGION";
    pub const S3_ACCESS_KEY_ID: &str = "BACKUP_S3_ACCESS_KEY_ID";
    pub const S3_SECRET_ACCESS_KEY: &str = "BACKUP_S3_SECRET_ACCESS_KEY";
    /// A file of PEM certificates to trust besides the system's.
    pub const S3_CA_FILE: &str = "BACKUP_S3_CA_FILE";

    /// The last `n` non-empty lines of a tool's output, joined into one sentence-like
    /// line: what the agent and the controller quote of a failed dump or restore.
    pub fn last_lines(text: &str, n: usize) -> String {
        let lines: Vec<&str> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        lines[lines.len().saturating_sub(n)..].join(" ")
    }

    /// What the agent reports, as one JSON line in its container's termination
    /// message.
    #[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    pub struct Report {
        /// Where the dump is, for people.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub location: Option<String>,
        /// Bytes stored (compressed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub stored_bytes: Option<u64>,
        /// Bytes of the dump itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub source_bytes: Option<u64>,
        /// Why it failed, as a sentence.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub error: Option<String>,
    }
}

/// Backups a schedule keeps when `spec.backup.retention` names no bound.
pub const DEFAULT_KEEP: i32 = 7;
/// The S3 region when none is given; S3-compatible servers other than AWS accept it.
pub const DEFAULT_REGION: &str = "us-east-1";
/// The keys of the Secret `credentialsSecret` names.
pub const ACCESS_KEY_ID: &str = "access-key-id";
pub const SECRET_ACCESS_KEY: &str = "secret-access-key";
/// The label on a DatabaseBackup naming its Database, and the one marking those a
/// schedule made (which its retention may delete).
/// Whether `db` names a place its backups go: a major upgrade needs one.
pub fn has_destination(db: &crate::Database) -> bool {
    db.spec
        .backup
        .as_ref()
        .is_some_and(|b| b.destination.s3.is_some() || b.destination.volume.is_some())
}

pub const DATABASE_LABEL: &str = "mycompany.io/database";
pub const SCHEDULED_LABEL: &str = "mycompany.io/scheduled";

/// Scheduled logical backups of a Database.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupSchedule {
    /// When to take a backup: a cron expression of five fields (minute, hour, day of
    /// month, month, day of week), in UTC; for example "0 3 * * *" for 03:00 each day.
    #[schemars(length(min = 9, max = 128))]
    pub schedule: String,
    /// Which scheduled backups to keep; older ones are deleted with their dumps.
    #[serde(default)]
    pub retention: Retention,
    /// Where the dumps go.
    pub destination: BackupDestination,
    /// Stops new scheduled backups without forgetting the schedule or deleting any.
    #[serde(default)]
    pub suspend: bool,
}

/// How many scheduled backups to keep, and for how long. With both, a backup goes once
/// either bound says so; the newest successful backup is always kept.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Retention {
    /// Keep at most this many scheduled backups, 1 to 1000 (7 when neither bound is
    /// given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 1, "maximum" = 1000))]
    pub count: Option<i32>,
    /// Delete scheduled backups older than this: whole hours or days, for example "36h"
    /// or "30d".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[1-9][0-9]{0,4}[hd]$"))]
    pub max_age: Option<String>,
}

/// Where dumps are written: exactly one of an S3-compatible bucket or a volume.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.s3) != has(self.volume)",
    "message": "name exactly one destination: s3 or volume",
}]))]
pub struct BackupDestination {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s3: Option<S3Destination>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<VolumeDestination>,
}

/// A bucket on an S3-compatible object store, reached over HTTPS.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3Destination {
    /// The store's address, `https://host[:port]`, for example
    /// "https://s3.eu-west-1.amazonaws.com". Buckets are addressed by path.
    #[schemars(regex(pattern = r"^https://[A-Za-z0-9.\-\[\]:]+(:[0-9]+)?/?$"))]
    pub endpoint: String,
    /// The bucket, which must exist.
    #[schemars(length(min = 3, max = 63))]
    pub bucket: String,
    /// Prepended to every object's key, for example "prod/"; dumps go under
    /// `<prefix><namespace>/<database>/`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 256))]
    pub prefix: String,
    /// The region the requests are signed for ("us-east-1" when not given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// A Secret in the Database's namespace with the keys `access-key-id` and
    /// `secret-access-key`.
    #[schemars(length(min = 1, max = 253))]
    pub credentials_secret: String,
    /// The certificate authority the store's certificate is checked against, when it
    /// is not one the image trusts: a key of a Secret in the Database's namespace,
    /// holding PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<SecretKey>,
}

/// One key of a Secret.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct SecretKey {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// A PersistentVolumeClaim the user provides (the operator never deletes it); dumps go
/// under `<prefix><namespace>/<database>/` on it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeDestination {
    /// The claim, in the Database's namespace.
    #[schemars(length(min = 1, max = 253))]
    pub claim_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 256))]
    pub prefix: String,
}

/// Where a new Database's data comes from: exactly one of a DatabaseBackup in its
/// namespace, or a dump at a location (the rule is on `spec.restoreFrom`). Only at
/// creation.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RestoreSource {
    /// A DatabaseBackup in this namespace that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<String>,
    /// A dump this operator wrote, by where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<DumpLocation>,
}

/// One dump: the destination it was written to and its key there (as a
/// DatabaseBackup's `status.key` gives it).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DumpLocation {
    pub destination: BackupDestination,
    #[schemars(length(min = 1, max = 1024))]
    pub key: String,
}

/// One logical backup of a Database: a compressed dump written to a destination. Made
/// by the Database's schedule or by a user; deleting it deletes the dump.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "mycompany.io",
    version = "v1",
    kind = "DatabaseBackup",
    plural = "databasebackups",
    singular = "databasebackup",
    shortname = "dbbackup",
    category = "mycompany",
    namespaced,
    status = "DatabaseBackupStatus",
    derive = "PartialEq",
    doc = "A logical backup of a Database, written to object storage or a volume.",
    printcolumn(name = "Database", type_ = "string", json_path = ".spec.database"),
    printcolumn(name = "Status", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Size",
        type_ = "integer",
        json_path = ".status.sizeBytes",
        description = "Bytes of the compressed dump"
    ),
    printcolumn(
        name = "Location",
        type_ = "string",
        json_path = ".status.location",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "self == oldSelf",
    "message": "a backup's spec cannot change; create another",
}]))]
pub struct DatabaseBackupSpec {
    /// The Database, in this namespace, to back up.
    #[schemars(length(min = 1, max = 63))]
    pub database: String,
    /// Where to write the dump; the Database's `spec.backup.destination` when not
    /// given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<BackupDestination>,
}

/// Where a backup is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum BackupPhase {
    /// Accepted; the dump has not started.
    #[default]
    Pending,
    /// The dump is being written.
    Running,
    /// The dump is complete at `location`.
    Succeeded,
    /// No usable dump was written; `error` says why.
    Failed,
}

/// What became of a backup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DatabaseBackupStatus {
    #[serde(default)]
    pub phase: BackupPhase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<Time>,
    /// Bytes of the compressed dump.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
    /// Bytes of the dump before compression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dump_bytes: Option<i64>,
    /// Where the dump is, for people: `s3://<bucket>/<key>` or `pvc://<claim>/<key>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The destination the dump was written to and its key there, for a restore.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destination: Option<BackupDestination>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The engine and version the dump was taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<crate::Engine>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why the backup failed, as a sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// What the Database's status says about its backups.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackupsStatus {
    /// When the schedule last made a backup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scheduled: Option<Time>,
    /// The newest backup that succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_succeeded: Option<String>,
    /// When the schedule makes the next one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_scheduled: Option<Time>,
}

/// Whole hours in a retention age ("36h", "30d"), or `None` when it is not one.
pub fn max_age_hours(max_age: &str) -> Option<u64> {
    let (digits, unit) = max_age.split_at(max_age.len().checked_sub(1)?);
    if digits.is_empty() || digits.starts_with('0') || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    match unit {
        "h" => Some(n),
        "d" => n.checked_mul(24),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use serde_json::{Value, json};

    #[test]
    fn ages_are_whole_hours_or_days() {
        assert_eq!(max_age_hours("36h"), Some(36));
        assert_eq!(max_age_hours("30d"), Some(720));
        for bad in ["", "h", "0d", "07d", "1w", "1.5d", "-1d", "d1"] {
            assert_eq!(max_age_hours(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_backup_crd_is_namespaced_with_its_own_short_name() {
        let crd = serde_json::to_value(DatabaseBackup::crd()).expect("CRD serializes");
        assert_eq!(crd["metadata"]["name"], "databasebackups.mycompany.io");
        assert_eq!(crd["spec"]["scope"], "Namespaced");
        assert_eq!(crd["spec"]["names"]["shortNames"], json!(["dbbackup"]));
        // Listed with its Databases under the group's category, not in `kubectl get all`.
        assert_eq!(crd["spec"]["names"]["categories"], json!(["mycompany"]));
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["required"], json!(["database"]));
        assert_eq!(
            spec["x-kubernetes-validations"][0]["rule"],
            Value::from("self == oldSelf")
        );
    }

    #[test]
    fn a_destination_names_exactly_one_place() {
        let schema = serde_json::to_value(schemars::schema_for!(BackupDestination))
            .expect("schema serializes");
        assert_eq!(
            schema["x-kubernetes-validations"][0]["rule"],
            "has(self.s3) != has(self.volume)"
        );
    }
}
