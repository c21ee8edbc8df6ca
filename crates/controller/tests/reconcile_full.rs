//! The controller on the full control plane (controller-manager, scheduler and kwok):
//! Databases reach Running, steady state writes nothing, deletion collects what it owns
//! and honours the deletion policy, and storage grows in place.

mod common;

use std::time::{Duration, Instant};

use common::{Env, NAMESPACE, WAIT, eventually};
use database_api::Phase;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret, Service};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use testenv::Options;

const RUNNING_WAIT: Duration = Duration::from_secs(90);
/// kube-controller-manager's garbage collector discovers a CRD created after it started
/// on its next discovery sync (every 30 s), so collection can take that long.
const COLLECT_WAIT: Duration = Duration::from_secs(90);

async fn wait_running(env: &Env, name: &str) -> database_api::Database {
    eventually(RUNNING_WAIT, "phase Running", || async {
        env.databases()
            .get(name)
            .await
            .ok()
            .filter(|d| d.status.as_ref().is_some_and(|s| s.phase == Phase::Running))
    })
    .await
}

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
    env.create(
        "orders",
        json!({"engine": "postgres", "version": "16.4", "storage": "10Gi", "replicas": 3}),
    )
    .await;

    let mut wait = tokio::process::Command::from(env.plane.kubectl().expect("kubectl"));
    wait.args([
        "wait",
        "--for=condition=Ready",
        "db/orders",
        "-n",
        NAMESPACE,
        "--timeout=90s",
    ]);
    // Asynchronously: the controller runs on this same runtime.
    let output = wait.output().await.expect("kubectl runs");
    assert!(
        output.status.success(),
        "kubectl wait: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    eprintln!(
        "create to Ready (3 replicas, full mode): {:.1?}",
        started.elapsed()
    );

    let db = wait_running(&env, "orders").await;
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
        env.create(
            name,
            json!({"engine": "mysql", "version": "8.4", "storage": "5Gi"}),
        )
        .await;
    }
    wait_running(&env, "steady-a").await;
    wait_running(&env, "steady-b").await;
    // Let the last status write and its watch echo settle.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = env.controller_writes();
    assert!(
        !before.is_empty(),
        "the audit log saw none of the controller's writes"
    );

    // Nudge every Database (metadata-only changes trigger reconciles) and wait.
    for name in ["steady-a", "steady-b"] {
        for round in 0..3 {
            let patch = Patch::Merge(
                json!({"metadata": {"annotations": {"test/nudge": round.to_string()}}}),
            );
            env.databases()
                .patch(name, &PatchParams::default(), &patch)
                .await
                .expect("nudged");
        }
    }
    tokio::time::sleep(Duration::from_secs(8)).await;
    let after = env.controller_writes();
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
    env.create(
        "keep",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2}),
    )
    .await;
    env.create("drop", json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2, "deletionPolicy": "Delete"})).await;
    wait_running(&env, "keep").await;
    wait_running(&env, "drop").await;
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
        eventually(WAIT, "Database gone", || async {
            env.databases()
                .get_opt(name)
                .await
                .ok()
                .filter(Option::is_none)
        })
        .await;
        let sets: Api<StatefulSet> = env.api();
        eventually(COLLECT_WAIT, "StatefulSet collected", || async {
            sets.get_opt(name).await.ok().filter(Option::is_none)
        })
        .await;
        let services: Api<Service> = env.api();
        eventually(COLLECT_WAIT, "Service collected", || async {
            services.get_opt(name).await.ok().filter(Option::is_none)
        })
        .await;
        let secrets: Api<Secret> = env.api();
        let connection = format!("{name}-connection");
        eventually(COLLECT_WAIT, "connection Secret collected", || async {
            secrets
                .get_opt(&connection)
                .await
                .ok()
                .filter(Option::is_none)
        })
        .await;
    }
    // The credentials go with the data: collected for Delete, kept for Retain with no
    // controller and the version the data was written by.
    let secrets: Api<Secret> = env.api();
    eventually(COLLECT_WAIT, "drop's credentials collected", || async {
        secrets
            .get_opt("drop-credentials")
            .await
            .ok()
            .filter(Option::is_none)
    })
    .await;
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
    env.create("keep", spec.clone()).await;
    wait_running(&env, "keep").await;
    env.databases()
        .delete("keep", &DeleteParams::default())
        .await
        .expect("delete accepted");
    eventually(WAIT, "Database gone", || async {
        env.databases()
            .get_opt("keep")
            .await
            .ok()
            .filter(Option::is_none)
    })
    .await;
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
    env.create("keep", spec).await;
    let again = wait_running(&env, "keep").await;
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

#[tokio::test]
async fn growing_storage_resizes_claims_and_keeps_the_pods() {
    let env = Env::start(Options::full()).await;
    env.create(
        "big",
        json!({"engine": "mysql", "version": "8.4", "storage": "10Gi", "replicas": 2}),
    )
    .await;
    wait_running(&env, "big").await;
    let pods: Api<Pod> = env.api();
    let selector = ListParams::default().labels("app.kubernetes.io/instance=big");
    let mut before: Vec<String> = pods
        .list(&selector)
        .await
        .expect("pods")
        .items
        .iter()
        .map(ResourceExt::uid)
        .map(Option::unwrap_or_default)
        .collect();
    before.sort();

    let patch = Patch::Merge(json!({"spec": {"storage": "20Gi"}}));
    env.databases()
        .patch("big", &PatchParams::default(), &patch)
        .await
        .expect("storage grown");

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
    wait_running(&env, "big").await;
    let mut after: Vec<String> = pods
        .list(&selector)
        .await
        .expect("pods")
        .items
        .iter()
        .map(ResourceExt::uid)
        .map(Option::unwrap_or_default)
        .collect();
    after.sort();
    assert_eq!(
        before, after,
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
    env.create(
        "fixed",
        json!({"engine": "postgres", "version": "16", "storage": "10Gi"}),
    )
    .await;
    wait_running(&env, "fixed").await;

    let grow = Patch::Merge(json!({"spec": {"storage": "20Gi"}}));
    env.databases()
        .patch("fixed", &PatchParams::default(), &grow)
        .await
        .expect("spec changed");
    let degraded = eventually(WAIT, "Degraded condition", || async {
        let status = env.databases().get("fixed").await.ok()?.status?;
        database_api::conditions::find(&status.conditions, "Degraded")
            .filter(|c| c.status == "True")
            .cloned()
    })
    .await;
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
