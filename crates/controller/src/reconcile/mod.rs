//! One reconcile of one Database: finalizer → validate → observe → build → apply →
//! status. Each step lives in its own module; this driver shows the whole flow.

pub mod apply;
pub mod conflicts;
#[cfg(test)]
mod decisions;
pub mod drift;
pub mod finalizer;
pub mod layout;
pub mod ownership;
pub mod preflight;
pub mod settings;
pub mod status;
pub mod storage;
pub mod version;

use std::sync::Arc;
use std::time::{Duration, Instant};

use database_api::conditions::RESTORED;
use database_api::constants::PAUSED_ANNOTATION;
use database_api::replication::ReplicationMode;
use database_api::upgrade::{UpgradePhase, UpgradeStatus};
use database_api::validation::{Limits, validate};
use database_api::{Database, DeletionPolicy, Phase};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use operator_runtime::Action;

use self::apply::{Applied, apply, delete_if_present, get_opt};
use self::status::Facts;
use self::storage::StoragePlan;
use crate::backup::{self, restore::Restore};
use crate::context::Context;
use crate::error::Error;
use crate::metrics::ResultLabels;
use crate::replication;
use crate::resources::configmap::{build_init_configmap, build_topology_configmap};
use crate::resources::credentials::{Credentials, Layout};
use crate::resources::engine_config::build_config_configmap;
use crate::resources::meta::{
    PRIMARY, REPLICA, config_configmap_name, connection_secret_name, credentials_secret_name,
    init_configmap_name, ro_service_name, rw_service_name, topology_configmap_name,
};
use crate::resources::pdb::build_pdb;
use crate::resources::secret::{build_connection_secret, build_credentials_secret};
use crate::resources::service::{build_role_service, build_service};
use crate::resources::statefulset::build_statefulset;
use crate::resources::statefulset::data_directory;
use crate::upgrade;
use operator_runtime::events::{EventType, Notice};

/// How soon to look again at a Database that is not Ready yet. Owned-object events
/// usually come first; this only bounds how long a missed one can delay status.
const NOT_READY_REQUEUE: Duration = Duration::from_secs(30);
/// How soon to look again at a Database blocked by an object it does not control.
const CONFLICT_REQUEUE: Duration = Duration::from_secs(60);
/// How soon to look again while a StatefulSet is being replaced for a storage resize.
const RECREATE_REQUEUE: Duration = Duration::from_secs(2);
/// How soon to look again at a restore under way (its Job's changes come sooner).
const RESTORE_REQUEUE: Duration = Duration::from_secs(10);

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
pub(crate) struct Observed {
    pub(crate) statefulset: Option<StatefulSet>,
    pub(crate) service: Option<Service>,
    pub(crate) credentials: Option<Secret>,
    pub(crate) connection: Option<Secret>,
    pub(crate) budget: Option<PodDisruptionBudget>,
    pub(crate) init: Option<ConfigMap>,
    pub(crate) topology: Option<ConfigMap>,
    pub(crate) config: Option<ConfigMap>,
    pub(crate) rw: Option<Service>,
    pub(crate) ro: Option<Service>,
}

struct OwnedApis {
    sets: Api<StatefulSet>,
    services: Api<Service>,
    secrets: Api<Secret>,
    budgets: Api<PodDisruptionBudget>,
    configmaps: Api<ConfigMap>,
}

impl OwnedApis {
    fn new(client: &kube::Client, namespace: &str) -> Self {
        Self {
            sets: Api::namespaced(client.clone(), namespace),
            services: Api::namespaced(client.clone(), namespace),
            secrets: Api::namespaced(client.clone(), namespace),
            budgets: Api::namespaced(client.clone(), namespace),
            configmaps: Api::namespaced(client.clone(), namespace),
        }
    }

    /// Reads every owned object at once.
    async fn observe(&self, db: &Database) -> Result<Observed, Error> {
        let name = db.name_any();
        let (credentials_name, connection_name) =
            (credentials_secret_name(db), connection_secret_name(db));
        let (init_name, topology_name) = (init_configmap_name(db), topology_configmap_name(db));
        let (primary_service, replica_service) = (rw_service_name(db), ro_service_name(db));
        let config_name = config_configmap_name(db);
        let (statefulset, service, credentials, connection, budget, init, topology, config, rw, ro) =
            tokio::try_join!(
                get_opt(&self.sets, &name),
                get_opt(&self.services, &name),
                get_opt(&self.secrets, &credentials_name),
                get_opt(&self.secrets, &connection_name),
                get_opt(&self.budgets, &name),
                get_opt(&self.configmaps, &init_name),
                get_opt(&self.configmaps, &topology_name),
                get_opt(&self.configmaps, &config_name),
                get_opt(&self.services, &primary_service),
                get_opt(&self.services, &replica_service),
            )?;
        Ok(Observed {
            statefulset,
            service,
            credentials,
            connection,
            budget,
            init,
            topology,
            config,
            rw,
            ro,
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
    // Read even on a Database's first pass: an object of its name may already exist,
    // and one it does not control is never written (see `conflicts`).
    let mut observed = Box::pin(apis.observe(db)).await?;
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
    };
    let set = Box::pin(pass.write(&template_storage, first_pass)).await?;
    let (facts, requeue) = Box::pin(pass.engine_steps(namespace, &set, now, facts)).await?;
    write_status(ctx, databases, db, Some(&set), &facts, now).await?;
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

/// What this pass runs the Database as, decided once from its spec and what exists.
struct Shape<'a> {
    layout: Layout,
    replicated: bool,
    /// The instance named primary.
    named: String,
    /// How many ordinals a mongodb replica set's members span.
    span: Option<i32>,
    upgrade: upgrade::Plan,
    /// The Database as this pass runs it (an upgrade under way pins its version).
    as_run: std::borrow::Cow<'a, Database>,
}

impl<'a> Shape<'a> {
    fn of(db: &'a Database, observed: &Observed, now: &Time) -> Self {
        // The StatefulSet's Pods read the credentials Secret by name, so the StatefulSet
        // does not wait for it: kubelet retries until the Secret exists.
        let layout = Layout::of(
            db.spec.engine,
            observed.credentials.as_ref().and_then(|s| s.data.as_ref()),
        );
        let named = replication::named_primary(db, observed.topology.as_ref());
        let upgrade = upgrade::plan(
            db,
            observed.statefulset.as_ref(),
            &upgrade::backup_name(&db.name_any(), &db.spec.version, &stamp(now)),
        );
        let as_run = upgrade::as_run(db, &upgrade, &named);
        Self {
            layout,
            replicated: replication_runs(db, layout),
            span: replication::members_span(observed.topology.as_ref()),
            named,
            upgrade,
            as_run,
        }
    }
}

/// One pass's writes and engine steps over a Database's owned objects.
struct OwnedPass<'a> {
    ctx: &'a Context,
    databases: &'a Api<Database>,
    db: &'a Database,
    apis: &'a OwnedApis,
    observed: &'a Observed,
    shape: &'a Shape<'a>,
}

impl OwnedPass<'_> {
    /// Applies the configuration, the StatefulSet, then every other owned object;
    /// returns the StatefulSet as the API server has it.
    async fn write(&self, template_storage: &str, first_pass: bool) -> Result<StatefulSet, Error> {
        let (ctx, db, apis, observed, shape) =
            (self.ctx, self.db, self.apis, self.observed, self.shape);
        let desired_set = build_statefulset(
            &keeping_the_primary(&shape.as_run, shape.replicated, &shape.named, shape.span),
            &ctx.settings.build,
            template_storage,
            shape.layout,
        );
        // The configuration file is in place before a template that mounts it rolls out.
        let configured = apply_config(
            ctx,
            apis.configmaps.clone(),
            &shape.as_run,
            observed.config.as_ref(),
        )
        .await?;
        // The StatefulSet goes out first, on its own: it is what the StatefulSet
        // controller is waiting for, and it is the costliest write. Sharing the API
        // server with the other writes made it take twice as long on a small control
        // plane. The finalizer can follow: a Database deleted before it lands loses its
        // StatefulSet to garbage collection and its claims as the StatefulSet's retention
        // policy (set from the deletion policy) says, which is what the finalizer would
        // have done.
        let (set, set_applied) =
            apply(&apis.sets, &desired_set, observed.statefulset.as_ref()).await?;
        record(ctx, set_applied);
        drop_stale_config(&apis.configmaps, db, observed.config.as_ref(), configured).await?;
        Box::pin(apply_the_rest(
            ctx,
            self.databases,
            db,
            apis,
            observed,
            shape.layout,
            &shape.named,
            first_pass,
        ))
        .await?;
        announce(ctx, db, observed.statefulset.as_ref(), set_applied).await;
        Ok(set)
    }

    /// Replication, backups and restore, the upgrade and the settings: what each found
    /// for the status, and the soonest look again any of them asks for.
    async fn engine_steps(
        &self,
        namespace: &str,
        set: &StatefulSet,
        now: &Time,
        facts: Facts,
    ) -> Result<(Facts, Option<Duration>), Error> {
        let (ctx, db, shape) = (self.ctx, self.db, self.shape);
        let instances = set.status.as_ref().map_or(0, |s| s.replicas);
        // A mongodb replica set takes no write until it is initiated, even with one member.
        let engine_pass = shape.replicated
            && (db.spec.engine == database_api::Engine::Mongodb
                || db.spec.replicas > 1
                || instances > 1
                || db.spec.replication.mode == ReplicationMode::Sync);
        let report = replication_pass(
            ctx,
            self.databases,
            db,
            &shape.named,
            shape.span,
            engine_pass,
        )
        .await?;
        let (restore, backups) =
            backups_and_restore(ctx, db, namespace, report.primary.is_some()).await?;
        let upgraded =
            upgrade_step(ctx, db, namespace, &shape.named, now, shape.upgrade.clone()).await?;
        let settings_step = settings_pass(ctx, db, namespace, set).await?;
        let requeue = soonest(&report, &backups, restore.as_ref(), upgraded.requeue)
            .into_iter()
            .chain(settings_step.requeue)
            .min();
        let facts = Facts {
            replication: Some(report),
            restore,
            backups: Some(backups),
            degraded: facts
                .degraded
                .or_else(|| rolled_back(upgraded.status.as_ref())),
            upgrade: upgraded.status,
            parameters_applied: settings_step.applied,
            ..facts
        };
        Ok((facts, requeue))
    }
}

/// The upgrade's step this pass, with its events published.
async fn upgrade_step(
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

/// Applies the engine's configuration file when the Database has settings; whether it has.
async fn apply_config(
    ctx: &Context,
    configmaps: Api<ConfigMap>,
    db: &Database,
    observed: Option<&ConfigMap>,
) -> Result<bool, Error> {
    let Some(desired) = build_config_configmap(db, data_directory(db).as_deref()) else {
        return Ok(false);
    };
    record(ctx, apply(&configmaps, &desired, observed).await?.1);
    Ok(true)
}

/// Deletes the configuration file's ConfigMap once the Database has no settings, and
/// only when it is this Database's.
async fn drop_stale_config(
    configmaps: &Api<ConfigMap>,
    db: &Database,
    observed: Option<&ConfigMap>,
    configured: bool,
) -> Result<(), Error> {
    if !configured && observed.is_some_and(|c| conflicts::is_controlled_by(&c.metadata, db)) {
        delete_if_present(configmaps, &config_configmap_name(db)).await?;
    }
    Ok(())
}

/// The settings pass, with an event once every instance runs with a new revision.
async fn settings_pass(
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
        publish(ctx, db, EventType::Normal, "ParametersApplied", note).await;
    }
    Ok(step)
}

/// A rolled-back upgrade, as the Degraded condition's reason and message.
fn rolled_back(upgrade: Option<&UpgradeStatus>) -> Option<(&'static str, String)> {
    upgrade
        .filter(|u| u.phase == UpgradePhase::RolledBack)
        .map(|u| ("UpgradeFailed", u.message.clone().unwrap_or_default()))
}

/// `now` as `yyyymmdd-hhmm`, for names.
fn stamp(now: &Time) -> String {
    now.0.strftime("%Y%m%d-%H%M").to_string()
}

/// The storage the StatefulSet's template asks for, with what blocks a resize as facts;
/// `None` while the StatefulSet is being replaced for one.
async fn storage_step(
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
                "StorageResized",
                format!("volume claims resized to {}", db.spec.storage),
            )
            .await;
            None
        }
    })
}

/// The replication pass, with its events published.
async fn replication_pass(
    ctx: &Context,
    databases: &Api<Database>,
    db: &Database,
    named: &str,
    span: Option<i32>,
    engine_pass: bool,
) -> Result<replication::Report, Error> {
    let namespace = db.namespace().ok_or(Error::MissingNamespace)?;
    let report = replication::reconcile(ctx, db, &namespace, named, span, engine_pass).await?;
    replication::forget_done_switchover(databases, db, report.primary.as_deref()).await?;
    for (type_, reason, note) in &report.events {
        publish(ctx, db, *type_, reason, note.clone()).await;
    }
    Ok(report)
}

/// The soonest look again that replication, the backup schedule, a restore or an
/// upgrade asks for.
fn soonest(
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
async fn backups_and_restore(
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
                Restore::Done(_) => publish(ctx, db, EventType::Normal, "Restored", note).await,
                Restore::Failed(_) => {
                    publish(ctx, db, EventType::Warning, "RestoreFailed", note).await;
                }
                Restore::Waiting(_) | Restore::Running(_) => {}
            }
        }
    }
    let backups = backup::schedule::run(ctx, db, namespace).await?;
    Ok((restore, backups))
}

/// Whether the operator runs this Database's replication: an engine it replicates, with
/// credentials that have a replication user.
pub(crate) fn replication_runs(db: &Database, layout: Layout) -> bool {
    layout.replicates(db.spec.engine)
}

/// `db` with as many instances as keep the named primary (a scale-down that would remove
/// it waits until a switchover has moved the primary to a lower ordinal) and every
/// member of a mongodb replica set (an instance goes once its member has left).
fn keeping_the_primary<'a>(
    db: &'a Database,
    replicated: bool,
    named: &str,
    members_span: Option<i32>,
) -> std::borrow::Cow<'a, Database> {
    let needed = replication::ordinal(named)
        .map_or(0, |o| o + 1)
        .max(members_span.unwrap_or(0));
    if replicated && needed > db.spec.replicas {
        let mut shaped = db.clone();
        shaped.spec.replicas = needed;
        std::borrow::Cow::Owned(shaped)
    } else {
        std::borrow::Cow::Borrowed(db)
    }
}

/// Every owned object but the StatefulSet, together: the Services, the Secrets, the
/// ConfigMaps and the budget; and the finalizer on a first pass.
#[allow(clippy::too_many_arguments)]
async fn apply_the_rest(
    ctx: &Context,
    databases: &Api<Database>,
    db: &Database,
    apis: &OwnedApis,
    observed: &Observed,
    layout: Layout,
    named: &str,
    first_pass: bool,
) -> Result<(), Error> {
    let secrets = async {
        let credentials =
            ensure_credentials(ctx, &apis.secrets, db, observed.credentials.clone()).await?;
        apply(
            &apis.secrets,
            &build_connection_secret(db, &credentials, &ctx.settings.build.cluster_domain),
            observed.connection.as_ref(),
        )
        .await
        .map(|(_, applied)| applied)
    };
    let init = async {
        match init_scripts(db, layout) {
            Some(desired) => Ok(apply(&apis.configmaps, &desired, observed.init.as_ref())
                .await?
                .1),
            None => Ok(Applied::Unchanged),
        }
    };
    let services = async {
        let desired = [
            build_service(db),
            build_role_service(db, PRIMARY),
            build_role_service(db, REPLICA),
        ];
        let (headless, rw, ro) = tokio::try_join!(
            apply(&apis.services, &desired[0], observed.service.as_ref()),
            apply(&apis.services, &desired[1], observed.rw.as_ref()),
            apply(&apis.services, &desired[2], observed.ro.as_ref()),
        )?;
        Ok::<_, Error>([headless.1, rw.1, ro.1])
    };
    let topology = async {
        let desired = build_topology_configmap(db, named);
        Ok(
            apply(&apis.configmaps, &desired, observed.topology.as_ref())
                .await?
                .1,
        )
    };
    let (services, connection, init, topology, (), ()) = tokio::try_join!(
        services,
        secrets,
        init,
        topology,
        sync_budget(ctx, &apis.budgets, db, observed.budget.as_ref()),
        add_finalizer(ctx, databases, db, first_pass),
    )?;
    for applied in services.into_iter().chain([connection, init, topology]) {
        record(ctx, applied);
    }
    Ok(())
}

/// The scripts ConfigMap, where the instances run one: an engine whose image makes only a
/// superuser, with credentials that have an administrator of their own.
pub(crate) fn init_scripts(db: &Database, layout: Layout) -> Option<ConfigMap> {
    layout
        .has_admin()
        .then(|| build_init_configmap(db))
        .flatten()
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
                publish(ctx, db, EventType::Warning, "InvalidSpec", message).await;
            }
            Ok(Action::await_change())
        }
        preflight::Stop::Conflict(conflict) => {
            let message = conflict.message();
            let facts = Facts {
                degraded: Some((conflicts::REASON, message.clone())),
                ..Facts::default()
            };
            // Nothing is owned yet on a first pass, so no finalizer: deleting this
            // Database must not reach for data that is someone else's.
            if write_status(
                ctx,
                databases,
                db,
                set.filter(|s| conflicts::is_controlled_by(&s.metadata, db)),
                &facts,
                now,
            )
            .await?
            {
                publish(ctx, db, EventType::Warning, conflicts::REASON, message).await;
            }
            // The object in the way is not watched: look again now and then.
            Ok(Action::requeue(CONFLICT_REQUEUE))
        }
        preflight::Stop::Marked => Ok(Action::await_change()),
    }
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
        None if observed.is_some_and(|b| conflicts::is_controlled_by(&b.metadata, db)) => {
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
    let apis = OwnedApis::new(&ctx.client, namespace);
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
        // Created since it was read: use it only if it is this Database's.
        Err(kube::Error::Api(status)) if status.is_already_exists() => {
            let name = credentials_secret_name(db);
            let existing = get_opt(secrets, &name).await?;
            match existing {
                Some(secret) if conflicts::is_controlled_by(&secret.metadata, db) => {
                    Ok(Credentials::from_data(&secret.data.unwrap_or_default())?)
                }
                _ => Err(Error::NotControlled {
                    kind: "Secret".into(),
                    name,
                }),
            }
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
    let status = status::compute(db, set, facts, now, &ctx.settings.build.cluster_domain);
    let wrote = status::patch_if_changed(api, db, status).await?;
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
