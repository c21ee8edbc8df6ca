//! Volumes that behave like cloud disks: each claim of the default `testenv-disk`
//! StorageClass gets its own ext4 filesystem (an image file on a loop device, with
//! `lost+found` at its root), offered to the node as a `local` PersistentVolume; a
//! released volume is unmounted and its file deleted.
//!
//! Growing a mounted ext4 filesystem needs CAP_SYS_RESOURCE, which the test machines do
//! not grant, so these disks grow the way a CSI driver without online expansion does: the
//! disk grows at once and the claim says `FileSystemResizePending`; the filesystem grows
//! once no Pod uses the volume, and a Pod that starts meanwhile waits for it (its volume's
//! path is missing until then), then sees the new size.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt as _;
use kube::runtime::watcher::{self, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::host::{CommandFailed, run};
use super::kubelet::NODE_NAME;

/// The default StorageClass of the real tier.
pub const STORAGE_CLASS: &str = "testenv-disk";
/// The provisioner named on the class and the volumes.
pub const PROVISIONER: &str = "disk.testenv.local";
/// Claims handled at the same time.
const WORKERS: usize = 4;

/// The StorageClass: expandable, reclaimed on release, bound at once (one node).
pub fn storage_class() -> Value {
    json!({
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": STORAGE_CLASS,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": true,
    })
}

/// Why a disk step failed.
#[derive(Debug, thiserror::Error)]
pub enum DiskError {
    #[error(transparent)]
    Command(#[from] CommandFailed),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Api(#[from] kube::Error),
    #[error("claim {0} asks for no readable size")]
    Size(String),
}

/// One disk operation at a time: events for one claim may arrive together, and the
/// filesystem growth must not race a new mount.
type DiskLock = std::sync::Arc<tokio::sync::Mutex<()>>;

/// Makes `dir` a private mount of its own, so disk mounts can be moved within it
/// whatever the propagation of the filesystem above it (systemd makes `/` shared).
pub fn prepare_dir(dir: &Path) -> Result<(), DiskError> {
    std::fs::create_dir_all(dir)?;
    let path = dir.display().to_string();
    run("mount", &["--bind", &path, &path])?;
    run("mount", &["--make-private", &path])?;
    Ok(())
}

/// Watches claims and volumes until aborted, keeping disks under `dir`.
pub fn spawn(client: Client, dir: PathBuf) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let lock = DiskLock::default();
        let claims = watch_claims(client.clone(), dir.clone(), lock.clone());
        let volumes = watch_volumes(client.clone(), dir.clone(), lock.clone());
        let pending = grow_pending(client, dir, lock);
        futures::join!(claims, volumes, pending);
    })
}

async fn watch_claims(client: Client, dir: PathBuf, lock: DiskLock) {
    let api: Api<PersistentVolumeClaim> = Api::all(client.clone());
    watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .for_each_concurrent(WORKERS, |claim| {
            let client = client.clone();
            let dir = dir.clone();
            let lock = lock.clone();
            async move {
                let Ok(claim) = claim else { return };
                let _one_at_a_time = lock.lock().await;
                let result = if needs_volume(&claim) {
                    provision(&client, &dir, &claim).await
                } else if let Some(size) = needs_growth(&client, &claim).await {
                    grow(&client, &dir, &claim, size).await
                } else {
                    Ok(())
                };
                if let Err(err) = result {
                    tracing::warn!(claim = %claim.name_any(), error = %err, "disk step failed");
                }
            }
        })
        .await;
}

async fn watch_volumes(client: Client, dir: PathBuf, lock: DiskLock) {
    let api: Api<PersistentVolume> = Api::all(client.clone());
    watcher(api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .for_each_concurrent(WORKERS, |volume| {
            let client = client.clone();
            let dir = dir.clone();
            let lock = lock.clone();
            async move {
                let Ok(volume) = volume else { return };
                let _one_at_a_time = lock.lock().await;
                if is_released(&volume)
                    && let Err(err) = release(&client, &dir, &volume.name_any()).await
                {
                    tracing::warn!(volume = %volume.name_any(), error = %err, "releasing a disk failed");
                }
            }
        })
        .await;
}

fn class_of(claim: &PersistentVolumeClaim) -> Option<&str> {
    claim.spec.as_ref()?.storage_class_name.as_deref()
}

fn needs_volume(claim: &PersistentVolumeClaim) -> bool {
    class_of(claim) == Some(STORAGE_CLASS)
        && claim.metadata.deletion_timestamp.is_none()
        && claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.as_ref())
            .is_none()
}

fn is_released(volume: &PersistentVolume) -> bool {
    volume
        .annotations()
        .get("pv.kubernetes.io/provisioned-by")
        .map(String::as_str)
        == Some(PROVISIONER)
        && volume.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Released")
}

fn requested(claim: &PersistentVolumeClaim) -> Option<u64> {
    let quantity = claim
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")?;
    bytes(&quantity.0)
}

/// Bytes in a storage quantity such as `10Gi`, `512Mi` or `1000000`.
pub fn bytes(quantity: &str) -> Option<u64> {
    let split = quantity
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(quantity.len());
    let (number, unit) = quantity.split_at(split);
    let number: u64 = number.parse().ok()?;
    let factor: u64 = match unit {
        "" => 1,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => return None,
    };
    number.checked_mul(factor)
}

fn image_file(dir: &Path, volume: &str) -> PathBuf {
    dir.join(format!("{volume}.img"))
}

fn mount_point(dir: &Path, volume: &str) -> PathBuf {
    dir.join(volume)
}

/// Runs blocking host commands off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, DiskError> + Send + 'static,
) -> Result<T, DiskError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| DiskError::Io(std::io::Error::other(e.to_string())))?
}

/// Makes the filesystem, mounts it and offers it as a volume bound to `claim`.
async fn provision(
    client: &Client,
    dir: &Path,
    claim: &PersistentVolumeClaim,
) -> Result<(), DiskError> {
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let name = format!("pvc-{}", claim.uid().unwrap_or_default());
    if volumes.get_opt(&name).await?.is_some() {
        return Ok(());
    }
    let size = requested(claim).ok_or_else(|| DiskError::Size(claim.name_any()))?;
    let (image, mount) = (image_file(dir, &name), mount_point(dir, &name));
    blocking(move || make_disk(&image, &mount, size)).await?;
    let volume: PersistentVolume =
        serde_json::from_value(build_volume(claim, &name, &mount_point(dir, &name)))
            .map_err(|e| DiskError::Api(kube::Error::SerdeError(e)))?;
    match volumes.create(&PostParams::default(), &volume).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(()),
        Err(err) => Err(err.into()),
    }
}

fn make_disk(image: &Path, mount: &Path, size: u64) -> Result<(), DiskError> {
    if super::sweep::mounts_under(mount).is_empty() {
        let file = std::fs::File::create(image)?;
        file.set_len(size)?;
        drop(file);
        let image_arg = image.display().to_string();
        run(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=1,lazy_journal_init=1",
                &image_arg,
            ],
        )?;
        std::fs::create_dir_all(mount)?;
        run(
            "mount",
            &["-o", "loop", &image_arg, &mount.display().to_string()],
        )?;
    }
    Ok(())
}

/// A `local` volume on the node, pre-bound to `claim`.
fn build_volume(claim: &PersistentVolumeClaim, name: &str, path: &Path) -> Value {
    let spec = claim.spec.clone().unwrap_or_default();
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
            "volumeMode": "Filesystem",
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "name": claim.name_any(),
                "namespace": claim.namespace(),
                "uid": claim.uid(),
            },
            "local": {"path": path, "fsType": "ext4"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_NAME]},
            ]}]}},
        },
    })
}

/// The new size when `claim` is bound to one of these disks and asks for more than the
/// volume has.
async fn needs_growth(client: &Client, claim: &PersistentVolumeClaim) -> Option<u64> {
    if class_of(claim) != Some(STORAGE_CLASS) || claim.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let volume_name = claim.spec.as_ref()?.volume_name.as_ref()?;
    let wanted = requested(claim)?;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let volume = volumes.get_opt(volume_name).await.ok()??;
    let has = volume
        .spec
        .as_ref()?
        .capacity
        .as_ref()?
        .get("storage")
        .and_then(|q| bytes(&q.0))?;
    let status = claim
        .status
        .as_ref()
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
        .and_then(|q| bytes(&q.0));
    (wanted > has || status.is_some_and(|s| s < wanted)).then_some(wanted)
}

/// Grows the image file and the loop device, and records the new size on the volume; the
/// claim says `FileSystemResizePending` until [`grow_pending`] grows the filesystem.
async fn grow(
    client: &Client,
    dir: &Path,
    claim: &PersistentVolumeClaim,
    size: u64,
) -> Result<(), DiskError> {
    let Some(volume) = claim.spec.as_ref().and_then(|s| s.volume_name.clone()) else {
        return Ok(());
    };
    let (image, mount, pending) = (
        image_file(dir, &volume),
        mount_point(dir, &volume),
        pending_file(dir, &volume),
    );
    blocking(move || grow_disk(&image, &mount, size, &pending)).await?;
    let quantity = requested_quantity(claim);
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    volumes
        .patch(
            &volume,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"capacity": {"storage": quantity}}})),
        )
        .await?;
    let now = now();
    patch_claim_status(
        client,
        claim,
        json!({
            "allocatedResources": {"storage": quantity},
            "conditions": [{
                "type": "FileSystemResizePending",
                "status": "True",
                "lastTransitionTime": now,
                "message": "Waiting for no Pod to use the volume to grow its filesystem (these disks grow offline).",
            }],
        }),
    )
    .await
}

fn requested_quantity(claim: &PersistentVolumeClaim) -> String {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_default()
}

async fn patch_claim_status(
    client: &Client,
    claim: &PersistentVolumeClaim,
    status: Value,
) -> Result<(), DiskError> {
    let claims: Api<PersistentVolumeClaim> =
        Api::namespaced(client.clone(), &claim.namespace().unwrap_or_default());
    claims
        .patch_status(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await?;
    Ok(())
}

/// The current time as the API server writes it (`2026-01-02T03:04:05Z`).
fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn pending_file(dir: &Path, volume: &str) -> PathBuf {
    dir.join(format!("{volume}.grow"))
}

/// Where a disk's mount is held while its filesystem waits to grow: away from the path
/// the volume names, so no new Pod mounts it before then.
fn held_point(mount: &Path) -> PathBuf {
    mount.with_extension("held")
}

fn grow_disk(image: &Path, mount: &Path, size: u64, pending: &Path) -> Result<(), DiskError> {
    let file = std::fs::OpenOptions::new().write(true).open(image)?;
    if file.metadata()?.len() < size {
        file.set_len(size)?;
    }
    drop(file);
    if let Some(device) = loop_device(image)? {
        run("losetup", &["-c", &device])?;
    }
    let held = held_point(mount);
    if !super::sweep::mounts_under(mount).is_empty() {
        std::fs::create_dir_all(&held)?;
        run(
            "mount",
            &[
                "--move",
                &mount.display().to_string(),
                &held.display().to_string(),
            ],
        )?;
        std::fs::remove_dir(mount)?;
    }
    std::fs::write(pending, size.to_string())?;
    Ok(())
}

/// The loop device backing `image`, if it is attached.
fn loop_device(image: &Path) -> Result<Option<String>, DiskError> {
    let listing = run("losetup", &["-j", &image.display().to_string()])?;
    Ok(listing
        .split(':')
        .next()
        .filter(|d| d.starts_with("/dev/"))
        .map(str::to_owned))
}

/// How many mounts in this mount namespace show `device` (the disk's own mount, and the
/// kubelet's bind mount for each Pod using it).
fn mounts_of(device: &str) -> usize {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            line.split_once(" - ")
                .map(|(_, tail)| tail.split(' ').nth(1) == Some(device))
        })
        .filter(|same| *same)
        .count()
}

/// Every two seconds, grows the filesystems whose disks grew, once no Pod uses them.
async fn grow_pending(client: Client, dir: PathBuf, lock: DiskLock) {
    let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let Ok(list) = claims.list(&ListParams::default()).await else {
            continue;
        };
        for claim in list
            .items
            .iter()
            .filter(|c| class_of(c) == Some(STORAGE_CLASS))
        {
            let Some(volume) = claim.spec.as_ref().and_then(|s| s.volume_name.clone()) else {
                continue;
            };
            if !pending_file(&dir, &volume).exists() {
                continue;
            }
            let _one_at_a_time = lock.lock().await;
            let (image, mount, pending) = (
                image_file(&dir, &volume),
                mount_point(&dir, &volume),
                pending_file(&dir, &volume),
            );
            match blocking(move || grow_filesystem_if_unused(&image, &mount, &pending)).await {
                Ok(true) => {
                    let quantity = requested_quantity(claim);
                    let status = json!({"capacity": {"storage": quantity}, "conditions": null});
                    if let Err(err) = patch_claim_status(&client, claim, status).await {
                        tracing::warn!(claim = %claim.name_any(), error = %err, "recording the grown size failed");
                    }
                }
                Ok(false) => {}
                Err(err) => {
                    tracing::warn!(claim = %claim.name_any(), error = %err, "growing a filesystem failed");
                }
            }
        }
    }
}

/// Unmounts an unused disk, grows its filesystem offline and mounts it again where the
/// volume's path names it.
fn grow_filesystem_if_unused(
    image: &Path,
    mount: &Path,
    pending: &Path,
) -> Result<bool, DiskError> {
    let Some(device) = loop_device(image)? else {
        return Ok(false);
    };
    if mounts_of(&device) > 1 {
        return Ok(false);
    }
    let held = held_point(mount);
    let (image_arg, mount_arg) = (image.display().to_string(), mount.display().to_string());
    if super::sweep::mounts_under(&held).is_empty() {
        // Mounted where Pods find it; move it out of their way first.
        run(
            "mount",
            &["--move", &mount_arg, &held.display().to_string()],
        )?;
        std::fs::remove_dir(mount)?;
    }
    run("umount", &[&held.display().to_string()])?;
    std::fs::remove_dir(&held)?;
    let checked = run("e2fsck", &["-f", "-p", &image_arg]).map(|_| ());
    let grown = checked.and_then(|()| run("resize2fs", &[&image_arg]).map(|_| ()));
    let staging = mount.with_extension("mounting");
    std::fs::create_dir_all(&staging)?;
    run(
        "mount",
        &["-o", "loop", &image_arg, &staging.display().to_string()],
    )?;
    std::fs::create_dir_all(mount)?;
    run(
        "mount",
        &["--move", &staging.display().to_string(), &mount_arg],
    )?;
    let _ = std::fs::remove_dir(&staging);
    grown?;
    std::fs::remove_file(pending)?;
    Ok(true)
}

/// Unmounts and deletes a released disk, then its volume.
async fn release(client: &Client, dir: &Path, volume: &str) -> Result<(), DiskError> {
    let (image, mount) = (image_file(dir, volume), mount_point(dir, volume));
    blocking(move || {
        // The kubelet unmounts its own bind mounts once the last Pod is gone.
        for _ in 0..30 {
            if super::sweep::unmount_all(&mount).is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        let _ = std::fs::remove_dir(&mount);
        let _ = std::fs::remove_file(&image);
        Ok(())
    })
    .await?;
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    match volumes.delete(volume, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(err) => Err(err.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_quantities_are_read_in_bytes() {
        assert_eq!(bytes("10Gi"), Some(10 << 30));
        assert_eq!(bytes("512Mi"), Some(512 << 20));
        assert_eq!(bytes("1000"), Some(1000));
        assert_eq!(bytes("2G"), Some(2_000_000_000));
        assert_eq!(bytes("1.5Gi"), None);
        assert_eq!(bytes("Gi"), None);
    }

    #[test]
    fn the_volume_is_local_to_the_node_and_pre_bound_to_its_claim() {
        let claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data-orders-0", "namespace": "shop", "uid": "u-1"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
                "storageClassName": STORAGE_CLASS,
            },
        }))
        .expect("claim");
        assert!(needs_volume(&claim));
        let volume = build_volume(&claim, "pvc-u-1", Path::new("/n/disks/pvc-u-1"));
        assert_eq!(volume["spec"]["local"]["path"], "/n/disks/pvc-u-1");
        assert_eq!(volume["spec"]["claimRef"]["uid"], "u-1");
        assert_eq!(
            volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"]
                [0]["values"][0],
            NODE_NAME
        );
        let volume: PersistentVolume = serde_json::from_value(volume).expect("a valid volume");
        assert_eq!(
            volume.spec.and_then(|s| s.storage_class_name).as_deref(),
            Some(STORAGE_CLASS)
        );
    }
}
