//! Objects the operator does not control are never written: a Database whose name is
//! taken by another team's StatefulSet, Service or credentials Secret goes Failed with an
//! OwnershipConflict naming the object, says so once in an event, never writes that
//! object, starts no instance on someone else's credentials, and leaves the object alone
//! when it is deleted.

// Each conflict and all that must stay as it was are one scenario, told in one function.
#![allow(clippy::too_many_lines)]

mod common;

use std::time::Duration;

use common::{Env, NAMESPACE};
use database_api::Phase;
use database_api::constants::FINALIZER;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Event, Secret, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use testenv::Options;
use testenv::toolkit::wait::{WAIT, eventually, gone};

/// Waits for the conflict on Database `name` and returns the status message.
async fn conflict_message(env: &Env, name: &str) -> String {
    let db = eventually(WAIT, "an OwnershipConflict", || async {
        env.databases().get(name).await.ok().filter(|d| {
            d.status.as_ref().is_some_and(|s| {
                s.phase == Phase::Failed
                    && s.conditions.iter().any(|c| {
                        c.type_ == "Degraded"
                            && c.status == "True"
                            && c.reason == "OwnershipConflict"
                    })
            })
        })
    })
    .await;
    db.status.and_then(|s| s.message).unwrap_or_default()
}

/// Warning events with `reason` about Database `name`.
async fn warnings(env: &Env, name: &str, reason: &str) -> Vec<Event> {
    let events: Api<Event> = env.api();
    events
        .list(&ListParams::default())
        .await
        .expect("events")
        .items
        .into_iter()
        .filter(|e| {
            e.involved_object.name.as_deref() == Some(name) && e.reason.as_deref() == Some(reason)
        })
        .collect()
}

async fn create<K>(env: &Env, object: serde_json::Value) -> K
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).expect("object");
    env.api::<K>()
        .create(&PostParams::default(), &object)
        .await
        .expect("created")
}

/// The conflict is reported once, the foreign object is never written, and deleting
/// the Database leaves it as it was. (What else the Database needs may be created beside
/// it, controlled by the Database; never a StatefulSet beside someone else's object its
/// instances read, which the tests of those check.)
async fn nothing_else_changes<K>(env: &Env, name: &str, foreign: &K)
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    // A few more reconciles' worth of time: still one event, nothing written.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        warnings(env, name, "OwnershipConflict").await.len(),
        1,
        "one Warning event"
    );
    let api = env.api::<K>();
    let now = api.get(&foreign.name_any()).await.expect("still there");
    assert_eq!(
        now.resource_version(),
        foreign.resource_version(),
        "the foreign object was written"
    );
    let sets: Api<StatefulSet> = env.api();
    if let Some(set) = sets.get_opt(name).await.expect("read")
        && !set.owner_references().is_empty()
    {
        let db = env.databases().get(name).await.expect("the Database");
        assert!(
            db.finalizers().iter().any(|f| f == FINALIZER),
            "a Database that controls its StatefulSet looks after its data on deletion"
        );
    }

    env.databases()
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete accepted");
    gone(&env.databases(), name, WAIT).await;
    let after = api
        .get(&foreign.name_any())
        .await
        .expect("the foreign object survives the Database");
    assert_eq!(after.resource_version(), foreign.resource_version());
}

#[tokio::test]
async fn another_teams_statefulset_is_never_written() {
    let env = Env::start(Options::default()).await;
    let foreign: StatefulSet = create(
        &env,
        json!({
            "metadata": {"name": "victim", "namespace": NAMESPACE, "labels": {"team": "other"}},
            "spec": {
                "serviceName": "victim",
                "selector": {"matchLabels": {"app.kubernetes.io/instance": "victim", "app.kubernetes.io/name": "postgres"}},
                "template": {
                    "metadata": {"labels": {"app.kubernetes.io/instance": "victim", "app.kubernetes.io/name": "postgres"}},
                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
                },
            },
        }),
    )
    .await;
    env.create_database(
        "victim",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi"}),
    )
    .await;
    let message = conflict_message(&env, "victim").await;
    assert_eq!(
        message,
        "StatefulSet victim already exists and is not controlled by this Database; the operator changes nothing until it is removed or the Database is given another name"
    );
    nothing_else_changes(&env, "victim", &foreign).await;
}

#[tokio::test]
async fn another_teams_headless_service_is_not_taken_over() {
    let env = Env::start(Options::default()).await;
    let foreign: Service = create(
        &env,
        json!({
            "metadata": {"name": "victim", "namespace": NAMESPACE},
            "spec": {"clusterIP": "None", "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80}]},
        }),
    )
    .await;
    env.create_database(
        "victim",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi"}),
    )
    .await;
    let message = conflict_message(&env, "victim").await;
    assert!(
        message.starts_with("Service victim already exists"),
        "{message}"
    );
    nothing_else_changes(&env, "victim", &foreign).await;
    let services: Api<Service> = env.api();
    let after = services.get("victim").await.expect("service");
    let spec = after.spec.expect("spec");
    assert_eq!(
        spec.selector,
        Some([("app".to_owned(), "web".to_owned())].into())
    );
    assert_eq!(
        spec.ports.map(|p| p.len()),
        Some(1),
        "no database port added"
    );
}

#[tokio::test]
async fn someone_elses_credentials_secret_is_never_used() {
    let env = Env::start(Options::default()).await;
    let foreign: Secret = create(
        &env,
        json!({
            "metadata": {"name": "victim-credentials", "namespace": NAMESPACE},
            "stringData": {"username": "app", "password": "chosen-by-someone-else", "database": "app"},
        }),
    )
    .await;
    env.create_database(
        "victim",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi"}),
    )
    .await;
    let message = conflict_message(&env, "victim").await;
    assert!(
        message.starts_with("Secret victim-credentials already exists"),
        "{message}"
    );
    let sets: Api<StatefulSet> = env.api();
    assert!(
        sets.get_opt("victim").await.expect("read").is_none(),
        "no instance may start with that password"
    );
    nothing_else_changes(&env, "victim", &foreign).await;
}
