//! The decisions for engines that elect their own primary (mongodb), pure: the
//! operator initiates the replica set, adds and removes members as the Database scales,
//! hands the primary over when asked (or when its instance is scaled away), and follows
//! the elections: it names the elected primary in the topology, and moves the role
//! labels the `-rw` and `-ro` Services select. One step at a time, each safe to repeat.
//!
//! `-rw` never selects two Pods: only the instance the topology names carries the
//! primary label, and a newly elected primary is named (and the old one unlabelled) one
//! pass before it is labelled. The replica set itself never lets two primaries commit a
//! majority write: a write acknowledged by a majority survives any election.

use super::plan::{Instance, ReplicaSetStep, ReplicaSetView, Step, Wanted, Why, labels};
use crate::resources::meta::PRIMARY;

/// The steps for now, given the named primary and the instances.
pub fn plan(
    named: &str,
    recorded_span: Option<i32>,
    instances: &[Instance],
    wanted: &Wanted,
) -> Vec<Step> {
    let initiated = |i: &&Instance| {
        i.engine
            .as_ref()
            .and_then(|e| e.replica_set.as_ref())
            .is_some_and(|s| s.initiated)
    };
    if !instances.iter().any(|i| initiated(&i)) {
        return initiate(named, instances);
    }
    let writable: Vec<&Instance> = instances
        .iter()
        .filter(|i| i.engine.as_ref().is_some_and(|e| e.primary))
        .collect();
    let [elected] = writable.as_slice() else {
        // None yet (an election is under way), or two for a moment (an old primary
        // that has not noticed it lost): `-rw` keeps only the named one meanwhile.
        return unlabel_all_but(named, instances);
    };
    if elected.name != named {
        let mut steps = vec![Step::NamePrimary {
            to: elected.name.clone(),
            why: Why::Elected,
        }];
        steps.extend(unlabel_all_but(&elected.name, instances));
        return steps;
    }
    let mut steps = labels(named, instances);
    let span = members(elected)
        .iter()
        .filter_map(|m| super::ordinal(m))
        .max()
        .map(|highest| highest + 1);
    if let Some(span) = span.filter(|s| Some(*s) != recorded_span) {
        steps.push(Step::ReplicaSet(ReplicaSetStep::RecordMembersSpan { span }));
    }
    steps.extend(membership(elected, instances, wanted));
    steps
}

/// The members of the set, as its primary configures them.
fn members(primary: &Instance) -> &[String] {
    primary
        .engine
        .as_ref()
        .and_then(|e| e.replica_set.as_ref())
        .map_or(&[], |s| &s.members)
}

/// Initiating a set of one: only once every running instance answered and none has a
/// configuration, so a set is never started twice.
fn initiate(named: &str, instances: &[Instance]) -> Vec<Step> {
    let all_answered = instances
        .iter()
        .filter(|i| i.running())
        .all(|i| i.engine.is_some());
    let first = instances
        .iter()
        .find(|i| i.name == named && i.running() && i.engine.is_some());
    match first {
        Some(first) if all_answered => vec![Step::ReplicaSet(ReplicaSetStep::Initiate {
            pod: first.name.clone(),
        })],
        _ => Vec::new(),
    }
}

/// Removing the primary label from every instance but `keep`.
fn unlabel_all_but(keep: &str, instances: &[Instance]) -> Vec<Step> {
    instances
        .iter()
        .filter(|i| i.name != keep && i.label.as_deref() == Some(PRIMARY))
        .map(|i| Step::Label {
            pod: i.name.clone(),
            role: None,
        })
        .collect()
}

/// Hand-overs, then one change of membership, then the write concern.
fn membership(primary: &Instance, instances: &[Instance], wanted: &Wanted) -> Vec<Step> {
    if let Some(steps) = hand_overs(primary, instances, wanted) {
        return steps;
    }
    if let Some(step) = too_stale(primary, instances, wanted.replicas) {
        return vec![step];
    }
    if let Some(step) = member_change(primary, instances, wanted) {
        return vec![step];
    }
    if let Some(step) = write_concern(primary, wanted) {
        return vec![step];
    }
    raise_compatibility(primary, instances, wanted.replicas)
}

/// Whether `i` is a ready member, kept at this scale, that streams from the primary
/// and so may take the primary over.
fn caught_up_secondary(i: &Instance, members: &[String], replicas: i32) -> bool {
    i.ready
        && i.running()
        && i.ordinal < replicas
        && members.contains(&i.name)
        && i.engine.as_ref().is_some_and(|e| !e.primary && e.streaming)
}

/// A member kept at this scale that recovers with its last write older than the oldest
/// entry the primary's oplog still holds: the entries it lacks are gone, so it can
/// never catch up (mongodb calls it too stale and leaves it recovering). Only a copy of
/// the set into emptied data (an initial sync) brings it back. A member that copies
/// its initial data, or reads as a secondary, is never judged.
fn too_stale(primary: &Instance, instances: &[Instance], replicas: i32) -> Option<Step> {
    let oldest = primary.engine.as_ref()?.oldest_log?;
    let members = members(primary);
    let stale = |i: &&Instance| {
        i.running()
            && i.ordinal < replicas
            && members.contains(&i.name)
            && i.engine.as_ref().is_some_and(|e| {
                !e.primary
                    && !e.streaming
                    && e.position < oldest
                    && e.replica_set.as_ref().is_some_and(|v| v.recovering)
            })
    };
    instances.iter().find(stale).map(|i| Step::Reseed {
        pod: i.name.clone(),
        primary: primary.name.clone(),
    })
}

/// Handing the primary over: to the switchover's target once it has caught up, or, when
/// the primary's instance is scaled away, to the most advanced secondary. `None` when
/// neither is asked; while the primary is scaled away, no other step is taken, even
/// with no secondary to hand over to.
fn hand_overs(primary: &Instance, instances: &[Instance], wanted: &Wanted) -> Option<Vec<Step>> {
    let members = members(primary);
    let caught_up = |i: &&Instance| caught_up_secondary(i, members, wanted.replicas);
    if let Some(target) = &wanted.switchover_to
        && *target != primary.name
        && instances.iter().any(|i| i.name == *target && caught_up(&i))
    {
        return Some(hand_over(
            primary,
            instances,
            target.clone(),
            Why::Switchover,
        ));
    }
    (primary.ordinal >= wanted.replicas).then(|| {
        instances
            .iter()
            .filter(caught_up)
            .max_by_key(|i| (i.engine.as_ref().map_or(0, |e| e.position), -i.ordinal))
            .map(|to| hand_over(primary, instances, to.name.clone(), Why::ScaleDown))
            .unwrap_or_default()
    })
}

/// The hand-over to `to`: the other streaming instances stay out of the election.
fn hand_over(primary: &Instance, instances: &[Instance], to: String, why: Why) -> Vec<Step> {
    let stay_out = instances
        .iter()
        .filter(|i| i.name != to && i.name != primary.name && i.running())
        .filter(|i| i.engine.as_ref().is_some_and(|e| e.streaming))
        .map(|i| i.name.clone())
        .collect();
    vec![Step::ReplicaSet(ReplicaSetStep::HandOver {
        primary: primary.name.clone(),
        to,
        stay_out,
        why,
    })]
}

/// One change of membership: a member scaled away leaves, else an instance that is not
/// a member yet joins.
fn member_change(primary: &Instance, instances: &[Instance], wanted: &Wanted) -> Option<Step> {
    let members = members(primary);
    // Members scaled away go first, the highest first, before their Pods are gone.
    let leaving = members
        .iter()
        .filter(|m| super::ordinal(m).is_some_and(|o| o >= wanted.replicas))
        .max_by_key(|m| super::ordinal(m));
    if let Some(pod) = leaving {
        return Some(Step::ReplicaSet(ReplicaSetStep::RemoveMember {
            primary: primary.name.clone(),
            pod: pod.clone(),
        }));
    }
    let is_member = |name: &str| members.iter().any(|m| m == name);
    let joining = instances.iter().find(|i| {
        i.running() && i.ordinal < wanted.replicas && i.engine.is_some() && !is_member(&i.name)
    })?;
    Some(Step::ReplicaSet(ReplicaSetStep::AddMember {
        primary: primary.name.clone(),
        pod: joining.name.clone(),
    }))
}

/// Switching the primary's write concern when it differs from the one wanted.
fn write_concern(primary: &Instance, wanted: &Wanted) -> Option<Step> {
    let synchronous = wanted.synchronous && wanted.replicas > 1;
    primary
        .engine
        .as_ref()
        .is_some_and(|e| e.synchronous != synchronous)
        .then(|| Step::Synchronous {
            pod: primary.name.clone(),
            on: synchronous,
        })
}

/// Raising the feature compatibility version to the series every wanted instance runs,
/// once they all run it and are ready: the last step of a major upgrade (mongodb moves
/// one major at a time, and the next upgrade needs the version raised).
fn raise_compatibility(primary: &Instance, instances: &[Instance], replicas: i32) -> Vec<Step> {
    let Some(from) = view(primary).and_then(|v| v.compatibility.clone()) else {
        return Vec::new();
    };
    let wanted: Vec<&Instance> = instances.iter().filter(|i| i.ordinal < replicas).collect();
    let each: Vec<Option<(u32, u32)>> = wanted
        .iter()
        .map(|i| {
            view(i)
                .filter(|_| i.running() && i.ready)
                .and_then(|v| series(&v.version))
        })
        .collect();
    let Some(Some(running)) = each.first().copied() else {
        return Vec::new();
    };
    let all_run_it = wanted.len() == usize::try_from(replicas).unwrap_or(0)
        && each.iter().all(|s| *s == Some(running));
    match series(&from) {
        Some(current) if all_run_it && current < running => {
            vec![Step::ReplicaSet(ReplicaSetStep::RaiseCompatibility {
                primary: primary.name.clone(),
                from,
                to: format!("{}.{}", running.0, running.1),
            })]
        }
        _ => Vec::new(),
    }
}

fn view(instance: &Instance) -> Option<&ReplicaSetView> {
    instance.engine.as_ref()?.replica_set.as_ref()
}

/// A version's release series: `7.0.14` is `(7, 0)`.
fn series(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.').map(str::parse::<u32>);
    Some((parts.next()?.ok()?, parts.next()?.ok()?))
}

#[cfg(test)]
mod tests;
