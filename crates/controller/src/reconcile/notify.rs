//! Events about a Database: the StatefulSet changes people care about, and the one
//! way a pass publishes an event.

use database_api::Database;
use database_api::conditions::reason;
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::{Resource, ResourceExt};

use crate::context::Context;
use crate::objects::Applied;
use operator_runtime::events::{EventType, Notice};

/// Events for the StatefulSet changes people care about.
pub(super) async fn announce(
    ctx: &Context,
    db: &Database,
    before: Option<&StatefulSet>,
    applied: Applied,
) {
    let replicas = |s: &StatefulSet| s.spec.as_ref().and_then(|s| s.replicas);
    match (applied, before) {
        (Applied::Created, _) => {
            publish(
                ctx,
                db,
                EventType::Normal,
                reason::CREATED,
                format!(
                    "created StatefulSet {} with {} instance(s)",
                    db.name_any(),
                    db.spec.replicas
                ),
            )
            .await;
        }
        (Applied::Updated, Some(old)) if replicas(old) != Some(db.spec.replicas) => {
            let from = replicas(old).unwrap_or(0);
            publish(
                ctx,
                db,
                EventType::Normal,
                reason::SCALED,
                format!("scaled from {from} to {} instance(s)", db.spec.replicas),
            )
            .await;
        }
        (Applied::Updated, _) => {
            publish(
                ctx,
                db,
                EventType::Normal,
                reason::UPDATED,
                format!("updated StatefulSet {}", db.name_any()),
            )
            .await;
        }
        (Applied::Unchanged | Applied::Held, _) => {}
    }
}

/// Publishes an event; a failure to record one never fails the reconcile.
pub(super) async fn publish(
    ctx: &Context,
    db: &Database,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let notice = Notice {
        type_,
        reason: reason.to_owned(),
        note,
    };
    ctx.tell(&db.object_ref(&()), &notice).await;
}
