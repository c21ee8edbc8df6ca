//! Replication between a Database's instances: what the user chooses (`spec.replication`)
//! and what the controller reports (`status.primary`, `status.instances`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Seconds the primary may be gone or not ready before a replica is promoted, when the
/// user gives none.
pub const DEFAULT_FAILOVER_AFTER_SECONDS: i32 = 30;
/// Bounds of `spec.replication.failoverAfterSeconds`.
pub const MIN_FAILOVER_AFTER_SECONDS: i32 = 10;
pub const MAX_FAILOVER_AFTER_SECONDS: i32 = 3600;
/// A postgres replica more than this many bytes of WAL behind the primary does not
/// count as in step for the Replicated condition.
pub const LAG_BOUND_BYTES: i64 = 16 << 20;
/// A mysql replica more than this many transactions behind the primary does not count
/// as in step for the Replicated condition.
pub const LAG_BOUND_TRANSACTIONS: i64 = 1000;
/// A mongodb secondary whose last write is more than this many seconds older than the
/// primary's does not count as in step for the Replicated condition (an idle primary
/// writes a no-op every 10 seconds).
pub const LAG_BOUND_SECONDS: i64 = 30;

/// How the instances replicate when there is more than one.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Replication {
    /// `Async` (the default): a write is acknowledged once the primary has it, so a
    /// failover may lose the last acknowledged writes. `Sync`: a write is acknowledged
    /// only once a replica has it too, so a failover loses none, and writes wait while
    /// no replica is streaming.
    #[serde(default)]
    pub mode: ReplicationMode,

    /// Seconds the primary may be gone or not ready before the most advanced replica is
    /// promoted, 10 to 3600 (default 30).
    #[serde(default = "default_failover_after")]
    #[schemars(extend("minimum" = 10, "maximum" = 3600))]
    pub failover_after_seconds: i32,
}

impl Default for Replication {
    fn default() -> Self {
        Self {
            mode: ReplicationMode::default(),
            failover_after_seconds: DEFAULT_FAILOVER_AFTER_SECONDS,
        }
    }
}

fn default_failover_after() -> i32 {
    DEFAULT_FAILOVER_AFTER_SECONDS
}

/// Whether a write waits for a replica.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ReplicationMode {
    #[default]
    Async,
    Sync,
}

/// What one instance is doing.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum Role {
    /// Takes writes; the `-rw` Service selects it.
    Primary,
    /// Streams from the primary; the `-ro` Service selects it.
    Replica,
    /// Not known yet: not running, or not asked.
    Unknown,
}

/// One instance as the controller last saw it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    /// The Pod's name.
    pub name: String,
    pub role: Role,
    /// Whether the Pod is ready.
    pub ready: bool,
    /// For a postgres replica: how many bytes of the primary's log it does not have on
    /// disk yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_bytes: Option<i64>,
    /// For a mysql replica: how many of the primary's transactions it has neither
    /// applied nor received yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_transactions: Option<i64>,
    /// For a mongodb secondary: how many seconds its last write is behind the
    /// primary's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_seconds: Option<i64>,
}

/// The annotation that asks for a switchover: its value names the instance (a Pod of
/// this Database) to make the primary.
pub const SWITCHOVER_ANNOTATION: &str = "mycompany.io/switchover-to";
