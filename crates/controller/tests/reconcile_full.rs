//! The controller on the full control plane (controller-manager, scheduler and kwok):
//! Databases reach Running, steady state writes nothing, deletion collects what it owns
//! and honours the deletion policy, and storage grows in place.

mod common;

use std::time::{Duration, Instant};

use common::{CONTROLLER_USER, Env, NAMESPACE};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use testenv::Options;
use testenv::toolkit::kubectl::kubectl;
use testenv::toolkit::wait::{WAIT, eventually, gone};

const RUNNING_WAIT: Duration = Duration::from_secs(90);
/// kube-controller-manager's garbage collector discovers a CRD created after it started
/// on its next discovery sync (every 30 s), so collection can take that long.
const COLLECT_WAIT: Duration = Duration::from_secs(90);

fn claims_of(name: &str, list: &[PersistentVolumeClaim]) -> Vec<String> {
    let mut names: Vec<String> = list
        .iter()
        .map(ResourceExt::name_any)
        .filter(|n| n.starts_with(&format!("data-{name}-")))
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn a_database_reaches_running_and_kubectl_wait_sees_ready() {
    let env = Env::start(Options::full()).await;
    let started = Instant::now();
    env.create_database(
        "orders",
        json!({"engine": "postgres", "version": "16.4", "storage": "10Gi", "replicas": 3}),
    )
    .await;

    // Asynchronously: the controller runs on this same runtime.
    let wait = [
        "wait",
        "--for=condition=Ready",
        "db/orders",
        "-n",
        NAMESPACE,
        "--timeout=90s",
    ];
    let (ok, _, stderr) = kubectl(&env.plane, &wait, "").await;
    assert!(ok, "kubectl wait: {stderr}");
    eprintln!(
        "create to Ready (3 replicas, full mode): {:.1?}",
        started.elapsed()
    );

    let db = env.wait_running("orders", RUNNING_WAIT).await;
    let status = db.status.expect("status");
    assert!(status.ready);
    assert_eq!(status.replicas, 3);
    assert_eq!(status.replicas, db.spec.replicas);
    let pods: Api<Pod> = env.api();
    let pods = pods
        .list(&ListParams::default().labels("app.kubernetes.io/instance=orders"))
        .await
        .expect("pods");
    assert_eq!(pods.items.len(), 3);
}

#[tokio::test]
async fn steady_state_makes_no_write_calls() {
    let env = Env::start(Options::full().with_audit()).await;
    for name in ["steady-a", "steady-b"] {
        env.create_database(
            name,
            json!({"engine": "mysql", "version": "8.4", "storage": "5Gi"}),
        )
        .await;
    }
    env.wait_running("steady-a", RUNNING_WAIT).await;
    env.wait_running("steady-b", RUNNING_WAIT).await;
    // Let the last status write and its watch echo settle.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = env.plane.request_lines_by(CONTROLLER_USER);
    assert!(
        !before.is_empty(),
        "the audit log saw none of the controller's writes"
    );

    // Nudge every Database (metadata-only changes trigger reconciles) and wait.
    for name in ["steady-a", "steady-b"] {
        for round in 0..3 {
            env.patch_database(
                name,
                json!({"metadata": {"annotations": {"test/nudge": round.to_string()}}}),
            )
            .await;
        }
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    let after = env.plane.request_lines_by(CONTROLLER_USER);
    let new: Vec<&String> = after.iter().skip(before.len()).collect();
    eprintln!(
        "controller writes: {} while converging, {} in steady state",
        before.len(),
        new.len()
    );
    assert!(new.is_empty(), "writes in steady state: {new:#?}");
}

#[tokio::test]
async fn delete_collects_owned_objects_and_honours_the_deletion_policy() {
    let env = Env::start(Options::full()).await;
    env.create_database(
        "keep",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2}),
    )
    .await;
    env.create_database("drop", json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2, "deletionPolicy": "Delete"})).await;
    env.wait_running("keep", RUNNING_WAIT).await;
    env.wait_running("drop", RUNNING_WAIT).await;
    let claims: Api<PersistentVolumeClaim> = env.api();
    let all = claims
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    assert_eq!(claims_of("keep", &all), ["data-keep-0", "data-keep-1"]);
    assert_eq!(claims_of("drop", &all), ["data-drop-0", "data-drop-1"]);

    for name in ["keep", "drop"] {
        env.databases()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete accepted");
    }
    for name in ["keep", "drop"] {
        gone(&env.databases(), name, WAIT).await;
        let sets: Api<StatefulSet> = env.api();
        gone(&sets, name, COLLECT_WAIT).await;
        let services: Api<Service> = env.api();
        gone(&services, name, COLLECT_WAIT).await;
        let secrets: Api<Secret> = env.api();
        let connection = format!("{name}-connection");
        gone(&secrets, &connection, COLLECT_WAIT).await;
    }
    // The credentials go with the data: collected for Delete, kept for Retain with no
    // controller and the version the data was written by.
    let secrets: Api<Secret> = env.api();
    gone(&secrets, "drop-credentials", COLLECT_WAIT).await;
    eventually(WAIT, "Delete policy removed its claims", || async {
        let all = claims.list(&ListParams::default()).await.ok()?.items;
        claims_of("drop", &all).is_empty().then_some(())
    })
    .await;
    let all = claims
        .list(&ListParams::default())
        .await
        .expect("claims")
        .items;
    assert_eq!(
        claims_of("keep", &all),
        ["data-keep-0", "data-keep-1"],
        "Retain must keep the data"
    );
}

#[tokio::test]
async fn retained_credentials_are_kept_and_taken_back_by_the_same_name() {
    let env = Env::start(Options::full()).await;
    let spec = json!({"engine": "postgres", "version": "17", "storage": "1Gi"});
    env.create_database("keep", spec.clone()).await;
    env.wait_running("keep", RUNNING_WAIT).await;
    env.databases()
        .delete("keep", &DeleteParams::default())
        .await
        .expect("delete accepted");
    gone(&env.databases(), "keep", WAIT).await;
    // Kept with the data: no controller, and the version the data was written by.
    let secrets: Api<Secret> = env.api();
    let kept = secrets
        .get("keep-credentials")
        .await
        .expect("Retain keeps the credentials that match the kept volumes");
    assert!(
        kept.owner_references().is_empty(),
        "{:?}",
        kept.owner_references()
    );
    assert_eq!(
        kept.annotations()
            .get("mycompany.io/retained-version")
            .map(String::as_str),
        Some("17")
    );

    // The same name again takes them back: same password, controlled by the new Database.
    env.create_database("keep", spec).await;
    let again = env.wait_running("keep", RUNNING_WAIT).await;
    let taken_back = secrets.get("keep-credentials").await.expect("credentials");
    assert_eq!(
        taken_back.data, kept.data,
        "the password the kept data was made with"
    );
    assert!(
        taken_back
            .owner_references()
            .iter()
            .any(|r| r.controller == Some(true) && Some(&r.uid) == again.metadata.uid.as_ref()),
        "controlled by the new Database"
    );
    assert!(
        !taken_back
            .annotations()
            .contains_key("mycompany.io/retained-version")
    );
}

/// The uids of Database `name`'s Pods, sorted.
async fn pod_uids(env: &Env, name: &str) -> Vec<String> {
    let pods: Api<Pod> = env.api();
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/instance={name}"));
    let mut uids: Vec<String> = pods
        .list(&selector)
        .await
        .expect("pods")
        .items
        .iter()
        .map(ResourceExt::uid)
        .map(Option::unwrap_or_default)
        .collect();
    uids.sort();
    uids
}

#[tokio::test]
async fn growing_storage_resizes_claims_and_keeps_the_pods() {
    let env = Env::start(Options::full()).await;
    env.create_database(
        "big",
        json!({"engine": "mysql", "version": "8.4", "storage": "10Gi", "replicas": 2}),
    )
    .await;
    env.wait_running("big", RUNNING_WAIT).await;
    let before = pod_uids(&env, "big").await;

    env.patch_database("big", json!({"spec": {"storage": "20Gi"}}))
        .await;

    let sets: Api<StatefulSet> = env.api();
    eventually(RUNNING_WAIT, "StatefulSet recreated with 20Gi", || async {
        let set = sets.get_opt("big").await.ok().flatten()?;
        let template = set.spec?.volume_claim_templates?.into_iter().next()?;
        let size = template
            .spec?
            .resources?
            .requests?
            .get("storage")?
            .0
            .clone();
        (size == "20Gi").then_some(())
    })
    .await;
    let claims: Api<PersistentVolumeClaim> = env.api();
    for name in ["data-big-0", "data-big-1"] {
        let claim = claims.get(name).await.expect("claim");
        let size = claim
            .spec
            .and_then(|s| s.resources)
            .and_then(|r| r.requests)
            .map(|r| r["storage"].0.clone());
        assert_eq!(size.as_deref(), Some("20Gi"), "{name}");
    }
    env.wait_running("big", RUNNING_WAIT).await;
    assert_eq!(
        before,
        pod_uids(&env, "big").await,
        "the Pods were kept through the StatefulSet's replacement"
    );
}

#[tokio::test]
async fn growth_on_a_storage_class_without_expansion_is_refused_in_a_condition() {
    let env = Env::start(Options::full()).await;
    let classes: Api<k8s_openapi::api::storage::v1::StorageClass> = Api::all(env.client.clone());
    let patch = Patch::Merge(json!({"allowVolumeExpansion": false}));
    classes
        .patch(testenv::STORAGE_CLASS, &PatchParams::default(), &patch)
        .await
        .expect("class changed");
    env.create_database(
        "fixed",
        json!({"engine": "postgres", "version": "16", "storage": "10Gi"}),
    )
    .await;
    env.wait_running("fixed", RUNNING_WAIT).await;

    env.patch_database("fixed", json!({"spec": {"storage": "20Gi"}}))
        .await;
    let degraded = env.condition_true("fixed", "Degraded").await;
    assert_eq!(degraded.reason, "ExpansionNotSupported");
    assert!(
        degraded.message.contains(testenv::STORAGE_CLASS),
        "{}",
        degraded.message
    );
    let claims: Api<PersistentVolumeClaim> = env.api();
    let claim = claims.get("data-fixed-0").await.expect("claim");
    let size = claim
        .spec
        .and_then(|s| s.resources)
        .and_then(|r| r.requests)
        .map(|r| r["storage"].0.clone());
    assert_eq!(size.as_deref(), Some("10Gi"), "the claim was not touched");
}
