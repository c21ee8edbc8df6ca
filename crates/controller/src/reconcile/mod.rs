//! One reconcile of one Database: finalizer → validate → observe → build → apply →
//! status. Each step lives in its own module; this driver shows the whole flow.

mod applier;
pub mod conflicts;
pub mod counted;
#[cfg(test)]
mod decisions;
pub mod finalizer;
mod first_pass;
mod notify;
mod owned;
mod passes;
pub mod preflight;
mod seen;
pub mod settings;
pub mod status;
pub mod status_writes;
pub mod storage;

use std::sync::Arc;
use std::time::{Duration, Instant};

use database_api::conditions::reason;
use database_api::constants::PAUSED_ANNOTATION;
use database_api::validation::{Limits, validate};
use database_api::{Database, DeletionPolicy, Phase};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::Api;
use operator_runtime::Action;

use self::applier::Applier;
use self::notify::publish;
pub(crate) use self::owned::{Observed, init_scripts};
use self::owned::{OwnedApis, OwnedPass, Shape};
use self::passes::storage_step;
use self::status::Facts;
use crate::context::Context;
use crate::error::Error;
use crate::metrics::ResultLabels;
use crate::objects::get_opt;
use crate::replication;
use crate::version;
use operator_runtime::events::EventType;

/// How soon to look again at a Database that is not Ready yet. Owned-object events
/// usually come first; this only bounds how long a missed one can delay status.
const NOT_READY_REQUEUE: Duration = Duration::from_secs(30);

/// How soon to look again at a Database blocked by an object it does not control.
const CONFLICT_REQUEUE: Duration = Duration::from_secs(60);

/// How soon to look again while a StatefulSet is being replaced for a storage resize.
const RECREATE_REQUEUE: Duration = Duration::from_secs(2);

/// Reconciles one Database and records metrics.
pub async fn reconcile(db: Arc<Database>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    // kube's Controller does not catch panics: one would end the whole controller. A
    // panic is turned into an error of this one reconcile, retried with backoff.
    let guarded = std::panic::AssertUnwindSafe(async {
        if let Some(hook) = &ctx.settings.before_reconcile {
            hook(&db);
        }
        Box::pin(reconcile_inner(&db, &ctx)).await
    });
    let result = match futures::FutureExt::catch_unwind(guarded).await {
        Ok(result) => result,
        Err(payload) => Err(Error::Panicked(panic_message(payload.as_ref()))),
    };
    let labels = ResultLabels {
        result: if result.is_ok() { "ok" } else { "error" },
    };
    ctx.metrics.reconciles.get_or_create(&labels).inc();
    ctx.metrics
        .duration
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    if let Err(err) = &result {
        ctx.metrics
            .errors
            .get_or_create(&crate::metrics::ErrorLabels { kind: err.kind() })
            .inc();
        tracing::warn!(name = %db.name_any(), namespace = db.namespace().as_deref().unwrap_or(""), error = %err, "reconcile failed");
        publish(
            &ctx,
            &db,
            EventType::Warning,
            reason::RECONCILE_FAILED,
            err.to_string(),
        )
        .await;
    }
    result
}

#[tracing::instrument(skip_all, fields(name = %db.name_any(), namespace = db.namespace().as_deref().unwrap_or("")))]
async fn reconcile_inner(db: &Database, ctx: &Context) -> Result<Action, Error> {
    let namespace = db.namespace().ok_or(Error::MissingNamespace)?;
    let databases: Api<Database> = Api::namespaced(ctx.client.clone(), &namespace);
    let now = now();

    if db.metadata.deletion_timestamp.is_some() {
        return delete(ctx, &databases, db, &namespace, &now).await;
    }
    // A Database without the finalizer is new: the finalizer is added in this same pass,
    // without waiting for another watch event.
    let first_pass = !finalizer::has_finalizer(db);
    let outcome = validate(
        db,
        &Limits {
            max_storage_gi: ctx.settings.max_storage_gi,
        },
    );
    if !outcome.is_allowed() {
        let message = outcome.message();
        let facts = Facts {
            invalid: Some(message.clone()),
            ..Facts::default()
        };
        let (wrote, ()) = tokio::try_join!(
            write_status(ctx, &databases, db, None, &facts, &now),
            add_finalizer(ctx, &databases, db, first_pass),
        )?;
        if wrote {
            publish(ctx, db, EventType::Warning, reason::INVALID_SPEC, message).await;
        }
        // A user error: nothing to retry until the spec changes.
        return Ok(Action::await_change());
    }
    if is_paused(db) {
        return Box::pin(hold_owned(
            ctx, &databases, db, &namespace, &now, first_pass,
        ))
        .await;
    }
    Box::pin(apply_owned(
        ctx, &databases, db, &namespace, &now, first_pass,
    ))
    .await
}

/// A paused Database: its owned objects are read and compared with what the spec asks
/// for, and nothing it owns is written (the finalizer still goes on, so a deletion is
/// still cleaned up); the Paused condition lists what differs.
async fn hold_owned(
    ctx: &Context,
    databases: &Api<Database>,
    db: &Database,
    namespace: &str,
    now: &Time,
    first_pass: bool,
) -> Result<Action, Error> {
    let apis = OwnedApis::new(&ctx.client, &ctx.ledger, namespace);
    let observed = Box::pin(apis.observe(db, false)).await?;
    // The claims' size as the StatefulSet has it: a resize is a write too.
    let template_storage = observed
        .statefulset
        .as_ref()
        .and_then(storage::template_gi)
        .map_or_else(|| db.spec.storage.clone(), |(_, size)| size);
    let shape = Shape::of(db, &observed, now);
    let pass = OwnedPass {
        ctx,
        databases,
        db,
        apis: &apis,
        observed: &observed,
        shape: &shape,
        unread: false,
    };
    let applier = Applier::holding(ctx, db);
    // Pausing is how people get the operator out of the way while they fix something
    // by hand, so a comparison that fails is reported, not retried.
    let degraded = Box::pin(pass.write(&applier, &template_storage, first_pass))
        .await
        .err()
        .map(|error| {
            (
                reason::DEGRADED,
                format!("the owned objects could not be compared with the spec: {error}"),
            )
        });
    let facts = Facts {
        paused: true,
        held: applier.held(),
        degraded,
        ..Facts::default()
    };
    write_status(
        ctx,
        databases,
        db,
        observed.statefulset.as_ref(),
        &facts,
        now,
    )
    .await?;
    Ok(Action::await_change())
}

/// Adds the finalizer on a Database's first pass.
async fn add_finalizer(
    ctx: &Context,
    databases: &Api<Database>,
    db: &Database,
    first_pass: bool,
) -> Result<(), Error> {
    if first_pass {
        finalizer::add(databases, db).await?;
        ctx.metrics.wrote("finalizer");
    }
    Ok(())
}

/// Observes, builds and applies the owned objects, then writes status: a round trip of
/// reads (the Pods among them), then the writes the pass needs (the StatefulSet, then the
/// other objects together), then the status with any role labels beside it. A pass that
/// only finds its Database ready makes two: the reads, then the status and labels. A
/// new Database's first pass reads nothing (see [`first_pass`]); when it fails, the
/// pass starts over the reading way.
async fn apply_owned(
    ctx: &Context,
    databases: &Api<Database>,
    db: &Database,
    namespace: &str,
    now: &Time,
    first_pass: bool,
) -> Result<Action, Error> {
    // No status yet: no pass has seen this Database before.
    if first_pass && db.status.is_none() {
        match Box::pin(apply_owned_reading(
            ctx, databases, db, namespace, now, first_pass, false,
        ))
        .await
        {
            Ok(action) => return Ok(action),
            Err(error) => {
                tracing::debug!(error = %error, "a first pass without reads stopped; reading");
            }
        }
    }
    Box::pin(apply_owned_reading(
        ctx, databases, db, namespace, now, first_pass, true,
    ))
    .await
}

/// [`apply_owned`], reading the owned objects first when `read`.
#[allow(clippy::too_many_arguments)]
async fn apply_owned_reading(
    ctx: &Context,
    databases: &Api<Database>,
    db: &Database,
    namespace: &str,
    now: &Time,
    first_pass: bool,
    read: bool,
) -> Result<Action, Error> {
    let apis = OwnedApis::new(&ctx.client, &ctx.ledger, namespace);
    // An object of a name the Database writes may already exist, and one it does not
    // control is never written (see `conflicts`).
    let mut observed = if read {
        Box::pin(apis.observe(db, true)).await?
    } else {
        Observed::default()
    };
    if let Some(stop) = preflight::check(databases, &apis.secrets, db, &mut observed).await? {
        return stopped(ctx, databases, db, &observed, stop, first_pass, now).await;
    }
    if observed
        .statefulset
        .as_ref()
        .is_some_and(|s| s.metadata.deletion_timestamp.is_some())
    {
        // Orphan deletion for a resize is still in progress.
        return Ok(Action::requeue(RECREATE_REQUEUE));
    }
    let Some((template_storage, facts)) =
        storage_step(ctx, db, observed.statefulset.as_ref()).await?
    else {
        return Ok(Action::requeue(RECREATE_REQUEUE));
    };
    let shape = Shape::of(db, &observed, now);
    let pass = OwnedPass {
        ctx,
        databases,
        db,
        apis: &apis,
        observed: &observed,
        shape: &shape,
        unread: !read,
    };
    let set = Box::pin(pass.write(&Applier::new(ctx, db), &template_storage, first_pass)).await?;
    let (facts, requeue) = Box::pin(pass.engine_steps(namespace, &set, now, facts)).await?;
    // Role labels go out with the status: one round trip for both.
    let labels = facts
        .replication
        .as_ref()
        .map_or(&[][..], |r| &r.labels[..]);
    tokio::try_join!(
        write_status(ctx, databases, db, Some(&set), &facts, now),
        replication::write_labels(ctx, namespace, labels),
    )?;
    let running = status::compute(
        db,
        Some(&set),
        &facts,
        now,
        &ctx.settings.build.cluster_domain,
    )
    .phase
        == Phase::Running;
    Ok(match (running, requeue) {
        (_, Some(after)) => Action::requeue(after),
        (true, None) => Action::await_change(),
        (false, None) => Action::requeue(NOT_READY_REQUEUE),
    })
}

/// Ends a pass that preflight stopped: the status (and an event) say why.
async fn stopped(
    ctx: &Context,
    databases: &Api<Database>,
    db: &Database,
    observed: &Observed,
    stop: preflight::Stop,
    first_pass: bool,
    now: &Time,
) -> Result<Action, Error> {
    let set = observed.statefulset.as_ref();
    match stop {
        preflight::Stop::Invalid(message) => {
            let facts = Facts {
                invalid: Some(message.clone()),
                ..Facts::default()
            };
            let (wrote, ()) = tokio::try_join!(
                write_status(ctx, databases, db, set, &facts, now),
                add_finalizer(ctx, databases, db, first_pass),
            )?;
            if wrote {
                publish(ctx, db, EventType::Warning, reason::INVALID_SPEC, message).await;
            }
            Ok(Action::await_change())
        }
        preflight::Stop::Conflict(conflict) => {
            let message = conflict.message();
            let facts = Facts {
                degraded: Some((reason::OWNERSHIP_CONFLICT, message.clone())),
                ..Facts::default()
            };
            // The finalizer only once this Database controls its StatefulSet (a first
            // pass that read nothing may have created it before finding a Service's
            // name taken): deleting it must not reach for data that is someone else's.
            let set = set.filter(|s| conflicts::is_controlled_by(&s.metadata, db));
            let (wrote, ()) = tokio::try_join!(
                write_status(ctx, databases, db, set, &facts, now),
                add_finalizer(ctx, databases, db, first_pass && set.is_some()),
            )?;
            if wrote {
                publish(
                    ctx,
                    db,
                    EventType::Warning,
                    reason::OWNERSHIP_CONFLICT,
                    message,
                )
                .await;
            }
            // The object in the way is not watched: look again now and then.
            Ok(Action::requeue(CONFLICT_REQUEUE))
        }
        preflight::Stop::Marked | preflight::Stop::Stale => Ok(Action::await_change()),
    }
}

async fn delete(
    ctx: &Context,
    databases: &Api<Database>,
    db: &Database,
    namespace: &str,
    now: &Time,
) -> Result<Action, Error> {
    if !finalizer::has_finalizer(db) {
        return Ok(Action::await_change());
    }
    let facts = Facts {
        terminating: true,
        ..Facts::default()
    };
    if write_status(ctx, databases, db, None, &facts, now).await? {
        publish(
            ctx,
            db,
            EventType::Normal,
            reason::DELETING,
            format!("deletion policy {:?}", db.spec.deletion_policy),
        )
        .await;
    }
    let apis = OwnedApis::new(&ctx.client, &ctx.ledger, namespace);
    // Data is only touched through a StatefulSet this Database controls.
    let set = get_opt(&apis.sets, &db.name_any())
        .await?
        .filter(|s| conflicts::is_controlled_by(&s.metadata, db));
    match (db.spec.deletion_policy, set) {
        (DeletionPolicy::Delete, Some(_)) => {
            let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), namespace);
            if finalizer::delete_claims(&claims, db).await? > 0 {
                ctx.metrics.wrote("delete");
            }
        }
        (DeletionPolicy::Retain, set) => {
            let version = set
                .as_ref()
                .and_then(version::running_version)
                .map_or_else(|| db.spec.version.clone(), |v| v.to_string());
            if finalizer::keep_credentials(&apis.secrets, db, &version).await? {
                ctx.metrics.wrote("retain");
            }
        }
        (DeletionPolicy::Delete, None) => {}
    }
    finalizer::remove(databases, db).await?;
    ctx.metrics.wrote("finalizer");
    ctx.outages
        .forget(&format!("{namespace}/{}", db.name_any()));
    ctx.status_writes.forget(db);
    Ok(Action::await_change())
}

async fn write_status(
    ctx: &Context,
    api: &Api<Database>,
    db: &Database,
    set: Option<&StatefulSet>,
    facts: &Facts,
    now: &Time,
) -> Result<bool, Error> {
    let status = status::compute(db, set, facts, now, &ctx.settings.build.cluster_domain);
    let wrote = status::patch_if_changed(api, db, status, &ctx.status_writes).await?;
    if wrote {
        ctx.metrics.wrote("status");
    }
    Ok(wrote)
}

fn is_paused(db: &Database) -> bool {
    db.annotations()
        .get(PAUSED_ANNOTATION)
        .is_some_and(|v| v == "true")
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

/// The current time, whole seconds: the API server stores condition times that way, so
/// a status computed now compares equal to the one it stored.
fn now() -> Time {
    let now = k8s_openapi::jiff::Timestamp::now();
    Time(k8s_openapi::jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// Longest wait before a failing Database is tried again.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Retries a failed reconcile after the work queue's backoff for that Database (1 s
/// doubling to 5 min). A broken credentials Secret waits the longest: only a person can
/// fix it, and the Secret watch brings the Database back as soon as they do.
#[allow(clippy::needless_pass_by_value)] // the signature the dispatcher expects
pub fn error_policy(_db: Arc<Database>, error: &Error, _ctx: Arc<Context>) -> Action {
    if matches!(error, Error::BrokenCredentials(_)) {
        return Action::requeue(MAX_BACKOFF);
    }
    Action::retry()
}
