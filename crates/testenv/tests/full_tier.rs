//! The full tier: a StatefulSet with a volumeClaimTemplate gets scheduled Pods that become
//! Ready and claims that bind (and volumes that go with their claims), with no kubelet
//! and no storage driver.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use testenv::toolkit::Wait;
use testenv::{ControlPlane, Options};

#[tokio::test]
async fn a_statefulset_becomes_ready_with_bound_volumes() {
    let plane = ControlPlane::start(Options::full())
        .await
        .expect("full control plane starts");
    let client = plane.client().await.expect("client");
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    sets.create(&PostParams::default(), &web())
        .await
        .expect("created");

    let ready = Wait::new("3 Pods ready", Duration::from_secs(120))
        .every(Duration::from_millis(250))
        .poll(|| async {
            let current = sets.get("web").await.expect("get");
            let ready = current.status.and_then(|s| s.ready_replicas).unwrap_or(0);
            if ready == 3 { Ok(()) } else { Err(ready) }
        })
        .await;
    // The components' logs say why Pods or volumes did not come.
    assert!(
        ready.is_ok(),
        "only {}/3 ready; kcm log:\n{}\nkwok log:\n{}",
        ready.err().unwrap_or_default(),
        plane
            .log_tail("kube-controller-manager", 20)
            .unwrap_or_default(),
        plane.log_tail("kwok", 20).unwrap_or_default()
    );

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let listed = claims.list(&ListParams::default()).await.expect("claims");
    let mut bound: Vec<(String, String)> = listed
        .items
        .iter()
        .map(|c| {
            let phase = c
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default();
            (c.metadata.name.clone().unwrap_or_default(), phase)
        })
        .collect();
    bound.sort();
    assert_eq!(
        bound,
        [
            ("data-web-0", "Bound"),
            ("data-web-1", "Bound"),
            ("data-web-2", "Bound")
        ]
        .map(|(n, p)| (n.to_owned(), p.to_owned()))
    );

    a_deleted_claim_takes_its_volume(&client, &sets, &claims).await;
}

/// StatefulSet `web`: three Pods, each with a 1Gi claim of the default class.
fn web() -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 3,
            "serviceName": "web",
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "registry.invalid/web:1",
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]},
            },
            "volumeClaimTemplates": [{
                "metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            }],
        },
    }))
    .expect("StatefulSet")
}

/// Each claim has a volume of its own, bound to it; a claim deleted (once no Pod uses it)
/// takes its volume with it, by the class's Delete reclaim policy.
async fn a_deleted_claim_takes_its_volume(
    client: &kube::Client,
    sets: &Api<StatefulSet>,
    claims: &Api<PersistentVolumeClaim>,
) {
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let claim = claims.get("data-web-0").await.expect("claim data-web-0");
    let volume_name = claim
        .spec
        .and_then(|s| s.volume_name)
        .expect("data-web-0 names its volume");
    let volume = volumes.get(&volume_name).await.expect("the volume exists");
    assert_eq!(
        volume
            .spec
            .and_then(|s| s.claim_ref)
            .and_then(|r| r.name)
            .as_deref(),
        Some("data-web-0")
    );
    sets.delete("web", &DeleteParams::default())
        .await
        .expect("StatefulSet deleted");
    claims
        .delete("data-web-0", &DeleteParams::default())
        .await
        .expect("claim deleted");
    Wait::new(
        format!("volume {volume_name} to go with its claim"),
        Duration::from_secs(60),
    )
    .every(Duration::from_millis(250))
    .until(|| async {
        volumes
            .get_opt(&volume_name)
            .await
            .expect("volume read")
            .is_none()
    })
    .await;
}
