//! Status: computed purely from the Database and what the controller observed, then
//! written through the status subresource only when it changed.

use database_api::conditions::{
    self, DEGRADED, LAST_BACKUP_SUCCEEDED, MONITORING_READY, PAUSED, PROGRESSING, READY,
    REPLICATED, RESTORED, reason,
};
use database_api::constants::FIELD_MANAGER;
use database_api::upgrade::UpgradePhase;
use database_api::{Binding, Database, DatabaseStatus, Phase};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::backup::restore::Restore;
use crate::error::Error;
use crate::resources::meta::{connection_secret_name, selector_string};
use crate::resources::secret::endpoint;

/// What the reconcile learned besides the StatefulSet.
#[derive(Debug, Default, Clone)]
pub struct Facts {
    /// The spec breaks a rule; the message names the fields.
    pub invalid: Option<String>,
    /// The paused annotation is set.
    pub paused: bool,
    /// While paused: the owned objects that differ from what the spec asks for.
    pub held: Vec<String>,
    /// The Database is being deleted.
    pub terminating: bool,
    /// A write failed or a change was refused: (reason, message).
    pub degraded: Option<(&'static str, String)>,
    /// What the replication pass found.
    pub replication: Option<crate::replication::Report>,
    /// Where a restore from a dump is, for a Database created from one.
    pub restore: Option<crate::backup::restore::Restore>,
    /// What the Database's backups call for (its status part, LastBackupSucceeded).
    pub backups: Option<crate::backup::schedule::Plan>,
    /// The major upgrade this pass recorded, if one is under way or just ended.
    pub upgrade: Option<database_api::upgrade::UpgradeStatus>,
    /// The settings revision every instance took this pass.
    pub parameters_applied: Option<String>,
    /// Whether the exporter's user is in place, when there is something to say.
    pub monitoring: Option<crate::monitoring::Verdict>,
    /// The instances as the Pods this pass listed show them, ahead of the StatefulSet.
    pub counted: Option<super::counted::Counted>,
}

/// Replica counts read from the StatefulSet, or from its Pods where they are further on.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Rollout {
    ready: i32,
    updated: i32,
    current_generation: bool,
}

fn rollout(db: &Database, statefulset: Option<&StatefulSet>, facts: &Facts) -> Option<Rollout> {
    let set = statefulset?;
    let status = set.status.as_ref();
    let observed = status.and_then(|s| s.observed_generation);
    let desired_replicas = db.spec.replicas;
    let spec_replicas = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
    // Either count may lag the other; the Pods are usually ahead, and a Pod that stopped
    // being ready brings a pass of its own.
    let counted = facts.counted.unwrap_or_default();
    Some(Rollout {
        ready: status
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0)
            .max(counted.ready),
        updated: status
            .and_then(|s| s.updated_replicas)
            .unwrap_or(0)
            .max(counted.updated),
        current_generation: observed.is_some()
            && observed == set.metadata.generation
            && spec_replicas == desired_replicas,
    })
}

/// A condition's status, reason and message.
type Verdict = (bool, &'static str, String);

/// The status `db` should show, given the StatefulSet as last seen and `facts`.
pub fn compute(
    db: &Database,
    statefulset: Option<&StatefulSet>,
    facts: &Facts,
    now: &Time,
    cluster_domain: &str,
) -> DatabaseStatus {
    let previous = db.status.clone().unwrap_or_default();
    let rollout = rollout(db, statefulset, facts);
    let (phase, message) = shown_phase(db, facts, rollout, previous.phase);
    let conditions = condition_list(db, facts, phase, &message, previous.conditions, now);
    DatabaseStatus {
        phase,
        ready: phase == Phase::Running,
        message: Some(message),
        endpoint: Some(endpoint(db, cluster_domain)),
        replicas: rollout.map_or(0, |r| r.ready),
        primary: facts.replication.as_ref().and_then(|r| r.primary.clone()),
        instances: facts
            .replication
            .as_ref()
            .map(|r| r.instances.clone())
            .unwrap_or_default(),
        selector: Some(selector_string(db)),
        observed_generation: db.metadata.generation,
        conditions,
        backups: match &facts.backups {
            Some(plan) => plan.status.clone().map(Box::new),
            None => previous.backups,
        },
        upgrade: facts.upgrade.clone().map(Box::new).or(previous.upgrade),
        parameters_revision: parameters_revision(db, facts, previous.parameters_revision),
        binding: binding(db, statefulset, previous.binding),
    }
}

/// The connection Secret, named once the pass that writes it with the StatefulSet has
/// run; a Service Binding controller waits for the name to appear.
fn binding(
    db: &Database,
    statefulset: Option<&StatefulSet>,
    previous: Option<Binding>,
) -> Option<Binding> {
    statefulset
        .map(|_| Binding {
            name: connection_secret_name(db),
        })
        .or(previous)
}

/// The phase and its message. A pause keeps the `previous` phase, except while the
/// Database is being deleted.
fn shown_phase(
    db: &Database,
    facts: &Facts,
    rollout: Option<Rollout>,
    previous: Phase,
) -> (Phase, String) {
    let desired = db.spec.replicas;
    let ready_replicas = rollout.map_or(0, |r| r.ready);
    let complete =
        rollout.is_some_and(|r| r.current_generation && r.ready >= desired && r.updated >= desired);
    let (phase, message) = phase_and_message(facts, rollout, complete, ready_replicas, desired);
    if facts.paused && !facts.terminating {
        (previous, message)
    } else {
        (phase, message)
    }
}

/// The `previous` conditions with each of this pass's set, observed at the Database's
/// generation, in a fixed order. Restored and LastBackupSucceeded are set only when
/// this pass has something to say about them.
fn condition_list(
    db: &Database,
    facts: &Facts,
    phase: Phase,
    message: &str,
    previous: Vec<Condition>,
    now: &Time,
) -> Vec<Condition> {
    let verdicts = [
        Some((READY, ready_condition(phase, facts, message))),
        Some((PROGRESSING, progressing_condition(phase, message))),
        Some((DEGRADED, degraded_condition(facts))),
        Some((REPLICATED, replication_condition(db, facts))),
        restored_condition(facts).map(|v| (RESTORED, v)),
        last_backup_condition(facts).map(|v| (LAST_BACKUP_SUCCEEDED, v)),
        facts.monitoring.clone().map(|v| (MONITORING_READY, v)),
        Some((PAUSED, paused_condition(facts))),
    ];
    let mut list = previous;
    for (type_, (status, reason, message)) in verdicts.into_iter().flatten() {
        let condition =
            conditions::new(type_, status, reason, message, db.metadata.generation, now);
        conditions::set(&mut list, condition);
    }
    list
}

/// The Ready condition: true once the Database is Running, otherwise why not.
fn ready_condition(phase: Phase, facts: &Facts, message: &str) -> Verdict {
    let why = match phase {
        Phase::Running => reason::ALL_REPLICAS_READY,
        Phase::Failed if facts.invalid.is_some() => reason::INVALID_SPEC,
        Phase::Failed => reason::DEGRADED,
        Phase::Terminating => reason::TERMINATING,
        Phase::Pending | Phase::Creating => reason::REPLICAS_NOT_READY,
        Phase::Upgrading => reason::UPGRADING,
    };
    (phase == Phase::Running, why, message.to_owned())
}

/// The Progressing condition: true while the Database is pending, creating or upgrading.
fn progressing_condition(phase: Phase, message: &str) -> Verdict {
    let progressing = matches!(phase, Phase::Pending | Phase::Creating | Phase::Upgrading);
    let why = if progressing {
        reason::ROLLING_OUT
    } else {
        reason::IDLE
    };
    (progressing, why, message.to_owned())
}

/// The Degraded condition: an invalid spec first, then a failed write or refused change.
fn degraded_condition(facts: &Facts) -> Verdict {
    facts
        .invalid
        .as_ref()
        .map(|m| (reason::INVALID_SPEC, m.clone()))
        .or_else(|| facts.degraded.clone())
        .map_or(
            (false, reason::AS_EXPECTED, String::new()),
            |(why, message)| (true, why, message),
        )
}

/// The Restored condition, for a Database created from a dump.
fn restored_condition(facts: &Facts) -> Option<Verdict> {
    facts.restore.as_ref().map(Restore::condition)
}

/// The LastBackupSucceeded condition, once a backup of the Database has finished.
fn last_backup_condition(facts: &Facts) -> Option<Verdict> {
    facts.backups.as_ref().and_then(|b| b.last_backup.clone())
}

/// The Paused condition: whether the paused annotation holds reconciliation.
fn paused_condition(facts: &Facts) -> Verdict {
    if facts.paused {
        let held = if facts.held.is_empty() {
            "every owned object matches the spec".to_owned()
        } else {
            format!("resuming will change {}", facts.held.join(", "))
        };
        (
            true,
            reason::PAUSED,
            format!("reconciliation paused by the mycompany.io/paused annotation; {held}"),
        )
    } else {
        (false, reason::RECONCILING, String::new())
    }
}

/// The settings revision every instance runs with: the one applied this pass, else the
/// one recorded before; none when the Database has no settings file.
fn parameters_revision(db: &Database, facts: &Facts, previous: Option<String>) -> Option<String> {
    crate::resources::engine_config::effective(db)
        .and(facts.parameters_applied.clone().or(previous))
}

/// The phase and its message, before a pause keeps the previous phase.
fn phase_and_message(
    facts: &Facts,
    rollout: Option<Rollout>,
    complete: bool,
    ready_replicas: i32,
    desired: i32,
) -> (Phase, String) {
    if facts.terminating {
        (Phase::Terminating, "deleting".to_owned())
    } else if let Some(invalid) = &facts.invalid {
        (Phase::Failed, invalid.clone())
    } else if let Some((_, message)) = &facts.degraded {
        (Phase::Failed, message.clone())
    } else if let Some(Restore::Failed(message)) = &facts.restore {
        (Phase::Failed, message.clone())
    } else if let Some(message) = upgrading(facts) {
        (Phase::Upgrading, message)
    } else if rollout.is_none() {
        (Phase::Pending, "waiting for the StatefulSet".to_owned())
    } else if let (true, Some(Restore::Waiting(message) | Restore::Running(message))) =
        (complete, &facts.restore)
    {
        (Phase::Creating, message.clone())
    } else if complete {
        (
            Phase::Running,
            format!("{ready_replicas}/{desired} instances ready"),
        )
    } else {
        (
            Phase::Creating,
            format!("{ready_replicas}/{desired} instances ready"),
        )
    }
}

/// What an upgrade under way is doing, as the phase's message.
fn upgrading(facts: &Facts) -> Option<String> {
    let upgrade = facts.upgrade.as_ref()?;
    matches!(
        upgrade.phase,
        UpgradePhase::BackingUp | UpgradePhase::Restoring | UpgradePhase::Switching
    )
    .then(|| {
        let doing = upgrade.message.as_deref().unwrap_or("starting");
        format!(
            "upgrading from {} to {}: {doing}",
            upgrade.from_version, upgrade.to_version
        )
    })
}

/// The Replicated condition: from the replication pass, or for instances the operator
/// does not replicate.
fn replication_condition(db: &Database, facts: &Facts) -> Verdict {
    facts
        .replication
        .as_ref()
        .and_then(|r| r.replicated.clone())
        .unwrap_or_else(|| crate::replication::not_replicated(db))
}

/// Writes `status` unless it equals what the Database already shows.
pub async fn patch_if_changed(
    api: &Api<Database>,
    db: &Database,
    status: DatabaseStatus,
    writes: &super::status_writes::StatusWrites,
) -> Result<bool, Error> {
    if db.status.as_ref() == Some(&status) {
        writes.forget(db);
        return Ok(false);
    }
    if writes.already_written(db, &status) {
        return Ok(false);
    }
    let body = json!({"apiVersion": "mycompany.io/v1", "kind": "Database", "status": status});
    api.patch_status(
        &db.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(Error::PatchStatus)?;
    writes.wrote(db, &status);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::database;
    use database_api::Engine;
    use k8s_openapi::api::apps::v1::{StatefulSetSpec, StatefulSetStatus};

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).expect("time"))
    }

    fn set(replicas: i32, ready: i32, observed_generation: i64) -> StatefulSet {
        let mut set = StatefulSet {
            spec: Some(StatefulSetSpec {
                replicas: Some(replicas),
                ..StatefulSetSpec::default()
            }),
            status: Some(StatefulSetStatus {
                replicas,
                ready_replicas: Some(ready),
                updated_replicas: Some(replicas),
                observed_generation: Some(observed_generation),
                ..StatefulSetStatus::default()
            }),
            ..StatefulSet::default()
        };
        set.metadata.generation = Some(1);
        set
    }

    fn status_of(condition: &str, status: &DatabaseStatus) -> (String, String) {
        let c = conditions::find(&status.conditions, condition).expect("condition present");
        (c.status.clone(), c.reason.clone())
    }

    #[test]
    fn all_replicas_ready_means_running_and_ready() {
        let db = database(Engine::Postgres, "16.4", 3);
        let status = compute(
            &db,
            Some(&set(3, 3, 1)),
            &Facts::default(),
            &now(),
            "cluster.local",
        );
        assert_eq!(
            (status.phase, status.ready, status.replicas),
            (Phase::Running, true, 3)
        );
        assert_eq!(
            status_of(READY, &status),
            ("True".into(), "AllReplicasReady".into())
        );
        assert_eq!(status_of(PROGRESSING, &status).0, "False");
        assert_eq!(
            status.endpoint.as_deref(),
            Some("orders-rw.shop.svc.cluster.local:5432")
        );
        assert_eq!(status.observed_generation, Some(1));
    }

    #[test]
    fn pods_ready_before_the_statefulset_says_so_mean_running() {
        let db = database(Engine::Postgres, "16.4", 3);
        let mut behind = set(3, 1, 1);
        if let Some(status) = behind.status.as_mut() {
            status.updated_replicas = Some(1);
        }
        let counted = |ready, updated| Facts {
            counted: Some(crate::reconcile::counted::Counted { ready, updated }),
            ..Facts::default()
        };
        let shown = |facts: &Facts| {
            let status = compute(&db, Some(&behind), facts, &now(), "cluster.local");
            (status.phase, status.replicas)
        };
        assert_eq!(shown(&counted(3, 3)), (Phase::Running, 3));
        // Ready Pods of the old revision are not a finished rollout.
        assert_eq!(shown(&counted(3, 2)), (Phase::Creating, 3));
        // Pods further behind than the StatefulSet take nothing from what it says.
        assert_eq!(shown(&counted(0, 0)), (Phase::Creating, 1));
    }

    #[test]
    fn partly_ready_is_creating_and_progressing() {
        let db = database(Engine::Postgres, "16.4", 3);
        let status = compute(
            &db,
            Some(&set(3, 1, 1)),
            &Facts::default(),
            &now(),
            "cluster.local",
        );
        assert_eq!(
            (status.phase, status.ready, status.replicas),
            (Phase::Creating, false, 1)
        );
        assert_eq!(
            status_of(PROGRESSING, &status),
            ("True".into(), "RollingOut".into())
        );
        assert_eq!(status.message.as_deref(), Some("1/3 instances ready"));
    }

    #[test]
    fn a_statefulset_not_yet_caught_up_with_a_scale_is_not_running() {
        let db = database(Engine::Mysql, "8.4", 3);
        let status = compute(
            &db,
            Some(&set(1, 1, 1)),
            &Facts::default(),
            &now(),
            "cluster.local",
        );
        assert_eq!(status.phase, Phase::Creating);
    }

    #[test]
    fn an_invalid_spec_fails_with_the_message_and_degrades() {
        let db = database(Engine::Mysql, "8.4", 1);
        let facts = Facts {
            invalid: Some("spec.version: unsupported".into()),
            ..Facts::default()
        };
        let status = compute(&db, None, &facts, &now(), "cluster.local");
        assert_eq!(status.phase, Phase::Failed);
        assert_eq!(status.message.as_deref(), Some("spec.version: unsupported"));
        assert_eq!(
            status_of(DEGRADED, &status),
            ("True".into(), "InvalidSpec".into())
        );
        assert_eq!(
            status_of(READY, &status),
            ("False".into(), "InvalidSpec".into())
        );
    }

    #[test]
    fn several_replicas_are_never_claimed_to_replicate() {
        let db = database(Engine::Postgres, "16.4", 2);
        let status = compute(
            &db,
            Some(&set(2, 2, 1)),
            &Facts::default(),
            &now(),
            "cluster.local",
        );
        assert_eq!(
            status_of(REPLICATED, &status),
            ("False".into(), "NotConfigured".into())
        );
    }

    #[test]
    fn paused_keeps_the_phase_and_says_so() {
        let mut db = database(Engine::Postgres, "16.4", 1);
        db.status = Some(DatabaseStatus {
            phase: Phase::Running,
            ..DatabaseStatus::default()
        });
        let facts = Facts {
            paused: true,
            ..Facts::default()
        };
        let status = compute(&db, None, &facts, &now(), "cluster.local");
        assert_eq!(status.phase, Phase::Running);
        assert_eq!(status_of(PAUSED, &status), ("True".into(), "Paused".into()));
    }

    #[test]
    fn computing_twice_from_the_same_inputs_gives_the_same_status() {
        let mut db = database(Engine::Mongodb, "7.0", 1);
        let first = compute(
            &db,
            Some(&set(1, 1, 1)),
            &Facts::default(),
            &now(),
            "cluster.local",
        );
        db.status = Some(first.clone());
        let later = Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_500).expect("time"));
        let second = compute(
            &db,
            Some(&set(1, 1, 1)),
            &Facts::default(),
            &later,
            "cluster.local",
        );
        assert_eq!(
            first, second,
            "an unchanged world must not produce a status write"
        );
    }
}
