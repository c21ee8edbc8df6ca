//! Wires the reconcile into kube's `Controller`: the Database watch, the owned-object
//! watches that bring a Database back when something it owns changes, and shutdown.

use std::sync::Arc;

use database_api::Database;
use database_api::constants::labels;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::watcher;
use kube::{Api, Client};

use crate::context::Context;
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
    Controller::new(
        api::<Database>(client, namespace),
        watcher::Config::default().any_semantic(),
    )
    .with_config(ControllerConfig::default().concurrency(concurrency))
    .owns(api::<StatefulSet>(client, namespace), owned.clone())
    .owns(api::<Service>(client, namespace), owned.clone())
    .owns(api::<Secret>(client, namespace), owned.clone())
    .owns(api::<PodDisruptionBudget>(client, namespace), owned)
}
