//! Carrying out a pass's steps against the API server and the instances.

use database_api::conditions::reason;
use database_api::{Database, Engine};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::plan::{ReplicaSetStep, Step, Why};
use super::{Report, mongodb, mysql, postgres};
use crate::context::Context;
use crate::error::Error;
use crate::objects::delete_with;
use crate::resources::meta::{ROLE_LABEL, topology_configmap_name};
use crate::resources::replication_init::{MEMBERS_SPAN_KEY, PRIMARY_KEY};
use operator_runtime::events::EventType;

/// The grace period of a failed primary's Pod, against the 60 s its StatefulSet gives
/// a healthy one to shut down.
const FAILED_PRIMARY_GRACE_SECONDS: u32 = 10;

/// Carries out the steps in order; the first failure ends the pass (the next takes up).
pub async fn execute(
    ctx: &Context,
    db: &Database,
    pods: &Api<Pod>,
    exec_pods: &Api<Pod>,
    steps: &[Step],
    report: &mut Report,
) -> Result<(), Error> {
    for step in steps {
        let event = match step {
            Step::NamePrimary { to, why } => Some(name_primary(ctx, db, to, *why).await?),
            Step::Label { pod, role } => {
                label(ctx, pods, pod, *role).await?;
                None
            }
            Step::HandOver { from, to } => {
                if db.spec.engine == Engine::Mysql {
                    mysql::hand_over(exec_pods, from, to).await?;
                }
                None
            }
            Step::Fence { pod, failed } => {
                fence(ctx, pods, pod, *failed).await?;
                Some((
                    reason::FENCED,
                    format!("{pod} no longer takes writes; it starts again as a replica"),
                ))
            }
            Step::Promote { pod } => {
                match db.spec.engine {
                    Engine::Mysql => mysql::promote(exec_pods, pod).await?,
                    _ => postgres::promote(exec_pods, pod).await?,
                }
                Some((reason::PROMOTED, format!("{pod} is the primary")))
            }
            Step::Repoint { pod, primary } => {
                let service = db.name_any();
                match db.spec.engine {
                    Engine::Mysql => mysql::repoint(exec_pods, pod, primary, &service).await?,
                    _ => postgres::repoint(exec_pods, pod, primary, &service).await?,
                }
                None
            }
            Step::Reseed { pod, primary } => match db.spec.engine {
                Engine::Mysql => reseed(db, exec_pods, pod, primary, report).await?,
                engine => Some(clone_anew(ctx, engine, pods, exec_pods, pod, primary).await?),
            },
            Step::ReplicaSet(step) => replica_set_step(ctx, db, exec_pods, step).await?,
            Step::Synchronous { pod, on } => set_synchronous(db, exec_pods, pod, *on).await?,
            Step::KeepLog { pod, megabytes } => {
                postgres::keep_log(exec_pods, pod, *megabytes).await?;
                None
            }
        };
        if let Some((reason, note)) = event {
            report.events.push((EventType::Normal, reason, note));
        }
    }
    Ok(())
}

/// Copies `primary` into the mysql replica `pod` again; returns its event, after a
/// warning on `report` when the last copy failed.
async fn reseed(
    db: &Database,
    exec_pods: &Api<Pod>,
    pod: &str,
    primary: &str,
    report: &mut Report,
) -> Result<Option<(&'static str, String)>, Error> {
    Ok(
        match mysql::reseed(exec_pods, pod, primary, &db.name_any()).await? {
            mysql::Reseed::Started { last_failure } => {
                if let Some(error) = last_failure {
                    report.events.push((
                        EventType::Warning,
                        reason::RESEED_FAILED,
                        format!(
                            "the last copy of {primary} into {pod} failed ({error}); copying again"
                        ),
                    ));
                }
                Some((
                    reason::RESEEDING,
                    format!(
                        "{pod} holds transactions {primary} does not have, or lacks ones {primary} no longer keeps; it is being copied from {primary} and restarts on the copy as its replica"
                    ),
                ))
            }
            mysql::Reseed::UnderWay => None,
        },
    )
}

/// Has the replica `pod` copy `primary` anew: its data is marked, and its Pod deleted
/// so that, as it starts again, its init container clones the primary (postgres) or
/// empties the data for an initial sync (mongodb). Returns its event.
async fn clone_anew(
    ctx: &Context,
    engine: Engine,
    pods: &Api<Pod>,
    exec_pods: &Api<Pod>,
    pod: &str,
    primary: &str,
) -> Result<(&'static str, String), Error> {
    let lacks = if engine == Engine::Mongodb {
        mongodb::mark_for_reseed(exec_pods, pod).await?;
        "oplog entries"
    } else {
        postgres::mark_for_reseed(exec_pods, pod).await?;
        "log"
    };
    delete_pod(ctx, pods, pod, None).await?;
    Ok((
        reason::RESEEDING,
        format!(
            "{pod} lacks {lacks} {primary} no longer keeps, so it can never catch up; it starts again as a fresh copy of {primary}"
        ),
    ))
}

/// Turns the primary `pod`'s synchronous mode on or off; returns its event.
async fn set_synchronous(
    db: &Database,
    exec_pods: &Api<Pod>,
    pod: &str,
    on: bool,
) -> Result<Option<(&'static str, String)>, Error> {
    match db.spec.engine {
        Engine::Mysql => mysql::set_synchronous(exec_pods, pod, on).await?,
        Engine::Mongodb => mongodb::set_synchronous(exec_pods, pod, on).await?,
        Engine::Postgres => postgres::set_synchronous(exec_pods, pod, on).await?,
    }
    let note = if on {
        "writes wait for a replica"
    } else {
        "writes no longer wait for a replica"
    };
    Ok(Some((reason::REPLICATION_MODE_CHANGED, note.to_owned())))
}

/// Carries out a step only a mongodb replica set takes; returns its event.
async fn replica_set_step(
    ctx: &Context,
    db: &Database,
    exec_pods: &Api<Pod>,
    step: &ReplicaSetStep,
) -> Result<Option<(&'static str, String)>, Error> {
    Ok(match step {
        ReplicaSetStep::RecordMembersSpan { span } => {
            record_in_topology(ctx, db, MEMBERS_SPAN_KEY, &span.to_string()).await?;
            None
        }
        ReplicaSetStep::Initiate { pod } => {
            mongodb::initiate(exec_pods, pod, &host(ctx, db, pod)).await?;
            Some((
                reason::REPLICA_SET_INITIATED,
                format!("the replica set started on {pod}"),
            ))
        }
        ReplicaSetStep::AddMember { primary, pod } => {
            mongodb::add(exec_pods, primary, &host(ctx, db, pod)).await?;
            Some((
                reason::MEMBER_ADDED,
                format!("{pod} joined the replica set; it copies the data, then votes"),
            ))
        }
        ReplicaSetStep::RemoveMember { primary, pod } => {
            mongodb::remove(exec_pods, primary, &host(ctx, db, pod)).await?;
            Some((
                reason::MEMBER_REMOVED,
                format!("{pod} left the replica set before its instance is scaled away"),
            ))
        }
        ReplicaSetStep::RaiseCompatibility { primary, from, to } => {
            mongodb::raise_compatibility(exec_pods, primary, to).await?;
            Some((
                reason::COMPATIBILITY_RAISED,
                format!(
                    "every member runs {to}, so the feature compatibility version moved from {from} to {to}: the data now uses {to}'s formats"
                ),
            ))
        }
        ReplicaSetStep::HandOver {
            primary,
            to,
            stay_out,
            why,
        } => {
            for pod in stay_out {
                mongodb::stay_out(exec_pods, pod).await?;
            }
            mongodb::step_down(exec_pods, primary).await?;
            let note = match why {
                Why::ScaleDown => format!(
                    "the primary's instance is scaled away; {primary} stepped down for {to}"
                ),
                _ => format!("switching over to {to}, as asked: {primary} stepped down"),
            };
            Some((reason::SWITCHING_OVER, note))
        }
    })
}

/// Names `to` the primary in the topology ConfigMap; returns the event to publish.
async fn name_primary(
    ctx: &Context,
    db: &Database,
    to: &str,
    why: Why,
) -> Result<(&'static str, String), Error> {
    record_in_topology(ctx, db, PRIMARY_KEY, to).await?;
    Ok(match why {
        Why::Failover => (
            reason::FAILING_OVER,
            format!(
                "the primary was not ready for {}s; {to} becomes the primary",
                db.spec.replication.failover_after_seconds
            ),
        ),
        Why::Switchover => (
            reason::SWITCHING_OVER,
            format!("switching over to {to}, as asked"),
        ),
        Why::ScaleDown => (
            reason::SWITCHING_OVER,
            format!("the primary's instance is scaled away; {to} becomes the primary"),
        ),
        Why::Elected => (
            reason::PRIMARY_ELECTED,
            format!("the replica set elected {to} its primary"),
        ),
    })
}

/// A mongodb member's address.
fn host(ctx: &Context, db: &Database, pod: &str) -> String {
    mongodb::host(
        pod,
        &db.name_any(),
        &db.namespace().unwrap_or_default(),
        &ctx.settings.build.cluster_domain,
    )
}

/// Sets one key of the topology ConfigMap.
async fn record_in_topology(
    ctx: &Context,
    db: &Database,
    key: &str,
    value: &str,
) -> Result<(), Error> {
    let maps: Api<ConfigMap> =
        Api::namespaced(ctx.client.clone(), &db.namespace().unwrap_or_default());
    let name = topology_configmap_name(db);
    maps.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {key: value}})),
    )
    .await
    .map_err(|source| Error::Apply {
        kind: "ConfigMap".into(),
        name,
        source,
    })?;
    ctx.metrics.wrote("topology");
    Ok(())
}

/// Sets (or removes) an instance's role label; a Pod gone meanwhile needs none.
pub(super) async fn label(
    ctx: &Context,
    pods: &Api<Pod>,
    pod: &str,
    role: Option<&str>,
) -> Result<(), Error> {
    let patch = json!({"metadata": {"labels": {ROLE_LABEL: role}}});
    match pods
        .patch(pod, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => ctx.metrics.wrote("label"),
        Err(kube::Error::Api(status)) if status.is_not_found() => {}
        Err(source) => {
            return Err(Error::Apply {
                kind: "Pod".into(),
                name: pod.to_owned(),
                source,
            });
        }
    }
    Ok(())
}

/// Deletes an old primary's Pod: the StatefulSet starts it again, and its init
/// container makes it a replica of the named primary.
async fn fence(ctx: &Context, pods: &Api<Pod>, pod: &str, failed: bool) -> Result<(), Error> {
    // A failed primary's server no longer answers, so its shutdown can save little, and
    // the new primary waits for it to end (see `plan`).
    delete_pod(
        ctx,
        pods,
        pod,
        failed.then_some(FAILED_PRIMARY_GRACE_SECONDS),
    )
    .await
}

/// Deletes an instance's Pod (its StatefulSet starts it again), with `grace` seconds
/// to shut down or the StatefulSet's own.
async fn delete_pod(
    ctx: &Context,
    pods: &Api<Pod>,
    pod: &str,
    grace: Option<u32>,
) -> Result<(), Error> {
    let params = DeleteParams {
        grace_period_seconds: grace,
        ..DeleteParams::default()
    };
    if delete_with(pods, pod, &params).await? {
        ctx.metrics.wrote("delete");
    }
    Ok(())
}
