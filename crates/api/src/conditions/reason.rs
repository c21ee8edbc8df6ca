//! The reasons the operator writes: on a Database's (or DatabaseBackup's) conditions,
//! and on the Events it publishes. A reason is a CamelCase word a machine can match
//! on; the message next to it is for people. Some reasons serve both a condition and
//! an Event (`InvalidSpec`, `BackupFailed`, `RestoreFailed`, ...).

// Ready.

/// Ready is true: every desired instance is ready.
pub const ALL_REPLICAS_READY: &str = "AllReplicasReady";
/// Ready is false and Degraded true (and a Warning event): the spec breaks a rule.
pub const INVALID_SPEC: &str = "InvalidSpec";
/// Ready is false because the Database failed for a reason other than its spec.
pub const DEGRADED: &str = "Degraded";
/// Ready is false because the Database is being deleted.
pub const TERMINATING: &str = "Terminating";
/// Ready is false while the instances are pending or being created.
pub const REPLICAS_NOT_READY: &str = "ReplicasNotReady";
/// Ready is false while a major version upgrade is under way.
pub const UPGRADING: &str = "Upgrading";

// Progressing.

/// Progressing is true: the Database is pending, creating or upgrading.
pub const ROLLING_OUT: &str = "RollingOut";
/// Progressing is false: nothing is rolling out.
pub const IDLE: &str = "Idle";

// Degraded.

/// Degraded is false: nothing needs attention.
pub const AS_EXPECTED: &str = "AsExpected";
/// Degraded is true (and a Warning event): an object the Database would own is someone else's.
pub const OWNERSHIP_CONFLICT: &str = "OwnershipConflict";
/// Degraded is true when spec.storage asks for less than the volumes hold.
pub const STORAGE_SHRINK_REFUSED: &str = "StorageShrinkRefused";
/// Degraded is true when a volume's StorageClass does not allow expansion.
pub const EXPANSION_NOT_SUPPORTED: &str = "ExpansionNotSupported";
/// Degraded is true after an upgrade was rolled back; also the Warning event when it fails.
pub const UPGRADE_FAILED: &str = "UpgradeFailed";

// Replicated.

/// Replicated is false: one instance has nothing to replicate.
pub const SINGLE_INSTANCE: &str = "SingleInstance";
/// Replicated is false: the operator does not run the engine's replication for these instances.
pub const NOT_CONFIGURED: &str = "NotConfigured";
/// Replicated is false: the instance named primary does not take writes yet.
pub const NO_PRIMARY: &str = "NoPrimary";
/// Replicated is false: a replica is missing or not within the lag bound.
pub const REPLICAS_BEHIND: &str = "ReplicasBehind";
/// Replicated is true: every replica streams from the primary within the lag bound.
pub const STREAMING: &str = "Streaming";

// Restored.

/// Restored is false: the restore from a dump has not started, and says what it waits for.
pub const WAITING: &str = "Waiting";
/// Restored is false: the restore Job is streaming the dump in.
pub const RESTORING: &str = "Restoring";
/// Restored is true (and the Normal event) once the dump is restored.
pub const RESTORED: &str = "Restored";
/// Restored is false (and the Warning event) when the restore failed; this is final.
pub const RESTORE_FAILED: &str = "RestoreFailed";

// LastBackupSucceeded, and the events on a DatabaseBackup.

/// LastBackupSucceeded is true (and the Normal event) when a backup stored its dump.
pub const BACKUP_SUCCEEDED: &str = "BackupSucceeded";
/// LastBackupSucceeded is false (and the Warning event) when a backup failed.
pub const BACKUP_FAILED: &str = "BackupFailed";
/// Warning event: a deleted backup's dump could not be deleted, so the backup stays.
pub const DUMP_NOT_DELETED: &str = "DumpNotDeleted";

// MonitoringReady.

/// MonitoringReady is true: the exporter's user exists with its rights.
pub const MONITORING_USER_READY: &str = "UserReady";
/// MonitoringReady is false: the user is not made yet, and the message says why.
pub const MONITORING_PENDING: &str = "UserPending";
/// MonitoringReady is false: the Database no longer asks for an exporter.
pub const MONITORING_DISABLED: &str = "Disabled";

// Paused.

/// Paused is true: the `mycompany.io/paused` annotation holds reconciliation.
pub const PAUSED: &str = "Paused";
/// Paused is false: the Database is reconciled.
pub const RECONCILING: &str = "Reconciling";

// Events about the Database and its StatefulSet.

/// Normal event: the StatefulSet was created.
pub const CREATED: &str = "Created";
/// Normal event: the StatefulSet's replica count changed.
pub const SCALED: &str = "Scaled";
/// Normal event: the StatefulSet was updated without a change of replicas.
pub const UPDATED: &str = "Updated";
/// Normal event: the Database is being deleted, with its deletion policy.
pub const DELETING: &str = "Deleting";
/// Warning event: a reconcile pass ended in an error.
pub const RECONCILE_FAILED: &str = "ReconcileFailed";
/// Normal event: the volume claims were resized and the StatefulSet is recreated.
pub const STORAGE_RESIZED: &str = "StorageResized";
/// Normal event: every instance runs with a new settings revision.
pub const PARAMETERS_APPLIED: &str = "ParametersApplied";

// Events about a major version upgrade.

/// Normal event: writes are held and the upgrade's backup is being taken.
pub const UPGRADE_STARTED: &str = "UpgradeStarted";
/// Normal event: the Database runs the new version.
pub const UPGRADED: &str = "Upgraded";

// Events about replication.

/// Warning event: the switchover annotation names a Pod that is not an instance.
pub const SWITCHOVER_REFUSED: &str = "SwitchoverRefused";
/// Normal event: the old primary no longer takes writes.
pub const FENCED: &str = "Fenced";
/// Normal event: an instance was promoted to primary.
pub const PROMOTED: &str = "Promoted";
/// Normal event: a replica is being copied from the primary again.
pub const RESEEDING: &str = "Reseeding";
/// Warning event: the last copy of the primary into a replica failed.
pub const RESEED_FAILED: &str = "ReseedFailed";
/// Normal event: the primary's synchronous mode was turned on or off.
pub const REPLICATION_MODE_CHANGED: &str = "ReplicationModeChanged";
/// Normal event: a mongodb replica set was initiated.
pub const REPLICA_SET_INITIATED: &str = "ReplicaSetInitiated";
/// Normal event: an instance joined the mongodb replica set.
pub const MEMBER_ADDED: &str = "MemberAdded";
/// Normal event: an instance left the mongodb replica set before being scaled away.
pub const MEMBER_REMOVED: &str = "MemberRemoved";
/// Normal event: the mongodb feature compatibility version was raised.
pub const COMPATIBILITY_RAISED: &str = "CompatibilityRaised";
/// Normal event: the primary moves to another instance, as asked or for a scale-down.
pub const SWITCHING_OVER: &str = "SwitchingOver";
/// Normal event: the primary was not ready for too long and another instance takes over.
pub const FAILING_OVER: &str = "FailingOver";
/// Normal event: the mongodb replica set elected a primary.
pub const PRIMARY_ELECTED: &str = "PrimaryElected";
