//! The replication decisions, pure: from the instances as observed (their Pods, what
//! their engine says) and the topology (which instance is named primary), what to do
//! next. One step at a time, each safe to repeat: the controller may stop between any
//! two and take up from what it observes.
//!
//! The order that rules out two primaries: a new primary is named in the topology
//! first, then the old one loses its role label and is deleted (when it starts again,
//! its init container makes it a replica of the named primary), and only once no other
//! instance answers as a primary is the named one promoted; only then does it get the
//! primary label the `-rw` Service selects.

use jiff::Timestamp;

use super::gtid::GtidSet;

/// What an instance's engine says about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineState {
    /// Takes writes (not in recovery).
    pub primary: bool,
    /// Its position in the log: written (a primary) or replayed (a replica).
    pub position: u64,
    /// For a replica: the instance it is set to stream from.
    pub upstream: Option<String>,
    /// For a replica: whether it is streaming now.
    pub streaming: bool,
    /// For a primary: whether writes wait for a replica.
    pub synchronous: bool,
    /// For engines whose replicas stream the primary's log without the primary
    /// tracking them (postgres): how many megabytes of log the instance keeps for
    /// replicas that fall behind.
    pub log_kept_mb: Option<u64>,
    /// For a primary of such an engine, or of a mongodb replica set: the oldest
    /// position its log still holds. A replica behind it that does not stream can never
    /// catch up.
    pub oldest_log: Option<u64>,
    /// For engines whose replicas follow by transaction history (mysql): what the
    /// instance holds and what it no longer keeps in its log.
    pub history: Option<History>,
    /// For engines that elect their own primary (mongodb): the replica set as the
    /// instance sees it.
    pub replica_set: Option<ReplicaSetView>,
}

/// A mongodb instance's view of its replica set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaSetView {
    /// It has a replica-set configuration (it was initiated, or added to one).
    pub initiated: bool,
    /// On a primary: the configured members, by Pod name.
    pub members: Vec<String>,
    /// The server's own version (`7.0.14`).
    pub version: String,
    /// On a primary: the feature compatibility version (`6.0`), which says which
    /// release's data formats the set uses.
    pub compatibility: Option<String>,
    /// It is RECOVERING: a member, but neither primary nor a secondary that reads.
    pub recovering: bool,
}

/// An instance's transactions (mysql GTID sets).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    /// Every transaction the instance has applied.
    pub executed: GtidSet,
    /// Those no longer in its binary log, which it cannot send a replica.
    pub purged: GtidSet,
}

/// One instance as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub name: String,
    pub ordinal: i32,
    pub ready: bool,
    /// When the Pod last stopped being ready (or was created, if never ready).
    pub unready_since: Option<Timestamp>,
    /// For a Pod being deleted: when its grace period runs out. Its server may run
    /// until then, answering or not. `None` while the Pod runs.
    pub stopping_until: Option<Timestamp>,
    /// The role label the Pod carries.
    pub label: Option<String>,
    /// `None` when the engine could not be asked (not running, not answering).
    pub engine: Option<EngineState>,
}

impl Instance {
    /// The Pod exists and is not being deleted.
    pub fn running(&self) -> bool {
        self.stopping_until.is_none()
    }
}

/// What the Database asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    pub replicas: i32,
    pub synchronous: bool,
    pub failover_after: std::time::Duration,
    /// An instance named by the switchover annotation.
    pub switchover_to: Option<String>,
    /// How many megabytes of log the primary keeps for replicas that fall behind,
    /// where the engine reports it.
    pub log_kept_mb: u64,
}

/// One step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Name `to` the primary in the topology (and say why).
    NamePrimary { to: String, why: Why },
    /// Set or remove (None) an instance's role label.
    Label {
        pod: String,
        role: Option<&'static str>,
    },
    /// Before a healthy primary hands over: `from` stops taking writes and `to`
    /// applies everything `from` committed (mysql; postgres refuses writes once its
    /// shutdown begins, and its new primary waits for that shutdown to end instead:
    /// see `may_promote`).
    HandOver { from: String, to: String },
    /// Delete an old primary's Pod, so it starts again as a replica; a failed one
    /// (`failed`) gets a short grace period, as its server no longer answers.
    Fence { pod: String, failed: bool },
    /// Promote the named primary.
    Promote { pod: String },
    /// Make a replica stream from the named primary.
    Repoint { pod: String, primary: String },
    /// Replace an instance's data with a copy of the named primary's: its history has
    /// transactions the primary lacks, or it lacks log or transactions the primary no
    /// longer keeps.
    Reseed { pod: String, primary: String },
    /// Make writes on the primary wait for a replica, or not.
    Synchronous { pod: String, on: bool },
    /// Make the primary keep `megabytes` of log for replicas that fall behind.
    KeepLog { pod: String, megabytes: u64 },
    /// A change only a replica set that elects its own primary takes (mongodb).
    ReplicaSet(ReplicaSetStep),
}

/// The steps of a replica set that elects its own primary (mongodb): the operator
/// changes its members and asks for hand-overs; the set itself promotes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplicaSetStep {
    /// Record in the topology how many instances the set's members span.
    RecordMembersSpan { span: i32 },
    /// Start a replica set of one member on `pod`.
    Initiate { pod: String },
    /// Add `pod` to the set, through its primary.
    AddMember { primary: String, pod: String },
    /// Remove `pod` from the set, through its primary.
    RemoveMember { primary: String, pod: String },
    /// Have the elected primary hand over to `to`: the secondaries in `stay_out` sit
    /// the next election out, and the primary steps down once `to` has caught up.
    HandOver {
        primary: String,
        to: String,
        stay_out: Vec<String>,
        why: Why,
    },
    /// Move the feature compatibility version up to the series every member runs,
    /// once an upgrade has reached them all.
    RaiseCompatibility {
        primary: String,
        from: String,
        to: String,
    },
}

/// Why the primary changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Why {
    /// The primary was gone or not ready for longer than the bound.
    Failover,
    /// Asked for by the switchover annotation.
    Switchover,
    /// The primary's instance is being scaled away.
    ScaleDown,
    /// The engine's own election chose another primary (mongodb).
    Elected,
}

/// The steps for now, given the named primary and the instances.
pub fn plan(named: &str, instances: &[Instance], wanted: &Wanted, now: Timestamp) -> Vec<Step> {
    let Some(primary) = instances.iter().find(|i| i.name == named) else {
        return Vec::new();
    };
    if let Some(step) = change_of_primary(primary, instances, wanted, now) {
        return fence_after(step, primary);
    }
    let answering_primary = |i: &&Instance| i.engine.as_ref().is_some_and(|e| e.primary);
    let others_primary: Vec<&Instance> = instances
        .iter()
        .filter(|i| i.name != named)
        .filter(answering_primary)
        .collect();
    let mut steps = Vec::new();
    // An old primary still answering as one: it must go before anything is promoted.
    for old in &others_primary {
        steps.extend(fence(old, false));
    }
    let Some(primary_engine) = primary.engine.as_ref().filter(|e| e.primary) else {
        if others_primary.is_empty() && may_promote(primary, instances, now) {
            steps.push(Step::Promote {
                pod: named.to_owned(),
            });
        }
        return steps;
    };
    steps.extend(labels(named, instances));
    for replica in instances.iter().filter(|i| i.name != named) {
        let Some(engine) = replica.engine.as_ref().filter(|e| !e.primary) else {
            continue;
        };
        let (pod, primary) = (replica.name.clone(), named.to_owned());
        if engine.upstream.as_deref() != Some(named) {
            steps.push(if can_follow(engine, primary_engine) {
                Step::Repoint { pod, primary }
            } else {
                Step::Reseed { pod, primary }
            });
        } else if lost_its_log(engine, primary_engine) {
            steps.push(Step::Reseed { pod, primary });
        }
    }
    let synchronous = wanted.synchronous && wanted.replicas > 1;
    if primary_engine.synchronous != synchronous {
        steps.push(Step::Synchronous {
            pod: named.to_owned(),
            on: synchronous,
        });
    }
    if wanted.replicas > 1
        && primary_engine
            .log_kept_mb
            .is_some_and(|kept| kept != wanted.log_kept_mb)
    {
        steps.push(Step::KeepLog {
            pod: named.to_owned(),
            megabytes: wanted.log_kept_mb,
        });
    }
    steps
}

/// Whether the named instance, which answers but not as a primary, may be promoted
/// (no other instance answers as one; the caller checks that): it is ready, and no
/// other instance's Pod is being deleted, within its grace period, while its server
/// does not answer. An old primary shutting down refuses connections from the start
/// (postgres), and sends its replicas the last of its log only as it ends, so a
/// promotion before then could leave writes it acknowledged behind. Once the grace
/// period is over the server is killed, or its node is lost and nothing runs it.
fn may_promote(named: &Instance, instances: &[Instance], now: Timestamp) -> bool {
    let may_still_run = |i: &Instance| {
        i.name != named.name
            && i.engine.is_none()
            && i.stopping_until.is_some_and(|until| now < until)
    };
    named.ready && named.engine.is_some() && !instances.iter().any(may_still_run)
}

/// Whether a replica set to follow the primary cannot: it does not stream, and the
/// primary's log no longer reaches back to its position (postgres, whose primary keeps
/// only so much log for replicas). Only a copy of the primary brings it back. A
/// streaming replica is never judged: it fetches as the primary writes.
fn lost_its_log(replica: &EngineState, primary: &EngineState) -> bool {
    !replica.streaming
        && primary
            .oldest_log
            .is_some_and(|oldest| replica.position < oldest)
}

/// Whether a replica that does not follow the primary yet can start to: always where
/// the engine rewinds or clones on its own (postgres); for mysql, when the primary's
/// history holds the replica's and the primary's log still has everything the replica
/// lacks. A replica already following is never judged here: reading the two instances
/// is not atomic, and a following replica cannot have transactions of its own.
fn can_follow(replica: &EngineState, primary: &EngineState) -> bool {
    match (&replica.history, &primary.history) {
        (Some(mine), Some(theirs)) => {
            mine.executed.is_subset_of(&theirs.executed)
                && theirs.purged.is_subset_of(&mine.executed)
        }
        _ => true,
    }
}

/// The role labels: the primary's, each streaming replica's, and none elsewhere. An
/// instance whose engine did not answer this time keeps its label: a slow answer must
/// not take the primary out of `-rw`.
pub(super) fn labels(named: &str, instances: &[Instance]) -> Vec<Step> {
    instances
        .iter()
        .filter(|i| i.running() && i.engine.is_some())
        .filter_map(|i| {
            let wanted = match &i.engine {
                Some(e) if e.primary && i.name == named => Some(crate::resources::meta::PRIMARY),
                Some(e) if !e.primary && e.streaming && e.upstream.as_deref() == Some(named) => {
                    Some(crate::resources::meta::REPLICA)
                }
                _ => None,
            };
            (i.label.as_deref() != wanted).then(|| Step::Label {
                pod: i.name.clone(),
                role: wanted,
            })
        })
        .collect()
}

/// A new primary to name, if the named one has failed, is asked to hand over, or is
/// being scaled away.
fn change_of_primary(
    primary: &Instance,
    instances: &[Instance],
    wanted: &Wanted,
    now: Timestamp,
) -> Option<Step> {
    let healthy_primary = primary.engine.as_ref().is_some_and(|e| e.primary) && primary.ready;
    if let Some(target) = &wanted.switchover_to
        && *target != primary.name
        && healthy_primary
        && instances
            .iter()
            .any(|i| i.name == *target && is_candidate(i, &primary.name, wanted))
    {
        return Some(Step::NamePrimary {
            to: target.clone(),
            why: Why::Switchover,
        });
    }
    if primary.ordinal >= wanted.replicas && healthy_primary {
        return best_candidate(&primary.name, instances, wanted).map(|to| Step::NamePrimary {
            to,
            why: Why::ScaleDown,
        });
    }
    let failed = !primary.ready
        && primary
            .unready_since
            .is_some_and(|since| now.duration_since(since).unsigned_abs() >= wanted.failover_after);
    if failed {
        return best_candidate(&primary.name, instances, wanted).map(|to| Step::NamePrimary {
            to,
            why: Why::Failover,
        });
    }
    None
}

/// A ready replica that stays after scaling.
fn is_candidate(instance: &Instance, primary: &str, wanted: &Wanted) -> bool {
    instance.name != primary
        && instance.ready
        && instance.ordinal < wanted.replicas
        && instance.engine.as_ref().is_some_and(|e| !e.primary)
}

/// The most advanced candidate (the lowest ordinal among equals).
fn best_candidate(primary: &str, instances: &[Instance], wanted: &Wanted) -> Option<String> {
    instances
        .iter()
        .filter(|i| is_candidate(i, primary, wanted))
        .max_by_key(|i| (i.engine.as_ref().map_or(0, |e| e.position), -i.ordinal))
        .map(|i| i.name.clone())
}

/// Naming a new primary, then fencing the old one, in that order; a healthy old
/// primary (a switchover, a scale-down) first hands its writes over.
fn fence_after(step: Step, old: &Instance) -> Vec<Step> {
    let hand_over = match &step {
        Step::NamePrimary {
            to,
            why: Why::Switchover | Why::ScaleDown,
        } => Some(Step::HandOver {
            from: old.name.clone(),
            to: to.clone(),
        }),
        _ => None,
    };
    let failed = matches!(
        step,
        Step::NamePrimary {
            why: Why::Failover,
            ..
        }
    );
    let mut steps: Vec<Step> = hand_over.into_iter().collect();
    steps.push(step);
    steps.extend(fence(old, failed));
    steps
}

/// Taking the role label off an old primary, then deleting its Pod (see
/// [`Step::Fence`] for `failed`).
fn fence(old: &Instance, failed: bool) -> Vec<Step> {
    let unlabel = old.label.is_some().then(|| Step::Label {
        pod: old.name.clone(),
        role: None,
    });
    let delete = old.running().then(|| Step::Fence {
        pod: old.name.clone(),
        failed,
    });
    unlabel.into_iter().chain(delete).collect()
}

#[cfg(test)]
mod tests;
