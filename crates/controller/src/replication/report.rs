//! What a replication pass reports: the primary, each instance's role and lag, the
//! Replicated condition, and when to look again.

use std::fmt::Write as _;
use std::time::Duration;

use database_api::conditions::reason;
use database_api::replication::{
    InstanceStatus, LAG_BOUND_BYTES, LAG_BOUND_SECONDS, LAG_BOUND_TRANSACTIONS, Role,
};
use jiff::Timestamp;

use super::plan::{EngineState, Instance, Wanted};
use super::{REFRESH, Report};

/// Status and the Replicated condition from what was observed.
pub fn of(named: &str, instances: &[Instance], wanted: &Wanted, now: Timestamp) -> Report {
    let primary_engine = instances
        .iter()
        .find(|i| i.name == named)
        .and_then(|i| i.engine.as_ref())
        .filter(|e| e.primary);
    let primary_position = primary_engine.map(|e| e.position);
    let unit = primary_engine.map_or(Unit::Bytes, Unit::of);
    let statuses: Vec<InstanceStatus> = instances
        .iter()
        .map(|i| status(i, primary_position, unit))
        .collect();
    let replicas: Vec<&InstanceStatus> = statuses.iter().filter(|s| s.name != named).collect();
    let behind = behind(named, instances, &replicas, unit.bound());
    let replicated = replicated(
        named,
        wanted,
        unit,
        primary_position.is_some(),
        replicas.len(),
        &behind,
    );
    Report {
        primary: primary_position.map(|_| named.to_owned()),
        instances: statuses,
        replicated: Some(replicated),
        events: Vec::new(),
        requeue: Some(next_look(named, instances, wanted, now)),
        labels: Vec::new(),
    }
}

/// An instance's role and readiness, and its lag behind the primary's position in the
/// field of `unit`.
fn status(i: &Instance, primary_position: Option<u64>, unit: Unit) -> InstanceStatus {
    let lag = lag(i, primary_position, unit);
    InstanceStatus {
        name: i.name.clone(),
        role: match &i.engine {
            Some(EngineState { primary: true, .. }) => Role::Primary,
            Some(_) => Role::Replica,
            None => Role::Unknown,
        },
        ready: i.ready,
        lag_bytes: lag.filter(|_| unit == Unit::Bytes),
        lag_transactions: lag.filter(|_| unit == Unit::Transactions),
        lag_seconds: lag.filter(|_| unit == Unit::Milliseconds),
    }
}

/// How far a replica is behind the primary, in `unit` (mongodb's milliseconds reported
/// as seconds); `None` for the primary or an instance that did not answer.
fn lag(i: &Instance, primary_position: Option<u64>, unit: Unit) -> Option<i64> {
    match (&i.engine, primary_position) {
        (Some(e), Some(at)) if !e.primary => {
            let behind = i64::try_from(at.saturating_sub(e.position)).unwrap_or(i64::MAX);
            Some(match unit {
                Unit::Milliseconds => behind / 1000,
                Unit::Bytes | Unit::Transactions => behind,
            })
        }
        _ => None,
    }
}

/// The replicas that do not stream from `named` within `bound`.
fn behind<'a>(
    named: &str,
    instances: &[Instance],
    replicas: &[&'a InstanceStatus],
    bound: i64,
) -> Vec<&'a str> {
    let in_step = |s: &&InstanceStatus| {
        instances.iter().any(|i| {
            i.name == s.name
                && i.engine
                    .as_ref()
                    .is_some_and(|e| e.streaming && e.upstream.as_deref() == Some(named))
        }) && s
            .lag_bytes
            .or(s.lag_transactions)
            .or(s.lag_seconds)
            .is_some_and(|l| l <= bound)
    };
    replicas
        .iter()
        .filter(|s| !in_step(s))
        .map(|s| s.name.as_str())
        .collect()
}

/// The Replicated condition: status, reason, message. `replicas` counts the instances
/// other than the primary, `behind` names those not in step.
fn replicated(
    named: &str,
    wanted: &Wanted,
    unit: Unit,
    primary_writes: bool,
    replicas: usize,
    behind: &[&str],
) -> (bool, &'static str, String) {
    let expected = usize::try_from(wanted.replicas.saturating_sub(1)).unwrap_or(0);
    if wanted.replicas <= 1 {
        (
            false,
            reason::SINGLE_INSTANCE,
            "one instance: nothing to replicate".to_owned(),
        )
    } else if !primary_writes {
        (
            false,
            reason::NO_PRIMARY,
            format!("{named} is named primary but does not take writes yet"),
        )
    } else if replicas < expected || !behind.is_empty() {
        let missing = expected.saturating_sub(replicas);
        let mut message = format!(
            "not every replica streams from {named} within {}",
            unit.bound_in_words()
        );
        if !behind.is_empty() {
            let _ = write!(message, ": {}", behind.join(", "));
        }
        if missing > 0 {
            let _ = write!(message, "; {missing} not created yet");
        }
        (false, reason::REPLICAS_BEHIND, message)
    } else {
        let mode = if wanted.synchronous {
            "synchronously"
        } else {
            "asynchronously"
        };
        (
            true,
            reason::STREAMING,
            format!("{replicas} replica(s) stream {mode} from {named}"),
        )
    }
}

/// What an engine's log positions count.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    /// postgres: bytes of WAL.
    Bytes,
    /// mysql: transactions (GTIDs).
    Transactions,
    /// mongodb: the wall-clock time of the last write.
    Milliseconds,
}

impl Unit {
    fn of(engine: &EngineState) -> Self {
        if engine.history.is_some() {
            Self::Transactions
        } else if engine.replica_set.is_some() {
            Self::Milliseconds
        } else {
            Self::Bytes
        }
    }

    fn bound_in_words(self) -> String {
        match self {
            Self::Transactions => format!("{LAG_BOUND_TRANSACTIONS} transactions"),
            Self::Milliseconds => format!("{LAG_BOUND_SECONDS} seconds"),
            Self::Bytes => format!("{} MiB", LAG_BOUND_BYTES >> 20),
        }
    }

    /// The lag bound, in the unit status reports it in.
    fn bound(self) -> i64 {
        match self {
            Self::Bytes => LAG_BOUND_BYTES,
            Self::Transactions => LAG_BOUND_TRANSACTIONS,
            Self::Milliseconds => LAG_BOUND_SECONDS,
        }
    }
}

/// When to look again: soon, and sooner when a failover bound runs out before then.
fn next_look(named: &str, instances: &[Instance], wanted: &Wanted, now: Timestamp) -> Duration {
    let deadline = instances
        .iter()
        .find(|i| i.name == named && !i.ready)
        .and_then(|i| i.unready_since)
        .map(|since| {
            let left = wanted
                .failover_after
                .saturating_sub(now.duration_since(since).unsigned_abs());
            left.max(Duration::from_secs(1))
        });
    deadline.map_or(REFRESH, |d| d.min(REFRESH))
}

/// For instances whose engines are not asked (one instance, or independent ones): the
/// named primary's Pod as the primary once it is ready, the others as they are.
pub fn unasked(named: &str, instances: &[Instance]) -> Report {
    let statuses = instances
        .iter()
        .map(|i| InstanceStatus {
            name: i.name.clone(),
            role: if i.name == named {
                Role::Primary
            } else {
                Role::Unknown
            },
            ready: i.ready,
            lag_bytes: None,
            lag_transactions: None,
            lag_seconds: None,
        })
        .collect();
    let primary_ready = instances.iter().any(|i| i.name == named && i.ready);
    Report {
        primary: primary_ready.then(|| named.to_owned()),
        instances: statuses,
        ..Report::default()
    }
}
