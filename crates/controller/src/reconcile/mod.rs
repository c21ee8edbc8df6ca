//! One reconcile of one Database: finalizer → validate → observe → build → apply →
//! status. Each step lives in its own module; this driver shows the whole flow.

pub mod apply;
pub mod drift;
pub mod finalizer;
pub mod status;
pub mod storage;

use std::sync::Arc;
use std::time::{Duration, Instant};

use database_api::constants::PAUSED_ANNOTATION;
use database_api::validation::{Limits, validate};
use database_api::{Database, Phase};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};

use self::apply::{Applied, apply, delete_if_present, get_opt};
use self::status::Facts;
use self::storage::StoragePlan;
use crate::context::Context;
use crate::error::Error;
use crate::metrics::ResultLabels;
use crate::resources::credentials::Credentials;
use crate::resources::meta::{connection_secret_name, credentials_secret_name};
use crate::resources::pdb::build_pdb;
use crate::resources::secret::{build_connection_secret, build_credentials_secret};
use crate::resources::service::build_service;
use crate::resources::statefulset::build_statefulset;

/// How soon to look again at a Database that is not Ready yet. Owned-object events
/// usually come first; this only bounds how long a missed one can delay status.
const NOT_READY_REQUEUE: Duration = Duration::from_secs(30);
/// How soon to look again while a StatefulSet is being replaced for a storage resize.
const RECREATE_REQUEUE: Duration = Duration::from_secs(2);

/// Reconciles one Database and records metrics.
pub async fn reconcile(db: Arc<Database>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    // Boxed: the reconcile future is large and lives across many awaits.
    let result = Box::pin(reconcile_inner(&db, &ctx)).await;
    let labels = ResultLabels {
        result: if result.is_ok() { "ok" } else { "error" },
    };
    ctx.metrics.reconciles.get_or_create(&labels).inc();
    ctx.metrics
        .duration
        .get_or_create(&labels)
        .observe(started.elapsed().as_secs_f64());
    let key = format!("{}/{}", db.namespace().unwrap_or_default(), db.name_any());
    match &result {
        Ok(_) => ctx.backoff.reset(&key),
        Err(_) => ctx.backoff.failed(&key),
    }
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
            "ReconcileFailed",
            err.to_string(),
        )
        .await;
    }
    result
}

#[tracing::instrument(skip_all, fields(name = %db.name_any(), namespace = db.namespace().as_deref().unwrap_or("")))]
async fn reconcile_inner(db: &Database, ctx: &Context) -> Result<Action, Error> {
    let namespace = db.namespace().ok_or(Error::MissingNamespace)?;
    let client = &ctx.client;
    let databases: Api<Database> = Api::namespaced(client.clone(), &namespace);
    let now = now();

    if db.metadata.deletion_timestamp.is_some() {
        return delete(ctx, &databases, db, &namespace, &now).await;
    }
    if !finalizer::has_finalizer(db) {
        finalizer::add(&databases, db).await?;
        ctx.metrics.wrote("finalizer");
        // No return: the owned objects are applied in this same pass.
    }

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
        if write_status(ctx, &databases, db, None, &facts, &now).await? {
            publish(ctx, db, EventType::Warning, "InvalidSpec", message).await;
        }
        // A user error: nothing to retry until the spec changes.
        return Ok(Action::await_change());
    }
    if is_paused(db) {
        let observed = get_opt(
            &Api::<StatefulSet>::namespaced(client.clone(), &namespace),
            &db.name_any(),
        )
        .await?;
        let facts = Facts {
            paused: true,
            ..Facts::default()
        };
        write_status(ctx, &databases, db, observed.as_ref(), &facts, &now).await?;
        return Ok(Action::await_change());
    }

    apply_owned(ctx, &databases, db, &namespace, &now).await
}

/// Observes, builds and applies the owned objects, then writes status.
async fn apply_owned(
    ctx: &Context,
    databases: &Api<Database>,
    db: &Database,
    namespace: &str,
    now: &Time,
) -> Result<Action, Error> {
    let client = &ctx.client;
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), namespace);

    let credentials = ensure_credentials(ctx, &secrets, db).await?;
    let observed_set = get_opt(&sets, &db.name_any()).await?;
    if observed_set
        .as_ref()
        .is_some_and(|s| s.metadata.deletion_timestamp.is_some())
    {
        // Orphan deletion for a resize is still in progress.
        return Ok(Action::requeue(RECREATE_REQUEUE));
    }
    let (template_storage, facts) = match storage::plan(client, db, observed_set.as_ref()).await? {
        StoragePlan::AsSpecified => (db.spec.storage.clone(), Facts::default()),
        StoragePlan::Blocked {
            template,
            reason,
            message,
        } => (
            template,
            Facts {
                degraded: Some((reason, message)),
                ..Facts::default()
            },
        ),
        StoragePlan::Recreating => {
            ctx.metrics.wrote("resize");
            publish(
                ctx,
                db,
                EventType::Normal,
                "StorageResized",
                format!("volume claims resized to {}", db.spec.storage),
            )
            .await;
            return Ok(Action::requeue(RECREATE_REQUEUE));
        }
    };

    // Apply order: what the Pods need (Service, Secrets) before the StatefulSet.
    let service = get_opt(&services, &db.name_any()).await?;
    record(
        ctx,
        apply(&services, &build_service(db), service.as_ref())
            .await?
            .1,
    );
    let connection = get_opt(&secrets, &connection_secret_name(db)).await?;
    record(
        ctx,
        apply(
            &secrets,
            &build_connection_secret(db, &credentials),
            connection.as_ref(),
        )
        .await?
        .1,
    );

    let desired_set = build_statefulset(db, &ctx.settings.build, &template_storage);
    let (set, applied) = apply(&sets, &desired_set, observed_set.as_ref()).await?;
    record(ctx, applied);
    announce(ctx, db, observed_set.as_ref(), applied).await;

    let existing_budget = get_opt(&budgets, &db.name_any()).await?;
    match build_pdb(db) {
        Some(budget) => record(
            ctx,
            apply(&budgets, &budget, existing_budget.as_ref()).await?.1,
        ),
        None if existing_budget.is_some() => {
            delete_if_present(&budgets, &db.name_any()).await?;
            ctx.metrics.wrote("delete");
        }
        None => {}
    }

    write_status(ctx, databases, db, Some(&set), &facts, now).await?;
    let running = status::compute(db, Some(&set), &facts, now).phase == Phase::Running;
    Ok(if running {
        Action::await_change()
    } else {
        Action::requeue(NOT_READY_REQUEUE)
    })
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
            "Deleting",
            format!("deletion policy {:?}", db.spec.deletion_policy),
        )
        .await;
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), namespace);
    let deleted = finalizer::clean_up_data(&claims, db).await?;
    if deleted > 0 {
        ctx.metrics.wrote("delete");
    }
    finalizer::remove(databases, db).await?;
    ctx.metrics.wrote("finalizer");
    Ok(Action::await_change())
}

/// Reads the credentials Secret, creating it (once) when it does not exist.
async fn ensure_credentials(
    ctx: &Context,
    secrets: &Api<Secret>,
    db: &Database,
) -> Result<Credentials, Error> {
    let name = credentials_secret_name(db);
    if let Some(existing) = get_opt(secrets, &name).await? {
        return Ok(Credentials::from_data(&existing.data.unwrap_or_default())?);
    }
    let credentials = Credentials::generate(db.spec.engine)?;
    match secrets
        .create(
            &PostParams::default(),
            &build_credentials_secret(db, &credentials),
        )
        .await
    {
        Ok(_) => {
            ctx.metrics.wrote("create");
            Ok(credentials)
        }
        // Another pass created it first: use that one, never overwrite it.
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = get_opt(secrets, &name)
                .await?
                .and_then(|s| s.data)
                .unwrap_or_default();
            Ok(Credentials::from_data(&existing)?)
        }
        Err(err) => Err(Error::CreateCredentials(err)),
    }
}

async fn write_status(
    ctx: &Context,
    api: &Api<Database>,
    db: &Database,
    set: Option<&StatefulSet>,
    facts: &Facts,
    now: &Time,
) -> Result<bool, Error> {
    let wrote = status::patch_if_changed(api, db, status::compute(db, set, facts, now)).await?;
    if wrote {
        ctx.metrics.wrote("status");
    }
    Ok(wrote)
}

fn record(ctx: &Context, applied: Applied) {
    if applied != Applied::Unchanged {
        ctx.metrics.wrote("apply");
    }
}

/// Events for the StatefulSet changes people care about.
async fn announce(ctx: &Context, db: &Database, before: Option<&StatefulSet>, applied: Applied) {
    let replicas = |s: &StatefulSet| s.spec.as_ref().and_then(|s| s.replicas);
    match (applied, before) {
        (Applied::Created, _) => {
            publish(
                ctx,
                db,
                EventType::Normal,
                "Created",
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
                "Scaled",
                format!("scaled from {from} to {} instance(s)", db.spec.replicas),
            )
            .await;
        }
        (Applied::Updated, _) => {
            publish(
                ctx,
                db,
                EventType::Normal,
                "Updated",
                format!("updated StatefulSet {}", db.name_any()),
            )
            .await;
        }
        (Applied::Unchanged, _) => {}
    }
}

/// Publishes an event; a failure to record one never fails the reconcile.
async fn publish(ctx: &Context, db: &Database, type_: EventType, reason: &str, note: String) {
    let event = Event {
        type_,
        reason: reason.to_owned(),
        note: Some(note),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    match ctx.recorder.publish(&event, &db.object_ref(&())).await {
        Ok(()) => ctx.metrics.wrote("event"),
        Err(err) => tracing::debug!(error = %err, "could not publish event"),
    }
}

fn is_paused(db: &Database) -> bool {
    db.annotations()
        .get(PAUSED_ANNOTATION)
        .is_some_and(|v| v == "true")
}

/// The current time, whole seconds: the API server stores condition times that way, so
/// a status computed now compares equal to the one it stored.
fn now() -> Time {
    let now = k8s_openapi::jiff::Timestamp::now();
    Time(k8s_openapi::jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
}

/// Retries a failed reconcile with exponential backoff per Database (1 s doubling to
/// 5 min). A broken credentials Secret waits the longest: only a person can fix it, and
/// the Secret watch brings the Database back as soon as they do.
#[allow(clippy::needless_pass_by_value)] // the signature kube's Controller expects
pub fn error_policy(db: Arc<Database>, error: &Error, ctx: Arc<Context>) -> Action {
    if matches!(error, Error::BrokenCredentials(_)) {
        return Action::requeue(crate::context::MAX_BACKOFF);
    }
    let key = format!("{}/{}", db.namespace().unwrap_or_default(), db.name_any());
    Action::requeue(ctx.backoff.delay(&key))
}
