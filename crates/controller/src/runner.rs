//! Wires the reconcile to its triggers: the Database watch, and the owned-object
//! watches that bring a Database back when something it owns changes; runs them until
//! shutdown.

use std::sync::Arc;
use std::time::Duration;

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
use kube::runtime::controller::trigger_owners;
use kube::runtime::reflector::{self, ObjectRef, ObjectRefExtra, Store};
use kube::runtime::{Predicate as _, PredicateConfig, WatchStreamExt as _, predicates, watcher};
use kube::{Api, Client, ResourceExt as _};

use crate::backup;
use crate::context::Context;
use crate::dispatch;
use crate::reconcile::{error_policy, reconcile};

/// The annotation `kubectl apply` keeps the whole applied object in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

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
        let (triggers, store) = triggers(&ctx.client, namespace.as_deref());
        controllers.push(
            dispatch::run(
                triggers,
                store,
                reconcile,
                error_policy,
                ctx.clone(),
                dispatch::Workers {
                    concurrency,
                    metrics: ctx.metrics.queue.clone(),
                    forget: Some(Arc::new({
                        let ctx = ctx.clone();
                        move |key: &str| ctx.backoff.reset(key)
                    })),
                },
                shutdown.clone(),
            )
            .boxed(),
        );
        let (triggers, store) = backup_triggers(&ctx.client, namespace.as_deref());
        ctx.remember_backups(store.clone());
        controllers.push(
            dispatch::run(
                triggers,
                store,
                backup::reconcile::reconcile,
                backup::reconcile::error_policy,
                ctx.clone(),
                dispatch::Workers {
                    concurrency: BACKUP_CONCURRENCY,
                    metrics: crate::metrics::QueueMetrics::default(),
                    forget: None,
                },
                shutdown.clone(),
            )
            .boxed(),
        );
    }
    futures::future::join_all(controllers).await;
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
        api::<DatabaseBackup>(client, namespace),
        watcher::Config::default().any_semantic(),
    )
    .backoff(WatchBackoff::default())
    .reflect(writer)
    .touched_objects()
    .map(|result| result.map(|b| ObjectRef::from_obj(&b)))
    .boxed();
    let streams = vec![backups, owner_of::<Job, DatabaseBackup>(client, namespace)];
    (keys_of(futures::stream::select_all(streams)), reader)
}

/// The Databases whose backups change (a finished one sets LastBackupSucceeded).
fn databases_of_backups(
    client: &Client,
    namespace: Option<&str>,
) -> BoxStream<'static, Result<ObjectRef<Database>, watcher::Error>> {
    watcher(
        api::<DatabaseBackup>(client, namespace),
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

/// Keys from watch results: a failed watch retries after its backoff and yields none.
fn keys_of<K>(
    results: impl Stream<Item = Result<ObjectRef<K>, watcher::Error>>,
) -> impl Stream<Item = ObjectRef<K>>
where
    K: kube::Resource,
    K::DynamicType: Default,
{
    results.filter_map(|result| async move {
        match result {
            // The uid and resourceVersion a key carries play no part in finding the
            // object; dropping them keeps each waiting key small.
            Ok(mut key) => {
                key.extra = ObjectRefExtra::default();
                Some(key)
            }
            Err(err) => {
                // The watch retries after its backoff; its cache stays as it was.
                tracing::info!(error = %crate::error::watch_message(&err), "watch failed; retrying");
                None
            }
        }
    })
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The Databases to reconcile, as their watches report them, and the cache of
/// Databases those watches keep.
fn triggers(
    client: &Client,
    namespace: Option<&str>,
) -> (
    impl Stream<Item = ObjectRef<Database>> + use<>,
    Store<Database>,
) {
    let (reader, writer) = reflector::store();
    let databases = watcher(
        api::<Database>(client, namespace),
        watcher::Config::default().any_semantic(),
    )
    .backoff(WatchBackoff::default())
    // Nothing reads managedFields or kubectl's copy of the last applied object, and they
    // are the largest part of a cached Database.
    .modify(|db| {
        db.managed_fields_mut().clear();
        db.annotations_mut().remove(LAST_APPLIED);
    })
    .reflect(writer);
    let databases = cached(databases, reader.clone())
        // The status the controller writes needs no reconcile in reply: only a spec change
        // (marking for deletion bumps the generation too), labels, annotations (the pause
        // switch) or finalizers (one removed by hand is put back) bring a Database back.
        // The cache above still sees every change.
        .predicate_filter(
            predicates::generation
                .combine(predicates::labels)
                .combine(predicates::annotations)
                .combine(predicates::finalizers),
            PredicateConfig::default(),
        )
        .map(|result| result.map(|db| ObjectRef::from_obj(&db)))
        .boxed();
    let streams = vec![
        databases,
        owner_of::<StatefulSet, Database>(client, namespace),
        owner_of::<Service, Database>(client, namespace),
        owner_of::<Secret, Database>(client, namespace),
        owner_of::<PodDisruptionBudget, Database>(client, namespace),
        owner_of::<ConfigMap, Database>(client, namespace),
        owner_of::<Job, Database>(client, namespace),
        instances_of(client, namespace),
        databases_of_backups(client, namespace),
    ];
    (keys_of(futures::stream::select_all(streams)), reader)
}

/// The Databases a watch reports, each at a moment the cache already holds it, so the
/// reconcile it triggers finds it there. A list's objects only reach the cache all at
/// once, when the list ends, so they are passed on from the cache then, not one by one
/// as they arrive (that would drop a Database created while the watch was down: its
/// reconcile would start before the cache had it).
fn cached(
    events: impl Stream<Item = Result<watcher::Event<Database>, watcher::Error>> + Send + 'static,
    cache: Store<Database>,
) -> impl Stream<Item = Result<Database, watcher::Error>> + Send + 'static {
    events.flat_map(move |event| {
        let (objects, error) = match event {
            Ok(watcher::Event::Apply(db)) => (vec![Arc::new(db)], None),
            Ok(watcher::Event::InitDone) => (cache.state(), None),
            Ok(watcher::Event::Init | watcher::Event::InitApply(_) | watcher::Event::Delete(_)) => {
                (Vec::new(), None)
            }
            Err(err) => (Vec::new(), Some(err)),
        };
        // Cloned one at a time as the stream is read: a relist of thousands of
        // Databases never holds a second copy of them all.
        let objects = objects
            .into_iter()
            .map(|db| Ok(Arc::try_unwrap(db).unwrap_or_else(|shared| (*shared).clone())));
        futures::stream::iter(error.map(Err).into_iter().chain(objects))
    })
}

/// The owners (of kind `O`) of the objects of kind `K` that change. Only metadata is
/// watched, and only objects with the managed-by label: that keeps every other Secret
/// and Service in the cluster, and every owned object's body, out of memory.
fn owner_of<K, O>(
    client: &Client,
    namespace: Option<&str>,
) -> BoxStream<'static, Result<ObjectRef<O>, watcher::Error>>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
    O: kube::Resource<DynamicType = ()> + Send + 'static,
{
    let owned = watcher::Config::default().labels(&format!(
        "{}={}",
        labels::MANAGED_BY,
        labels::MANAGED_BY_VALUE
    ));
    let changes = watcher(api::<PartialObjectMeta<K>>(client, namespace), owned)
        .backoff(WatchBackoff::default())
        .touched_objects();
    trigger_owners(changes, (), ())
        .map(|result| result.map(|request| request.obj_ref))
        .boxed()
}

/// The Databases whose instances' Pods change (readiness above all: a primary that
/// stops being ready may need a failover). Pods belong to the StatefulSet, not to the
/// Database, so the instance label names the Database.
fn instances_of(
    client: &Client,
    namespace: Option<&str>,
) -> BoxStream<'static, Result<ObjectRef<Database>, watcher::Error>> {
    let owned = watcher::Config::default().labels(&format!(
        "{}={}",
        labels::MANAGED_BY,
        labels::MANAGED_BY_VALUE
    ));
    watcher(api::<PartialObjectMeta<Pod>>(client, namespace), owned)
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

/// Retry delays for a broken watch: 0.5 s doubling to 2 s. kube's default climbs to
/// 30 s, which after an API server restart (every watch then gets 410 Gone and lists
/// again) left the controller blind for minutes; a short cap keeps that to seconds.
/// Each watch has its own.
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
}

const FIRST_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(2);

impl Default for WatchBackoff {
    fn default() -> Self {
        Self { next: FIRST_RETRY }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let current = self.next;
        self.next = (self.next * 2).min(MAX_RETRY);
        Some(current)
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = FIRST_RETRY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::utils::Backoff as _;
    use kube::runtime::watcher::Event;

    fn database(name: &str) -> Database {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "mycompany.io/v1", "kind": "Database",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"engine": "postgres", "version": "16", "storage": "1Gi"},
        }))
        .expect("Database")
    }

    /// A relist (Init, InitApply..., InitDone) after an earlier list: each Database
    /// comes out only once the cache holds it, and a watch event at once.
    #[tokio::test]
    async fn databases_come_out_once_the_cache_holds_them() {
        let (reader, writer) = reflector::store();
        let events = vec![
            Ok(Event::Init),
            Ok(Event::InitApply(database("old"))),
            Ok(Event::InitDone),
            Ok(Event::Init),
            Ok(Event::InitApply(database("old"))),
            Ok(Event::InitApply(database("new"))),
            Ok(Event::InitDone),
            Ok(Event::Apply(database("changed"))),
            Ok(Event::Delete(database("old"))),
        ];
        let stream = cached(
            futures::stream::iter(events).reflect(writer),
            reader.clone(),
        );
        let mut stream = std::pin::pin!(stream);
        let mut seen = Vec::new();
        while let Some(item) = stream.next().await {
            let db = item.expect("no errors were sent");
            assert!(
                reader.get(&ObjectRef::from_obj(&db)).is_some(),
                "{} came out before the cache held it",
                db.name_any()
            );
            seen.push(db.name_any());
        }
        let (first, rest) = seen.split_at(1);
        assert_eq!(first, ["old"]);
        let mut relisted = rest[..2].to_vec();
        relisted.sort();
        assert_eq!(relisted, ["new", "old"]);
        assert_eq!(rest[2..], ["changed"]);
    }

    #[test]
    fn watch_retries_double_up_to_two_seconds_and_reset() {
        let mut backoff = WatchBackoff::default();
        let delays: Vec<u64> = backoff
            .by_ref()
            .take(6)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(0))
            .collect();
        assert_eq!(delays, [500, 1000, 2000, 2000, 2000, 2000]);
        backoff.reset();
        assert_eq!(backoff.next(), Some(FIRST_RETRY));
    }
}
