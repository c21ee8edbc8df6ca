//! Wires the reconcile into kube's `Controller`: the Database watch, the owned-object
//! watches that bring a Database back when something it owns changes, and shutdown.

use std::sync::Arc;
use std::time::Duration;

use database_api::Database;
use database_api::constants::labels;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector;
use kube::runtime::{Predicate as _, PredicateConfig, WatchStreamExt as _, predicates, watcher};
use kube::{Api, Client, ResourceExt as _};

use crate::context::Context;
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
    let controllers = namespaces.into_iter().map(|namespace| {
        let client = ctx.client.clone();
        let ctx = ctx.clone();
        let shutdown = shutdown.clone();
        async move {
            controller(&client, namespace.as_deref(), concurrency)
                .graceful_shutdown_on(shutdown)
                .run(reconcile, error_policy, ctx)
                .for_each(|result| async move {
                    if let Err(err) = result {
                        tracing::debug!(error = %err, "reconcile did not complete");
                    }
                })
                .await;
        }
    });
    futures::future::join_all(controllers).await;
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

fn controller(client: &Client, namespace: Option<&str>, concurrency: u16) -> Controller<Database> {
    // Owned objects all carry the managed-by label: watching only those keeps every other
    // Secret and Service in the cluster out of memory.
    let owned = watcher::Config::default().labels(&format!(
        "{}={}",
        labels::MANAGED_BY,
        labels::MANAGED_BY_VALUE
    ));
    let (reader, writer) = reflector::store();
    let databases = watcher(
        api::<Database>(client, namespace),
        watcher::Config::default().any_semantic(),
    )
    // Nothing reads managedFields or kubectl's copy of the last applied object, and they
    // are the largest part of a cached Database.
    .modify(|db| {
        db.managed_fields_mut().clear();
        db.annotations_mut().remove(LAST_APPLIED);
    })
    .reflect(writer)
    .applied_objects()
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
    );
    Controller::for_stream(databases, reader)
        .with_config(ControllerConfig::default().concurrency(concurrency))
        .trigger_backoff(WatchBackoff::default())
        .owns(api::<StatefulSet>(client, namespace), owned.clone())
        .owns(api::<Service>(client, namespace), owned.clone())
        .owns(api::<Secret>(client, namespace), owned.clone())
        .owns(api::<PodDisruptionBudget>(client, namespace), owned)
}

/// Retry delays for broken watches: 0.5 s doubling to 2 s. kube's default climbs to
/// 30 s, and one backoff pauses all of a controller's watches together, so after an API
/// server restart (every watch then gets 410 Gone and lists again) the default left the
/// controller blind for minutes; a short cap keeps that to seconds.
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
