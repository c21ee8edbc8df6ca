//! The objects a Database owns: reading them, what this pass runs the Database as,
//! and writing them through the [`Applier`](super::applier::Applier).

use std::time::Duration;

use database_api::Database;
use database_api::replication::ReplicationMode;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use super::applier::Applier;
use super::notify::announce;
use super::passes::{
    backups_and_restore, replication_pass, rolled_back, settings_pass, soonest, stamp, upgrade_step,
};
use super::seen::{Seen, fresh, sight};
use super::status::Facts;
use super::{add_finalizer, conflicts};
use crate::context::Context;
use crate::error::Error;
use crate::objects::get_opt;
use crate::objects::ledger::Ledger;
use crate::replication;
use crate::resources::configmap::{build_init_configmap, build_topology_configmap};
use crate::resources::credentials::{Credentials, Layout, random_password};
use crate::resources::engine_config::{self, build_config_configmap};
use crate::resources::meta::{
    PRIMARY, config_configmap_name, connection_secret_name, credentials_secret_name,
    init_configmap_name, ro_service_name, rw_service_name, topology_configmap_name,
};
use crate::resources::monitoring::{self, build_monitor_secret, monitor_secret_name};
use crate::resources::pdb::build_pdb;
use crate::resources::secret::{build_connection_secret, build_credentials_secret};
use crate::resources::service::{
    build_read_service, build_role_service, build_service, build_write_service, is_alias,
    keeping_a_virtual_ip,
};
use crate::resources::statefulset::build_statefulset;
use crate::resources::statefulset::data_directory;
use crate::upgrade;

/// The owned objects as the API server has them. The StatefulSet, the credentials and
/// the topology are always read, as the pass reads their contents; the others only
/// when the ledger cannot vouch for them. The Pods are listed with them once the
/// StatefulSet's watch has seen it, so a pass that finds them ready writes the status
/// one round trip after its reads.
#[derive(Default)]
pub(crate) struct Observed {
    pub(crate) statefulset: Option<StatefulSet>,
    pub(crate) service: Seen<Service>,
    pub(crate) credentials: Option<Secret>,
    pub(crate) connection: Seen<Secret>,
    pub(crate) budget: Seen<PodDisruptionBudget>,
    pub(crate) init: Seen<ConfigMap>,
    pub(crate) topology: Option<ConfigMap>,
    pub(crate) config: Seen<ConfigMap>,
    pub(crate) rw: Seen<Service>,
    pub(crate) ro: Seen<Service>,
    /// `None` when not listed with the reads.
    pub(crate) pods: Option<Vec<Pod>>,
}

pub(super) struct OwnedApis<'a> {
    ledger: &'a Ledger,
    namespace: &'a str,
    pub(super) sets: Api<StatefulSet>,
    pub(super) services: Api<Service>,
    pub(super) secrets: Api<Secret>,
    pub(super) budgets: Api<PodDisruptionBudget>,
    pub(super) configmaps: Api<ConfigMap>,
    pods: Api<Pod>,
}

impl<'a> OwnedApis<'a> {
    pub(super) fn new(client: &kube::Client, ledger: &'a Ledger, namespace: &'a str) -> Self {
        Self {
            ledger,
            namespace,
            sets: Api::namespaced(client.clone(), namespace),
            services: Api::namespaced(client.clone(), namespace),
            secrets: Api::namespaced(client.clone(), namespace),
            budgets: Api::namespaced(client.clone(), namespace),
            configmaps: Api::namespaced(client.clone(), namespace),
            pods: Api::namespaced(client.clone(), namespace),
        }
    }

    /// Reads every owned object the ledger cannot vouch for, at once, and with them the
    /// Pods when `with_pods` (a paused Database's pass has no use for them).
    pub(super) async fn observe(&self, db: &Database, with_pods: bool) -> Result<Observed, Error> {
        let name = db.name_any();
        let (credentials_name, connection_name) =
            (credentials_secret_name(db), connection_secret_name(db));
        let (init_name, topology_name) = (init_configmap_name(db), topology_configmap_name(db));
        let (primary_service, replica_service) = (rw_service_name(db), ro_service_name(db));
        let config_name = config_configmap_name(db);
        let (
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
            pods,
        ) = tokio::try_join!(
            get_opt(&self.sets, &name),
            self.sight(&self.services, &name),
            get_opt(&self.secrets, &credentials_name),
            self.sight(&self.secrets, &connection_name),
            self.sight_unless_unwanted(build_pdb(db).is_some(), &self.budgets, &name),
            self.sight(&self.configmaps, &init_name),
            get_opt(&self.configmaps, &topology_name),
            self.sight_unless_unwanted(
                engine_config::effective(db).is_some(),
                &self.configmaps,
                &config_name
            ),
            self.sight(&self.services, &primary_service),
            self.sight(&self.services, &replica_service),
            self.pods_once_the_statefulset_exists(db, with_pods),
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
            pods,
        })
    }

    async fn pods_once_the_statefulset_exists(
        &self,
        db: &Database,
        wanted: bool,
    ) -> Result<Option<Vec<Pod>>, Error> {
        if !wanted
            || !self
                .ledger
                .exists::<StatefulSet>(self.namespace, &db.name_any())
        {
            return Ok(None);
        }
        Ok(Some(
            replication::database_pods(&self.pods, db).await?.items,
        ))
    }

    async fn sight<K>(&self, api: &Api<K>, name: &str) -> Result<Seen<K>, Error>
    where
        K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned + Clone + std::fmt::Debug,
    {
        sight(self.ledger, api, self.namespace, name).await
    }

    /// [`Self::sight`], except that an object the pass does not want is not read when
    /// the ledger knows none of this Database's exists: there is nothing to prune, and
    /// someone else's of that name is not in the way of anything.
    async fn sight_unless_unwanted<K>(
        &self,
        wanted: bool,
        api: &Api<K>,
        name: &str,
    ) -> Result<Seen<K>, Error>
    where
        K: kube::Resource<DynamicType = ()> + serde::de::DeserializeOwned + Clone + std::fmt::Debug,
    {
        if !wanted && self.ledger.none_of_ours::<K>(self.namespace, name) {
            return Ok(Seen::Missing);
        }
        self.sight(api, name).await
    }
}

/// What this pass runs the Database as, decided once from its spec and what exists.
pub(super) struct Shape<'a> {
    pub(super) layout: Layout,
    pub(super) replicated: bool,
    /// The instance named primary.
    pub(super) named: String,
    /// How many ordinals a mongodb replica set's members span.
    pub(super) span: Option<i32>,
    pub(super) upgrade: upgrade::Plan,
    /// The Database as this pass runs it (an upgrade under way pins its version).
    pub(super) as_run: std::borrow::Cow<'a, Database>,
}

impl<'a> Shape<'a> {
    pub(super) fn of(db: &'a Database, observed: &Observed, now: &Time) -> Self {
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
pub(super) struct OwnedPass<'a> {
    pub(super) ctx: &'a Context,
    pub(super) databases: &'a Api<Database>,
    pub(super) db: &'a Database,
    pub(super) apis: &'a OwnedApis<'a>,
    pub(super) observed: &'a Observed,
    pub(super) shape: &'a Shape<'a>,
    /// A new Database's first pass, which read nothing (see [`super::first_pass`]).
    pub(super) unread: bool,
}

impl OwnedPass<'_> {
    /// The StatefulSet this pass wants, its claims of `template_storage`.
    pub(super) fn desired_statefulset(&self, template_storage: &str) -> StatefulSet {
        let shape = self.shape;
        build_statefulset(
            &keeping_the_primary(&shape.as_run, shape.replicated, &shape.named, shape.span),
            &self.ctx.settings.build,
            template_storage,
            shape.layout,
        )
    }

    /// Applies the configuration, the StatefulSet, then every other owned object (a
    /// pass that read nothing, the other way round); returns the StatefulSet as the API
    /// server has it.
    pub(super) async fn write(
        &self,
        applier: &Applier<'_>,
        template_storage: &str,
        first_pass: bool,
    ) -> Result<StatefulSet, Error> {
        if self.unread {
            return Box::pin(self.write_unread(applier, template_storage)).await;
        }
        let (ctx, db, apis, observed, shape) =
            (self.ctx, self.db, self.apis, self.observed, self.shape);
        let desired_set = self.desired_statefulset(template_storage);
        // The configuration file is in place before a template that mounts it rolls out.
        apply_config(applier, &apis.configmaps, &shape.as_run, &observed.config).await?;
        // The StatefulSet goes out first, on its own: it is what the StatefulSet
        // controller is waiting for, and it is the costliest write, which the API server
        // answers sooner when no other write of the pass competes with it. The finalizer
        // can follow: a Database deleted before it lands loses its
        // StatefulSet to garbage collection and its claims as the StatefulSet's retention
        // policy (set from the deletion policy) says, which is what the finalizer would
        // have done.
        let (set, set_applied) = applier
            .apply(&apis.sets, &desired_set, observed.statefulset.as_ref())
            .await?;
        Box::pin(apply_the_rest(
            applier,
            self.databases,
            db,
            apis,
            observed,
            shape.layout,
            &shape.named,
            first_pass,
        ))
        .await?;
        // Only now that every wanted object is in place do leftovers go: the
        // StatefulSet no longer mounts a configuration file about to be deleted.
        Box::pin(prune_leftovers(applier, apis, observed)).await?;
        announce(ctx, db, observed.statefulset.as_ref(), set_applied).await;
        Ok(set)
    }

    /// Replication, backups and restore, the upgrade and the settings: what each found
    /// for the status, and the soonest look again any of them asks for.
    pub(super) async fn engine_steps(
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
        // A StatefulSet that reports no Pods has none to list yet; the first one's watch
        // event brings the pass that labels it.
        let pods = match (&self.observed.pods, instances > 0) {
            (_, false) => replication::Pods::None,
            (Some(listed), true) => replication::Pods::Listed(listed),
            (None, true) => replication::Pods::Unlisted,
        };
        let report = replication_pass(
            ctx,
            self.databases,
            db,
            (&shape.named, shape.span),
            engine_pass,
            pods,
        )
        .await?;
        let (restore, backups) =
            backups_and_restore(ctx, db, namespace, report.primary.is_some()).await?;
        let upgraded =
            upgrade_step(ctx, db, namespace, &shape.named, now, shape.upgrade.clone()).await?;
        let settings_step = settings_pass(ctx, db, namespace, set).await?;
        let exec_pods = Api::namespaced(ctx.exec_client().clone(), namespace);
        let monitoring =
            crate::monitoring::ensure_user(&exec_pods, db, report.primary.as_deref()).await;
        let requeue = soonest(&report, &backups, restore.as_ref(), upgraded.requeue)
            .into_iter()
            .chain(settings_step.requeue)
            .chain(crate::monitoring::retry_after(monitoring.as_ref()))
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
            monitoring,
            counted: self
                .observed
                .pods
                .as_deref()
                .map(|pods| super::counted::count(set, pods)),
            ..facts
        };
        Ok((facts, requeue))
    }
}

/// Applies the engine's configuration file when the Database has settings.
pub(super) async fn apply_config(
    applier: &Applier<'_>,
    configmaps: &Api<ConfigMap>,
    db: &Database,
    observed: &Seen<ConfigMap>,
) -> Result<(), Error> {
    if let Some(desired) = build_config_configmap(db, data_directory(db).as_deref()) {
        applier.apply_seen(configmaps, &desired, observed).await?;
    }
    Ok(())
}

/// Deletes what the pass no longer wants of what it observed (see [`Applier::prune`]).
pub(super) async fn prune_leftovers(
    applier: &Applier<'_>,
    apis: &OwnedApis<'_>,
    observed: &Observed,
) -> Result<(), Error> {
    tokio::try_join!(
        applier.prune(&apis.sets, observed.statefulset.as_ref()),
        applier.prune_seen(&apis.services, &observed.service),
        applier.prune_seen(&apis.services, &observed.rw),
        applier.prune_seen(&apis.services, &observed.ro),
        applier.prune(&apis.secrets, observed.credentials.as_ref()),
        applier.prune_seen(&apis.secrets, &observed.connection),
        applier.prune_seen(&apis.budgets, &observed.budget),
        applier.prune_seen(&apis.configmaps, &observed.init),
        applier.prune(&apis.configmaps, observed.topology.as_ref()),
        applier.prune_seen(&apis.configmaps, &observed.config),
    )?;
    Ok(())
}

/// Whether the operator runs this Database's replication: an engine it replicates, with
/// credentials that have a replication user.
pub(crate) fn replication_runs(db: &Database, layout: Layout) -> bool {
    layout.replicates(db.spec.engine)
}

/// `db` with as many instances as keep the named primary (a scale-down that would remove
/// it waits until a switchover has moved the primary to a lower ordinal) and every
/// member of a mongodb replica set (an instance goes once its member has left).
pub(super) fn keeping_the_primary<'a>(
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
pub(super) async fn apply_the_rest(
    applier: &Applier<'_>,
    databases: &Api<Database>,
    db: &Database,
    apis: &OwnedApis<'_>,
    observed: &Observed,
    layout: Layout,
    named: &str,
    first_pass: bool,
) -> Result<(), Error> {
    let ctx = applier.context();
    let secrets = async {
        if let Some(credentials) = claim_credentials(applier, apis, db, observed).await? {
            apply_connection(applier, apis, db, observed, &credentials).await?;
        }
        Ok(())
    };
    tokio::try_join!(
        secrets,
        apply_mounted_configmaps(applier, apis, db, observed, layout, named),
        apply_services_and_budget(applier, apis, db, observed, named),
        add_finalizer(ctx, databases, db, first_pass),
    )?;
    Ok(())
}

/// The scripts and topology ConfigMaps, which the instances mount.
pub(super) async fn apply_mounted_configmaps(
    applier: &Applier<'_>,
    apis: &OwnedApis<'_>,
    db: &Database,
    observed: &Observed,
    layout: Layout,
    named: &str,
) -> Result<(), Error> {
    let init = async {
        if let Some(desired) = init_scripts(db, layout) {
            applier
                .apply_seen(&apis.configmaps, &desired, &observed.init)
                .await?;
        }
        Ok(())
    };
    let topology = build_topology_configmap(db, named);
    tokio::try_join!(
        init,
        applier.apply(&apis.configmaps, &topology, observed.topology.as_ref()),
    )?;
    Ok(())
}

/// The three Services and the budget: nothing an instance reads. `named` is the
/// primary the topology names, which a one-instance `-rw` is an alias of.
pub(super) async fn apply_services_and_budget(
    applier: &Applier<'_>,
    apis: &OwnedApis<'_>,
    db: &Database,
    observed: &Observed,
    named: &str,
) -> Result<(), Error> {
    let services = async {
        let cluster_domain = &applier.context().settings.build.cluster_domain;
        let desired = [
            build_service(db),
            desired_write_service(applier, &apis.services, db, named, &observed.rw).await?,
            build_read_service(db, cluster_domain),
        ];
        tokio::try_join!(
            applier.apply_seen(&apis.services, &desired[0], &observed.service),
            applier.apply_seen(&apis.services, &desired[1], &observed.rw),
            applier.apply_seen(&apis.services, &desired[2], &observed.ro),
        )
    };
    let budget = async {
        if let Some(desired) = build_pdb(db) {
            applier
                .apply_seen(&apis.budgets, &desired, &observed.budget)
                .await?;
        }
        Ok(())
    };
    tokio::try_join!(services, budget)?;
    Ok(())
}

/// `-rw` as this pass wants it: see [`keeping_a_virtual_ip`]. Read only when the ledger
/// vouches for neither an alias nor a virtual IP.
async fn desired_write_service(
    applier: &Applier<'_>,
    api: &Api<Service>,
    db: &Database,
    named: &str,
    seen: &Seen<Service>,
) -> Result<Service, Error> {
    let cluster_domain = &applier.context().settings.build.cluster_domain;
    let desired = build_write_service(db, named, cluster_domain);
    if !is_alias(&desired) {
        return Ok(desired);
    }
    match seen {
        Seen::Missing => Ok(desired),
        Seen::Read(current) => Ok(keeping_a_virtual_ip(db, desired, Some(current))),
        Seen::Unread { .. } => {
            if applier.unchanged(&desired, seen)? {
                return Ok(desired);
            }
            let kept = build_role_service(db, PRIMARY);
            if applier.unchanged(&kept, seen)? {
                return Ok(kept);
            }
            let current = fresh(api, seen).await?;
            Ok(keeping_a_virtual_ip(db, desired, current.as_ref()))
        }
    }
}

/// The credentials: from the observed Secret, or from one created now (and the
/// monitoring user's Secret with them when the Database asks for an exporter). `None`
/// when a holding pass has none to go on.
pub(super) async fn claim_credentials(
    applier: &Applier<'_>,
    apis: &OwnedApis<'_>,
    db: &Database,
    observed: &Observed,
) -> Result<Option<Credentials>, Error> {
    let ctx = applier.context();
    applier.keep::<Secret>(&credentials_secret_name(db));
    if applier.is_holding() && observed.credentials.is_none() {
        // Nothing to derive the connection Secret from until credentials exist.
        applier.note_held::<Secret>(&credentials_secret_name(db), false);
        return Ok(None);
    }
    if monitoring::enabled(db) {
        applier.keep::<Secret>(&monitor_secret_name(db));
        if !applier.is_holding() {
            ensure_monitor_secret(ctx, &apis.secrets, db).await?;
        }
    }
    ensure_credentials(ctx, &apis.secrets, db, observed.credentials.clone())
        .await
        .map(Some)
}

/// The connection Secret, derived from `credentials`.
pub(super) async fn apply_connection(
    applier: &Applier<'_>,
    apis: &OwnedApis<'_>,
    db: &Database,
    observed: &Observed,
    credentials: &Credentials,
) -> Result<(), Error> {
    let ctx = applier.context();
    let connection = build_connection_secret(db, credentials, &ctx.settings.build.cluster_domain);
    if applier.unchanged(&connection, &observed.connection)? {
        return Ok(());
    }
    // A Secret's type cannot change in place: one made before it was a Service
    // Binding Secret is replaced.
    let current = match fresh(&apis.secrets, &observed.connection).await? {
        Some(old) if old.type_ != connection.type_ => {
            applier.remove(&apis.secrets, &old).await?;
            None
        }
        current => current,
    };
    applier
        .apply(&apis.secrets, &connection, current.as_ref())
        .await?;
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

/// The credentials from the observed Secret, or from a new one created (once) when
/// there is none. An existing Secret is never overwritten.
pub(super) async fn ensure_credentials(
    ctx: &Context,
    secrets: &Api<Secret>,
    db: &Database,
    observed: Option<Secret>,
) -> Result<Credentials, Error> {
    if let Some(existing) = observed {
        return Ok(Credentials::from_data(&existing.data.unwrap_or_default())?);
    }
    let credentials = Credentials::generate(db.spec.engine)?;
    match create_once(
        ctx,
        secrets,
        db,
        &build_credentials_secret(db, &credentials),
    )
    .await?
    {
        None => Ok(credentials),
        Some(existing) => Ok(Credentials::from_data(&existing.data.unwrap_or_default())?),
    }
}

/// The monitoring user's Secret, created once when the Database first asks for an
/// exporter; an existing one is never overwritten.
async fn ensure_monitor_secret(
    ctx: &Context,
    secrets: &Api<Secret>,
    db: &Database,
) -> Result<(), Error> {
    if get_opt(secrets, &monitor_secret_name(db)).await?.is_some() {
        return Ok(());
    }
    let secret = build_monitor_secret(db, &random_password()?);
    create_once(ctx, secrets, db, &secret).await.map(|_| ())
}

/// Creates `secret`; when one of its name was created since it was read, that one
/// (only if this Database controls it).
async fn create_once(
    ctx: &Context,
    secrets: &Api<Secret>,
    db: &Database,
    secret: &Secret,
) -> Result<Option<Secret>, Error> {
    match secrets.create(&PostParams::default(), secret).await {
        Ok(_) => {
            ctx.metrics.wrote("create");
            Ok(None)
        }
        Err(kube::Error::Api(status)) if status.is_already_exists() => {
            let name = secret.name_any();
            match get_opt(secrets, &name).await? {
                Some(existing) if conflicts::is_controlled_by(&existing.metadata, db) => {
                    Ok(Some(existing))
                }
                _ => Err(Error::NotControlled {
                    kind: "Secret".into(),
                    name,
                }),
            }
        }
        Err(source) => Err(Error::CreateSecret {
            name: secret.name_any(),
            source,
        }),
    }
}
