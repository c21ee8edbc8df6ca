//! The full tier's volume provisioner for the `kwok-volume` StorageClass: a
//! PersistentVolume for each new claim, bound to it, and deleted after it.
//!
//! It makes the same writes as kwok's volume stages, but for many claims at once, as a
//! CSI provisioner does with its worker pool. kwok plays stages of kinds other than Pods
//! and Nodes one object at a time, which capped a burst of 500 StatefulSets at about
//! seven bound claims a second: the cluster's speed, not the operator's, set the pace.

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

/// Name of the full tier's default StorageClass, whose claims this provisions.
pub const STORAGE_CLASS: &str = "kwok-volume";

/// The provisioner named on the volumes (kwok's, so nothing else changes).
const PROVISIONER: &str = "kwok.x-k8s.io/volume";
/// Claims handled at the same time.
const WORKERS: usize = 16;
/// kwok stage names this provisioner replaces.
pub const REPLACED_STAGES: [&str; 4] = ["pvc-provision", "pv-bind", "pvc-delete", "pv-delete"];

/// Watches claims until aborted.
pub fn spawn(client: Client) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
        let events = watcher(claims, watcher::Config::default()).default_backoff();
        events
            .for_each_concurrent(WORKERS, |event| {
                let client = client.clone();
                async move {
                    let result = match event {
                        Ok(watcher::Event::Apply(claim) | watcher::Event::InitApply(claim))
                            if needs_volume(&claim) =>
                        {
                            provision(&client, &claim).await
                        }
                        Ok(watcher::Event::Delete(claim)) if is_ours(&claim) => {
                            release(&client, &claim).await
                        }
                        // The watcher retries with backoff; the error is only news.
                        Err(err) => {
                            tracing::debug!(error = %err, "claim watch failed; retrying");
                            Ok(())
                        }
                        Ok(_) => Ok(()),
                    };
                    if let Err(err) = result {
                        tracing::warn!(error = %err, "volume provisioning step failed");
                    }
                }
            })
            .await;
    })
}

fn is_ours(claim: &PersistentVolumeClaim) -> bool {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.as_deref())
        == Some(STORAGE_CLASS)
}

fn needs_volume(claim: &PersistentVolumeClaim) -> bool {
    is_ours(claim)
        && claim.metadata.deletion_timestamp.is_none()
        && claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_ref())
            .is_none()
}

fn volume_name(claim: &PersistentVolumeClaim) -> String {
    format!("pvc-{}", claim.uid().unwrap_or_default())
}

/// The volume for `claim`, already pointing at it.
fn build_volume(claim: &PersistentVolumeClaim) -> Value {
    let spec = claim.spec.clone().unwrap_or_default();
    let name = volume_name(claim);
    json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": name,
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
        },
        "spec": {
            "accessModes": spec.access_modes,
            "capacity": spec.resources.and_then(|r| r.requests),
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": STORAGE_CLASS,
            "volumeMode": spec.volume_mode.unwrap_or_else(|| "Filesystem".to_owned()),
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "name": claim.name_any(),
                "namespace": claim.namespace(),
                "resourceVersion": claim.resource_version(),
                "uid": claim.uid(),
            },
            "hostPath": {"path": format!("/tmp/kwok-local-path-provisioner/{name}"), "type": "DirectoryOrCreate"},
        },
    })
}

/// Creates the volume, binds the claim to it and marks both Bound.
async fn provision(client: &Client, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> =
        Api::namespaced(client.clone(), &claim.namespace().unwrap_or_default());
    let name = volume_name(claim);
    let volume: PersistentVolume =
        serde_json::from_value(build_volume(claim)).map_err(kube::Error::SerdeError)?;
    match volumes.create(&PostParams::default(), &volume).await {
        Ok(_) => {}
        // Another event for the same claim got there first.
        Err(kube::Error::Api(status)) if status.is_already_exists() => {}
        Err(err) => return Err(err),
    }
    let merge = PatchParams::default();
    let bind = json!({
        "metadata": {"annotations": {
            "pv.kubernetes.io/bind-completed": "yes",
            "pv.kubernetes.io/bound-by-controller": "yes",
            "volume.beta.kubernetes.io/storage-provisioner": PROVISIONER,
            "volume.kubernetes.io/storage-provisioner": PROVISIONER,
        }},
        "spec": {"volumeName": name},
    });
    claims
        .patch(&claim.name_any(), &merge, &Patch::Merge(&bind))
        .await?;
    let spec = claim.spec.clone().unwrap_or_default();
    let bound = json!({"status": {
        "phase": "Bound",
        "accessModes": spec.access_modes,
        "capacity": spec.resources.and_then(|r| r.requests),
    }});
    claims
        .patch_status(&claim.name_any(), &merge, &Patch::Merge(&bound))
        .await?;
    volumes
        .patch_status(
            &name,
            &merge,
            &Patch::Merge(json!({"status": {"phase": "Bound"}})),
        )
        .await?;
    Ok(())
}

/// The claim is gone: its volume is released and, by its Delete policy, deleted.
async fn release(client: &Client, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
    let Some(name) = claim.spec.as_ref().and_then(|s| s.volume_name.clone()) else {
        return Ok(());
    };
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let released = json!({"status": {"phase": "Released"}});
    match volumes
        .patch_status(&name, &PatchParams::default(), &Patch::Merge(&released))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.is_not_found() => return Ok(()),
        Err(err) => return Err(err),
    }
    match volumes.delete(&name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(err) => Err(err),
    }
}

/// kwok's stage file without the stages this provisioner replaces.
pub fn without_replaced_stages(stages: &str) -> String {
    stages
        .split("\n---\n")
        .filter(|document| {
            !REPLACED_STAGES
                .iter()
                .any(|name| document.contains(&format!("\n  name: {name}\n")))
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn volume_stages_are_dropped_and_the_others_kept() {
        let stages = "---\nkind: Stage\nmetadata:\n  name: pod-ready\nspec: {}\n\
                      ---\nkind: Stage\nmetadata:\n  name: pvc-provision\nspec: {}\n\
                      ---\nkind: Stage\nmetadata:\n  name: pv-delete\nspec: {}\n\
                      ---\nkind: Stage\nmetadata:\n  name: node-initialize\nspec: {}\n";
        let kept = without_replaced_stages(stages);
        assert!(kept.contains("name: pod-ready"), "{kept}");
        assert!(kept.contains("name: node-initialize"), "{kept}");
        assert!(!kept.contains("pvc-provision"), "{kept}");
        assert!(!kept.contains("pv-delete"), "{kept}");
    }

    #[test]
    fn the_volume_points_at_its_claim_with_the_requested_size() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data-orders-0", "namespace": "shop", "uid": "u-1", "resourceVersion": "42"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}},
                "storageClassName": "kwok-volume",
            },
        }))
        .expect("claim");
        assert!(needs_volume(&claim));
        let volume = build_volume(&claim);
        assert_eq!(volume["metadata"]["name"], "pvc-u-1");
        assert_eq!(volume["spec"]["capacity"]["storage"], "10Gi");
        assert_eq!(volume["spec"]["claimRef"]["name"], "data-orders-0");
        assert_eq!(volume["spec"]["claimRef"]["uid"], "u-1");
        assert_eq!(volume["spec"]["claimRef"]["resourceVersion"], "42");
        let volume: PersistentVolume = serde_json::from_value(volume).expect("a valid volume");
        assert_eq!(
            volume.spec.and_then(|s| s.storage_class_name).as_deref(),
            Some(STORAGE_CLASS)
        );
    }
}
