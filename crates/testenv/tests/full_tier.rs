//! The full tier: a StatefulSet with a volumeClaimTemplate gets scheduled Pods that become
//! Ready and claims that bind, with no kubelet and no storage driver.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use testenv::{ControlPlane, Options};

#[tokio::test]
async fn a_statefulset_becomes_ready_with_bound_volumes() {
    let plane = ControlPlane::start(Options::full())
        .await
        .expect("full control plane starts");
    let client = plane.client().await.expect("client");
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let set = serde_json::from_value(json!({
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
    .expect("StatefulSet");
    sets.create(&PostParams::default(), &set)
        .await
        .expect("created");

    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let current = sets.get("web").await.expect("get");
        let ready = current.status.and_then(|s| s.ready_replicas).unwrap_or(0);
        if ready == 3 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {ready}/3 ready; kcm log:\n{}\nkwok log:\n{}",
            plane
                .log_tail("kube-controller-manager", 20)
                .unwrap_or_default(),
            plane.log_tail("kwok", 20).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, "default");
    let claims = claims.list(&ListParams::default()).await.expect("claims");
    let mut bound: Vec<(String, String)> = claims
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
}
