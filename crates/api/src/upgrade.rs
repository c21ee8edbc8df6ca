//! Major-version upgrades, by dump and restore or in place after a backup: what the
//! status records of one, so every pass (and a restarted controller) knows where it stands and
//! what to go back to.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Annotation holding the data directory of the version the instances run, when it is
/// not the one the engine's layout gives for that version: each upgraded major gets a
/// directory of its own, and the one before stays beside it.
pub const DATA_DIRECTORY_ANNOTATION: &str = "mycompany.io/data-directory";

/// Label on the backup an upgrade takes first (retention leaves it alone).
pub const UPGRADE_LABEL: &str = "mycompany.io/upgrade";

/// Where an upgrade is in its life.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum UpgradePhase {
    /// Writes are held and the backup of the old version is being taken.
    #[default]
    BackingUp,
    /// The new version runs in its own data directory; the backup is being restored.
    Restoring,
    /// The new version starts on the same files and converts them (an in-place upgrade).
    Switching,
    /// The new version runs with the restored data.
    Succeeded,
    /// The upgrade failed: the old version runs again on its untouched data.
    RolledBack,
}

/// The last major-version upgrade by dump and restore.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeStatus {
    #[serde(default)]
    pub phase: UpgradePhase,
    /// The version the data was on.
    pub from_version: String,
    /// The version asked for.
    pub to_version: String,
    /// Where the old version keeps its data (kept until the Database is deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_directory: Option<String>,
    /// Whether the new version converts the old files itself (mysql, mongodb) rather
    /// than being filled from the backup (postgres).
    #[serde(default)]
    pub in_place: bool,
    /// Where the new version keeps its data, when not in the old files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_directory: Option<String>,
    /// The DatabaseBackup taken first.
    pub backup: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Time>,
    /// Whether new sessions are read-only, to be undone once the server running the
    /// data takes writes again.
    #[serde(default)]
    pub writes_held: bool,
    /// What happened, as a sentence: why it rolled back, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
