//! The controller against a real API server (no kube-controller-manager): what it
//! creates, how it corrects drift, how it follows spec changes and how deletion ends.

mod common;

use common::{Env, WAIT, eventually};
use database_api::constants::FINALIZER;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use testenv::Options;

fn secret_text(secret: &Secret, key: &str) -> String {
    let data = secret.data.as_ref().expect("data");
    String::from_utf8(
        data.get(key)
            .unwrap_or_else(|| panic!("no {key}"))
            .0
            .clone(),
    )
    .expect("utf-8")
}

async fn wait_for<K>(api: &Api<K>, name: &str) -> K
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(WAIT, name, || async {
        api.get_opt(name).await.ok().flatten()
    })
    .await
}

#[tokio::test]
async fn create_makes_the_statefulset_service_and_both_secrets() {
    let env = Env::start(Options::default()).await;
    env.create(
        "orders",
        json!({"engine": "postgres", "version": "16.4", "storage": "10Gi"}),
    )
    .await;

    let set: StatefulSet = wait_for(&env.api(), "orders").await;
    let spec = set.spec.clone().expect("spec");
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.service_name.as_deref(), Some("orders"));
    let container = &spec.template.spec.as_ref().expect("pod").containers[0];
    assert_eq!(container.image.as_deref(), Some("postgres:16.4"));
    let template = &spec.volume_claim_templates.expect("templates")[0];
    let storage = template
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .expect("requests");
    assert_eq!(storage["storage"].0, "10Gi");
    let owner = &set.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Database", "orders", Some(true))
    );

    let service: Service = wait_for(&env.api(), "orders").await;
    let service_spec = service.spec.expect("spec");
    assert_eq!(service_spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(service_spec.ports.expect("ports")[0].port, 5432);

    let credentials: Secret = wait_for(&env.api(), "orders-credentials").await;
    let password = secret_text(&credentials, "password");
    assert_eq!(password.len(), 32);
    let connection: Secret = wait_for(&env.api(), "orders-connection").await;
    assert_eq!(secret_text(&connection, "password"), password);
    assert_eq!(
        secret_text(&connection, "host"),
        "orders.shop.svc.cluster.local"
    );
    assert_eq!(
        secret_text(&connection, "uri"),
        format!("postgresql://app:{password}@orders.shop.svc.cluster.local:5432/app")
    );

    let db = eventually(WAIT, "status", || async {
        env.databases()
            .get("orders")
            .await
            .ok()
            .filter(|d| d.status.as_ref().and_then(|s| s.observed_generation) == Some(1))
    })
    .await;
    assert!(db.finalizers().iter().any(|f| f == FINALIZER));
    let status = db.status.expect("status");
    assert_eq!(
        status.endpoint.as_deref(),
        Some("orders.shop.svc.cluster.local:5432")
    );
    assert_eq!(
        status.selector.as_deref(),
        Some("app.kubernetes.io/instance=orders,app.kubernetes.io/name=postgres")
    );
    let text = serde_json::to_string(&status).expect("json");
    assert!(!text.contains(&password), "the password leaked into status");
}

#[tokio::test]
async fn drift_in_owned_objects_is_corrected() {
    let env = Env::start(Options::default()).await;
    env.create(
        "drift",
        json!({"engine": "mysql", "version": "8.4", "storage": "5Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    wait_for(&sets, "drift").await;

    // Someone scales the StatefulSet by hand; the Database says 1.
    sets.patch(
        "drift",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .expect("edited");
    eventually(WAIT, "replicas back to 1", || async {
        sets.get("drift")
            .await
            .ok()
            .filter(|s| s.spec.as_ref().and_then(|s| s.replicas) == Some(1))
    })
    .await;

    // Someone deletes the Service; it comes back.
    let services: Api<Service> = env.api();
    let old_uid = wait_for(&services, "drift").await.uid();
    services
        .delete("drift", &DeleteParams::default())
        .await
        .expect("deleted");
    eventually(WAIT, "Service recreated", || async {
        services
            .get_opt("drift")
            .await
            .ok()
            .flatten()
            .filter(|s| s.uid() != old_uid)
    })
    .await;
}

#[tokio::test]
async fn spec_changes_scale_and_update_the_statefulset() {
    let env = Env::start(Options::default()).await;
    env.create(
        "grow",
        json!({"engine": "mongodb", "version": "7.0", "storage": "5Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    wait_for(&sets, "grow").await;
    let budgets: Api<PodDisruptionBudget> = env.api();
    assert!(
        budgets.get_opt("grow").await.expect("get").is_none(),
        "no budget for one instance"
    );

    let patch = Patch::Merge(json!({"spec": {"replicas": 3, "version": "8.0"}}));
    env.databases()
        .patch("grow", &PatchParams::default(), &patch)
        .await
        .expect("spec changed");
    let set = eventually(WAIT, "scaled and updated", || async {
        sets.get("grow")
            .await
            .ok()
            .filter(|s| s.spec.as_ref().and_then(|s| s.replicas) == Some(3))
    })
    .await;
    let image = set
        .spec
        .and_then(|s| s.template.spec)
        .map(|p| p.containers[0].image.clone());
    assert_eq!(image, Some(Some("mongo:8.0".to_owned())));
    wait_for(&budgets, "grow").await;

    // Back to one instance: the budget goes away again.
    let patch = Patch::Merge(json!({"spec": {"replicas": 1}}));
    env.databases()
        .patch("grow", &PatchParams::default(), &patch)
        .await
        .expect("scaled down");
    eventually(WAIT, "budget removed", || async {
        budgets.get_opt("grow").await.ok().filter(Option::is_none)
    })
    .await;
}

#[tokio::test]
async fn deleting_a_database_releases_the_finalizer() {
    let env = Env::start(Options::default()).await;
    env.create(
        "gone",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi"}),
    )
    .await;
    eventually(WAIT, "finalizer", || async {
        env.databases()
            .get("gone")
            .await
            .ok()
            .filter(|d| d.finalizers().iter().any(|f| f == FINALIZER))
    })
    .await;
    env.databases()
        .delete("gone", &DeleteParams::default())
        .await
        .expect("delete accepted");
    eventually(WAIT, "Database gone", || async {
        env.databases()
            .get_opt("gone")
            .await
            .ok()
            .filter(Option::is_none)
    })
    .await;
}

#[tokio::test]
async fn a_database_whose_owned_objects_are_gone_is_still_deleted() {
    let mut env = Env::start(Options::default()).await;
    env.create(
        "orphan",
        json!({"engine": "mysql", "version": "8.0", "storage": "1Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    wait_for(&sets, "orphan").await;
    env.stop_controller().await;
    sets.delete("orphan", &DeleteParams::default())
        .await
        .expect("sts deleted");
    let services: Api<Service> = env.api();
    services
        .delete("orphan", &DeleteParams::default())
        .await
        .expect("service deleted");
    env.databases()
        .delete("orphan", &DeleteParams::default())
        .await
        .expect("delete accepted");
    env.start_controller().await;
    eventually(WAIT, "Database gone", || async {
        env.databases()
            .get_opt("orphan")
            .await
            .ok()
            .filter(Option::is_none)
    })
    .await;
}
