//! One reconcile of one Database: finalizer → validate → observe → build → apply →
//! status. Each step lives in its own module; this driver shows the whole flow.

pub mod apply;
pub mod drift;
pub mod finalizer;
pub mod ownership;
pub mod status;
pub mod storage;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::dispatch::Action;
use database_api::constants::PAUSED_ANNOTATION;
use database_api::validation::{Limits, validate};
use database_api::{Database, Phase};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};

use self::apply::{Applied, apply, delete_if_present, get_opt};
use self::status::Facts;
use self::storage::StoragePlan;
use crate::context::Context;
use crate::error::Error;
use crate::events::{EventType, Notice};
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
            publish(ctx, db, EventType::Warning, "InvalidSpec", message).await;
        }
        // A user error: nothing to retry until the spec changes.
        return Ok(Action::await_change());
    }
    if is_paused(db) {
        let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &namespace);
        let name = db.name_any();
        let (observed, ()) = tokio::try_join!(
            get_opt(&sets, &name),
            add_finalizer(ctx, &databases, db, first_pass),
        )?;
        let facts = Facts {
            paused: true,
            ..Facts::default()
        };
        write_status(ctx, &databases, db, observed.as_ref(), &facts, &now).await?;
        return Ok(Action::await_change());
    }
    Box::pin(apply_owned(
        ctx, &databases, db, &namespace, &now, first_pass,
    ))
    .await
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

/// The owned objects as the API server has them.
#[derive(Default)]
struct Observed {
    statefulset: Option<StatefulSet>,
    service: Option<Service>,
    credentials: Option<Secret>,
    connection: Option<Secret>,
    budget: Option<PodDisruptionBudget>,
}

struct OwnedApis {
    sets: Api<StatefulSet>,
    services: Api<Service>,
    secrets: Api<Secret>,
    budgets: Api<PodDisruptionBudget>,
}

impl OwnedApis {
    fn new(client: &kube::Client, namespace: &str) -> Self {
        Self {
            sets: Api::namespaced(client.clone(), namespace),
            services: Api::namespaced(client.clone(), namespace),
            secrets: Api::namespaced(client.clone(), namespace),
            budgets: Api::namespaced(client.clone(), namespace),
        }
    }

    /// Reads every owned object at once.
    async fn observe(&self, db: &Database) -> Result<Observed, Error> {
        let name = db.name_any();
        let (credentials_name, connection_name) =
            (credentials_secret_name(db), connection_secret_name(db));
        let (statefulset, service, credentials, connection, budget) = tokio::try_join!(
            get_opt(&self.sets, &name),
            get_opt(&self.services, &name),
            get_opt(&self.secrets, &credentials_name),
            get_opt(&self.secrets, &connection_name),
            get_opt(&self.budgets, &name),
        )?;
        Ok(Observed {
            statefulset,
            service,
            credentials,
            connection,
            budget,
        })
    }
}

/// Observes, builds and applies the owned objects, then writes status: about four round
/// trips (reads, the StatefulSet, the other objects together, status). A new Database
/// skips the reads, so its StatefulSet is the first request of the pass.
async fn apply_owned(
    ctx: &Context,
    databases: &Api<Database>,
    db: &Database,
    namespace: &str,
    now: &Time,
    first_pass: bool,
) -> Result<Action, Error> {
    let apis = OwnedApis::new(&ctx.client, namespace);
    // A new Database owns nothing yet: skip the reads. Applies are idempotent, so a
    // stray existing object is simply brought in line.
    let observed = if first_pass {
        Observed::default()
    } else {
        apis.observe(db).await?
    };
    if observed
        .statefulset
        .as_ref()
        .is_some_and(|s| s.metadata.deletion_timestamp.is_some())
    {
        // Orphan deletion for a resize is still in progress.
        return Ok(Action::requeue(RECREATE_REQUEUE));
    }
    let (template_storage, facts) =
        match storage::plan(&ctx.client, db, observed.statefulset.as_ref()).await? {
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

    // The StatefulSet's Pods read the credentials Secret by name, so the StatefulSet
    // does not wait for it: kubelet retries until the Secret exists.
    let desired_set = build_statefulset(db, &ctx.settings.build, &template_storage);
    let desired_service = build_service(db);
    let secrets = async {
        let credentials =
            ensure_credentials(ctx, &apis.secrets, db, observed.credentials.clone()).await?;
        apply(
            &apis.secrets,
            &build_connection_secret(db, &credentials),
            observed.connection.as_ref(),
        )
        .await
    };
    // The StatefulSet goes out first, on its own: it is what the StatefulSet controller
    // is waiting for, and it is the costliest write. Sharing the API server with the
    // other writes made it take twice as long on a small control plane. The finalizer
    // can follow: a Database deleted before it lands loses its StatefulSet to garbage
    // collection and its claims as the StatefulSet's retention policy (set from the
    // deletion policy) says, which is what the finalizer would have done.
    let (set, set_applied) = apply(&apis.sets, &desired_set, observed.statefulset.as_ref()).await?;
    let ((_, service_applied), (_, connection_applied), (), ()) = tokio::try_join!(
        apply(&apis.services, &desired_service, observed.service.as_ref()),
        secrets,
        sync_budget(ctx, &apis.budgets, db, observed.budget.as_ref()),
        add_finalizer(ctx, databases, db, first_pass),
    )?;
    for applied in [set_applied, service_applied, connection_applied] {
        record(ctx, applied);
    }
    announce(ctx, db, observed.statefulset.as_ref(), set_applied).await;

    write_status(ctx, databases, db, Some(&set), &facts, now).await?;
    let running = status::compute(db, Some(&set), &facts, now).phase == Phase::Running;
    Ok(if running {
        Action::await_change()
    } else {
        Action::requeue(NOT_READY_REQUEUE)
    })
}

/// Applies the PodDisruptionBudget, or deletes it when one instance needs none.
async fn sync_budget(
    ctx: &Context,
    api: &Api<PodDisruptionBudget>,
    db: &Database,
    observed: Option<&PodDisruptionBudget>,
) -> Result<(), Error> {
    match build_pdb(db) {
        Some(budget) => record(ctx, apply(api, &budget, observed).await?.1),
        None if observed.is_some() => {
            delete_if_present(api, &db.name_any()).await?;
            ctx.metrics.wrote("delete");
        }
        None => {}
    }
    Ok(())
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

/// The credentials from the observed Secret, or from a new one created (once) when
/// there is none. An existing Secret is never overwritten.
async fn ensure_credentials(
    ctx: &Context,
    secrets: &Api<Secret>,
    db: &Database,
    observed: Option<Secret>,
) -> Result<Credentials, Error> {
    if let Some(existing) = observed {
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
        // It exists already (an earlier pass, or a first pass that skipped the read).
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let existing = get_opt(secrets, &credentials_secret_name(db))
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
    let notice = Notice {
        type_,
        reason: reason.to_owned(),
        note,
    };
    match ctx.events.publish(&notice, &db.object_ref(&())).await {
        Ok(()) => ctx.metrics.wrote("event"),
        Err(err) => tracing::debug!(error = %err, "could not publish event"),
    }
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
