//! The full tier: kube-controller-manager, kube-scheduler and kwok with fake nodes, so
//! that StatefulSets get Pods that are scheduled and become Ready, and their
//! PersistentVolumeClaims bind (the provisioner in `volumes` makes a PersistentVolume for
//! each claim of the default `kwok-volume` StorageClass).

use std::path::Path;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::assets;
use crate::error::Error;
use crate::ports::free_port;
use crate::process::Process;
use crate::volumes::{self, STORAGE_CLASS};

/// Field manager for the objects the harness itself writes.
const MANAGER: &str = "testenv";

/// Starts kube-controller-manager and kube-scheduler, and kwok unless a real node runs.
pub fn spawn_components(root: &Path, kubeconfig: &Path, real: bool) -> Result<Vec<Process>, Error> {
    let kcm = assets::find("kube-controller-manager")?;
    let scheduler = assets::find("kube-scheduler")?;
    let kubeconfig = kubeconfig.display().to_string();
    let file = |name: &str| root.join(name).display().to_string();
    let delegated = |port: u16| {
        vec![
            format!("--kubeconfig={kubeconfig}"),
            format!("--authentication-kubeconfig={kubeconfig}"),
            format!("--authorization-kubeconfig={kubeconfig}"),
            "--bind-address=127.0.0.1".to_owned(),
            format!("--secure-port={port}"),
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".to_owned(),
            "--leader-elect=false".to_owned(),
        ]
    };

    let mut kcm_args = delegated(free_port()?);
    kcm_args.extend([
        format!("--root-ca-file={}", file("ca.crt")),
        format!("--service-account-private-key-file={}", file("sa.key")),
        // A real node's not-ready taint is removed by the node lifecycle controller,
        // which needs its own service account's rights.
        format!("--use-service-account-credentials={real}"),
        // React in seconds rather than the production defaults.
        "--node-monitor-grace-period=60s".to_owned(),
        "--concurrent-statefulset-syncs=10".to_owned(),
        // The default client limit (20 requests/s) makes kube-controller-manager the
        // bottleneck as soon as hundreds of StatefulSets each need a Pod and a claim.
        "--kube-api-qps=200".to_owned(),
        "--kube-api-burst=400".to_owned(),
    ]);
    let scheduler_args = delegated(free_port()?);
    let mut processes = vec![
        Process::spawn("kube-controller-manager", &kcm, &kcm_args, root)?,
        Process::spawn("kube-scheduler", &scheduler, &scheduler_args, root)?,
    ];
    if !real {
        processes.push(spawn_kwok(root, &kubeconfig)?);
    }
    Ok(processes)
}

fn spawn_kwok(root: &Path, kubeconfig: &str) -> Result<Process, Error> {
    let kwok = assets::find("kwok")?;
    // kwok's volume stages give way to the provisioner in `volumes` (a cache built
    // earlier may still hold them).
    let stages = root.join(assets::KWOK_STAGES_FILE);
    std::fs::write(
        &stages,
        volumes::without_replaced_stages(&std::fs::read_to_string(assets::find(
            assets::KWOK_STAGES_FILE,
        )?)?),
    )?;
    let args = vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--config={}", stages.display()),
        "--manage-all-nodes=true".to_owned(),
        "--node-ip=127.0.0.1".to_owned(),
        "--node-lease-duration-seconds=40".to_owned(),
    ];
    Ok(Process::spawn("kwok", &kwok, &args, root)?)
}

/// Creates the fake nodes and the default StorageClass.
pub async fn prepare_cluster(client: &Client, nodes: usize) -> Result<(), Error> {
    let params = PatchParams::apply(MANAGER).force();
    let classes: Api<StorageClass> = Api::all(client.clone());
    let class = json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "kwok.x-k8s.io/volume",
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": true,
    });
    classes
        .patch(STORAGE_CLASS, &params, &Patch::Apply(class))
        .await?;

    let api: Api<Node> = Api::all(client.clone());
    for index in 0..nodes {
        let name = format!("kwok-node-{index}");
        let node = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {
                    "type": "kwok",
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "topology.kubernetes.io/zone": format!("zone-{}", index % 3),
                },
            },
            "status": {
                "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            },
        });
        api.patch(&name, &params, &Patch::Apply(node)).await?;
    }
    Ok(())
}

/// Whether `expected` nodes report Ready.
pub async fn nodes_ready(client: &Client, expected: usize) -> bool {
    let api: Api<Node> = Api::all(client.clone());
    let Ok(list) = api.list(&ListParams::default().labels("type=kwok")).await else {
        return false;
    };
    let ready = list
        .items
        .iter()
        .filter(|node| {
            node.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .count();
    ready >= expected
}
