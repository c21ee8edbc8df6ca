//! The steps after the owned objects are written: storage, replication, backups and
//! restore, the major upgrade and the settings, each with its events.

use std::time::Duration;

use database_api::Database;
use database_api::conditions::{RESTORED, reason};
use database_api::upgrade::{UpgradePhase, UpgradeStatus};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::Api;

use super::notify::publish;
use super::status::Facts;
use super::storage::StoragePlan;
use super::{settings, storage};
use crate::backup::{self, restore::Restore};
use crate::context::Context;
use crate::error::Error;
use crate::replication;
use crate::upgrade;
use operator_runtime::events::EventType;

/// How soon to look again at a restore under way (its Job's changes come sooner).
pub(super) const RESTORE_REQUEUE: Duration = Duration::from_secs(10);

/// The upgrade's step this pass, with its events published.
pub(super) async fn upgrade_step(
    ctx: &Context,
    db: &Database,
    namespace: &str,
    primary: &str,
    now: &Time,
    plan: upgrade::Plan,
) -> Result<upgrade::run::Step, Error> {
    let scope = upgrade::run::Scope {
        ctx,
        db,
        namespace,
        primary,
        now,
    };
    let step = upgrade::run::run(&scope, plan).await?;
    for (type_, reason, note) in &step.events {
        publish(ctx, db, *type_, reason, note.clone()).await;
    }
    Ok(step)
}

/// The settings pass, with an event once every instance runs with a new revision.
pub(super) async fn settings_pass(
    ctx: &Context,
    db: &Database,
    namespace: &str,
    set: &StatefulSet,
) -> Result<settings::Step, Error> {
    let step = settings::apply(ctx, db, namespace, set).await?;
    if let Some(revision) = &step.applied {
        let names: Vec<String> = db
            .spec
            .parameters
            .iter()
            .flatten()
            .map(|(k, _)| k.clone())
            .collect();
        let note = if names.is_empty() {
            format!(
                "every instance runs with settings revision {revision} (the memory settings of the memory limit)"
            )
        } else {
            format!(
                "every instance runs with settings revision {revision} ({})",
                names.join(", ")
            )
        };
        publish(ctx, db, EventType::Normal, reason::PARAMETERS_APPLIED, note).await;
    }
    Ok(step)
}

/// A rolled-back upgrade, as the Degraded condition's reason and message.
pub(super) fn rolled_back(upgrade: Option<&UpgradeStatus>) -> Option<(&'static str, String)> {
    upgrade
        .filter(|u| u.phase == UpgradePhase::RolledBack)
        .map(|u| {
            (
                reason::UPGRADE_FAILED,
                u.message.clone().unwrap_or_default(),
            )
        })
}

/// `now` as `yyyymmdd-hhmm`, for names.
pub(super) fn stamp(now: &Time) -> String {
    now.0.strftime("%Y%m%d-%H%M").to_string()
}

/// The storage the StatefulSet's template asks for, with what blocks a resize as facts;
/// `None` while the StatefulSet is being replaced for one.
pub(super) async fn storage_step(
    ctx: &Context,
    db: &Database,
    observed: Option<&StatefulSet>,
) -> Result<Option<(String, Facts)>, Error> {
    Ok(match storage::plan(&ctx.client, db, observed).await? {
        StoragePlan::AsSpecified => Some((db.spec.storage.clone(), Facts::default())),
        StoragePlan::Blocked {
            template,
            reason,
            message,
        } => Some((
            template,
            Facts {
                degraded: Some((reason, message)),
                ..Facts::default()
            },
        )),
        StoragePlan::Recreating => {
            ctx.metrics.wrote("resize");
            publish(
                ctx,
                db,
                EventType::Normal,
                reason::STORAGE_RESIZED,
                format!("volume claims resized to {}", db.spec.storage),
            )
            .await;
            None
        }
    })
}

/// The replication pass, with its events published.
pub(super) async fn replication_pass(
    ctx: &Context,
    databases: &Api<Database>,
    db: &Database,
    (named, span): (&str, Option<i32>),
    engine_pass: bool,
    pods: replication::Pods<'_>,
) -> Result<replication::Report, Error> {
    let namespace = db.namespace().ok_or(Error::MissingNamespace)?;
    let topology = replication::Topology {
        named,
        members_span: span,
    };
    let report = replication::reconcile(ctx, db, &namespace, topology, engine_pass, pods).await?;
    replication::forget_done_switchover(databases, db, report.primary.as_deref()).await?;
    for (type_, reason, note) in &report.events {
        publish(ctx, db, *type_, reason, note.clone()).await;
    }
    Ok(report)
}

/// The soonest look again that replication, the backup schedule, a restore or an
/// upgrade asks for.
pub(super) fn soonest(
    report: &replication::Report,
    backups: &backup::schedule::Plan,
    restore: Option<&Restore>,
    upgrade: Option<Duration>,
) -> Option<Duration> {
    let restoring = restore
        .filter(|r| matches!(r, Restore::Waiting(_) | Restore::Running(_)))
        .map(|_| RESTORE_REQUEUE);
    [report.requeue, backups.requeue, restoring, upgrade]
        .into_iter()
        .flatten()
        .min()
}

/// The restore's step (with an event when it finished) and the schedule's.
pub(super) async fn backups_and_restore(
    ctx: &Context,
    db: &Database,
    namespace: &str,
    primary_ready: bool,
) -> Result<(Option<Restore>, backup::schedule::Plan), Error> {
    let restore = backup::restore::run(ctx, db, namespace, primary_ready).await?;
    if let Some(restore) = &restore {
        let was = db
            .status
            .as_ref()
            .and_then(|s| database_api::conditions::find(&s.conditions, RESTORED))
            .map(|c| c.reason.clone());
        let (_, reason, note) = restore.condition();
        if was.as_deref() != Some(reason) {
            match restore {
                Restore::Done(_) => {
                    publish(ctx, db, EventType::Normal, reason::RESTORED, note).await;
                }
                Restore::Failed(_) => {
                    publish(ctx, db, EventType::Warning, reason::RESTORE_FAILED, note).await;
                }
                Restore::Waiting(_) | Restore::Running(_) => {}
            }
        }
    }
    if db.spec.backup.is_some() {
        ctx.metrics.backups_scheduled(namespace, &db.name_any());
    }
    let backups = backup::schedule::run(ctx, db, namespace).await?;
    Ok((restore, backups))
}
