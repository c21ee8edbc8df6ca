//! Wires the reconcile to its triggers: the Database watch, and the owned-object
//! watches that bring a Database back when something it owns changes; runs them until
//! shutdown.

use std::sync::Arc;

use database_api::Database;
use database_api::backup::DatabaseBackup;
use database_api::constants::labels;
use futures::stream::BoxStream;
use futures::{FutureExt as _, Stream, StreamExt};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::core::PartialObjectMeta;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Predicate as _, WatchStreamExt as _, predicates, watcher};
use kube::{Client, ResourceExt as _};
use operator_runtime::Controller;
use operator_runtime::watch::{
    OwnedKind, WatchBackoff, cached, changed, keys_of, owners_of_changed, owners_of_changed_noted,
    scoped_api,
};

use crate::backup;
use crate::cache;
use crate::context::Context;
use crate::objects::ledger::Ledger;
use crate::reconcile::{error_policy, reconcile};

/// Which namespaces to watch.
#[derive(Clone, Debug, Default)]
pub enum Scope {
    #[default]
    AllNamespaces,
    Namespaces(Vec<String>),
}

/// Runs the controller until `shutdown` resolves, then finishes the reconciles in flight.
pub async fn run(
    ctx: Arc<Context>,
    scope: Scope,
    concurrency: u16,
    shutdown: impl Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let namespaces: Vec<Option<String>> = match scope {
        Scope::AllNamespaces => vec![None],
        Scope::Namespaces(list) => list.into_iter().map(Some).collect(),
    };
    let mut controllers = Vec::new();
    for namespace in namespaces {
        let (triggers, store) = triggers(&ctx.client, &ctx.ledger, namespace.as_deref());
        let databases = Controller::new(triggers, store)
            .high_priority_when(set_up)
            .concurrency(concurrency)
            .metrics(ctx.metrics.queue.clone())
            .graceful_shutdown_on(shutdown.clone());
        controllers.push(databases.run(reconcile, error_policy, ctx.clone()).boxed());
        let (triggers, store) = backup_triggers(&ctx.client, namespace.as_deref());
        ctx.remember_backups(store.clone());
        let backups = Controller::new(triggers, store)
            .concurrency(BACKUP_CONCURRENCY)
            .graceful_shutdown_on(shutdown.clone());
        let reconcile_backup = backup::reconcile::reconcile;
        controllers.push(
            backups
                .run(
                    reconcile_backup,
                    backup::reconcile::error_policy,
                    ctx.clone(),
                )
                .boxed(),
        );
    }
    futures::future::join_all(controllers).await;
}

/// Whether a Database has had its first pass (its status says which generation it saw):
/// its later passes, a StatefulSet that became ready above all, go ahead of the first
/// passes of new ones, so a burst of creates does not hold up Databases already set up.
fn set_up(db: &Database) -> bool {
    db.status
        .as_ref()
        .is_some_and(|status| status.observed_generation.is_some())
}

/// DatabaseBackups handled at the same time: each mostly waits on its Job.
const BACKUP_CONCURRENCY: u16 = 4;

/// The DatabaseBackups to reconcile: their own changes and their Jobs'.
fn backup_triggers(
    client: &Client,
    namespace: Option<&str>,
) -> (
    impl Stream<Item = ObjectRef<DatabaseBackup>> + use<>,
    Store<DatabaseBackup>,
) {
    let (reader, writer) = reflector::store();
    let backups = watcher(
        scoped_api::<DatabaseBackup>(client, namespace),
        watcher::Config::default().any_semantic(),
    )
    .backoff(WatchBackoff::default())
    .reflect(writer)
    .touched_objects()
    .map(|result| result.map(|b| ObjectRef::from_obj(&b)))
    .boxed();
    let managed = managed_by();
    let streams = vec![
        backups,
        owners_of_changed::<Job, DatabaseBackup>(client, namespace, &managed),
    ];
    (keys_of(futures::stream::select_all(streams)), reader)
}

/// The Databases whose backups change (a finished one sets LastBackupSucceeded).
fn databases_of_backups(
    client: &Client,
    namespace: Option<&str>,
) -> BoxStream<'static, Result<ObjectRef<Database>, watcher::Error>> {
    watcher(
        scoped_api::<DatabaseBackup>(client, namespace),
        watcher::Config::default().any_semantic(),
    )
    .backoff(WatchBackoff::default())
    .touched_objects()
    .map(|result| {
        result.map(|backup| {
            let namespace = backup.namespace().unwrap_or_default();
            ObjectRef::new(&backup.spec.database).within(&namespace)
        })
    })
    .boxed()
}

/// The Databases to reconcile, as their watches report them, and the cache of
/// Databases those watches keep.
fn triggers(
    client: &Client,
    ledger: &Arc<Ledger>,
    namespace: Option<&str>,
) -> (
    impl Stream<Item = ObjectRef<Database>> + use<>,
    Store<Database>,
) {
    let (reader, writer) = reflector::store();
    let databases = watcher(
        scoped_api::<Database>(client, namespace),
        watcher::Config::default().any_semantic(),
    )
    .backoff(WatchBackoff::default())
    .modify(cache::slim)
    .reflect(writer);
    // The status the controller writes needs no reconcile in reply: only a spec change
    // (marking for deletion bumps the generation too), annotations (the pause switch)
    // or finalizers (one removed by hand is put back) bring a Database back. The cache
    // above still sees every change.
    let databases = changed(
        cached(databases, reader.clone()),
        predicates::generation
            .combine(predicates::annotations)
            .combine(predicates::finalizers),
    )
    .map(|result| result.map(|db| ObjectRef::from_obj(&db)))
    .boxed();
    let managed = managed_by();
    let streams = vec![
        databases,
        owned_changes::<StatefulSet>(client, ledger, namespace),
        owned_changes::<Service>(client, ledger, namespace),
        owned_changes::<Secret>(client, ledger, namespace),
        owned_changes::<PodDisruptionBudget>(client, ledger, namespace),
        owned_changes::<ConfigMap>(client, ledger, namespace),
        owners_of_changed::<Job, Database>(client, namespace, &managed),
        instances_of(client, namespace),
        databases_of_backups(client, namespace),
    ];
    (keys_of(futures::stream::select_all(streams)), reader)
}

/// The Databases whose owned objects of kind `K` change, each change noted in the
/// ledger; a change that only echoes the controller's own write brings no pass.
fn owned_changes<K: OwnedKind>(
    client: &Client,
    ledger: &Arc<Ledger>,
    namespace: Option<&str>,
) -> BoxStream<'static, Result<ObjectRef<Database>, watcher::Error>> {
    let (ledger, scope) = (ledger.clone(), namespace.map(str::to_owned));
    let note = move |event: &watcher::Event<PartialObjectMeta<K>>| {
        ledger.watched(scope.as_deref(), event);
        match event {
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                !ledger.is_echo::<K>(&object.metadata)
            }
            _ => true,
        }
    };
    owners_of_changed_noted::<K, Database>(client, namespace, &managed_by(), note)
}

/// The Databases whose instances' Pods change (readiness above all: a primary that
/// stops being ready may need a failover). Pods belong to the StatefulSet, not to the
/// Database, so the instance label names the Database.
fn instances_of(
    client: &Client,
    namespace: Option<&str>,
) -> BoxStream<'static, Result<ObjectRef<Database>, watcher::Error>> {
    let owned = watcher::Config::default().labels(&managed_by());
    watcher(
        scoped_api::<PartialObjectMeta<Pod>>(client, namespace),
        owned,
    )
    .backoff(WatchBackoff::default())
    .touched_objects()
    .filter_map(|result| async move {
        match result {
            Ok(pod) => {
                let name = pod.labels().get(labels::INSTANCE)?.clone();
                let namespace = pod.namespace()?;
                Some(Ok(ObjectRef::new(&name).within(&namespace)))
            }
            Err(err) => Some(Err(err)),
        }
    })
    .boxed()
}

/// The label selector of the objects this operator manages.
fn managed_by() -> String {
    format!("{}={}", labels::MANAGED_BY, labels::MANAGED_BY_VALUE)
}
