//! containerd for the real node: its own root, state and socket under the node's folder,
//! runc from the system's packages, and the CNI configuration of `network`.

use std::path::{Path, PathBuf};

use super::host::{CommandFailed, run};
use crate::images::PAUSE_IMAGE;

/// The socket the kubelet and `ctr` talk to.
pub fn socket(dir: &Path) -> PathBuf {
    dir.join("containerd.sock")
}

/// containerd's configuration (version 2, as containerd 1.6 reads it): runtime state
/// under `dir`, images in `store`.
pub fn config(dir: &Path, store: &Path, cni_bin: &Path, cni_conf: &Path) -> String {
    format!(
        r#"version = 2
root = "{root}"
state = "{state}"
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # The test machines lack CAP_SYS_RESOURCE: a negative oom_score_adj is refused.
  restrict_oom_score_adj = true
  # Pod network namespaces under the node's folder, so a sweep finds them.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"
"#,
        root = store.display(),
        state = dir.join("state").display(),
        socket = socket(dir).display(),
        cni_bin = cni_bin.display(),
        cni_conf = cni_conf.display(),
    )
}

fn ctr(dir: &Path, args: &[&str]) -> Result<String, CommandFailed> {
    let address = socket(dir).display().to_string();
    let mut all = vec!["--address", &address, "-n", "k8s.io"];
    all.extend_from_slice(args);
    run("ctr", &all)
}

/// Imports the OCI archive of image `id` into the namespace the kubelet uses, unless
/// the store already holds this very archive (its fingerprint is recorded beside it).
pub fn import_once(
    dir: &Path,
    store: &Path,
    id: &str,
    archive: &Path,
) -> Result<(), CommandFailed> {
    let fingerprint =
        std::fs::read_to_string(archive.with_file_name("fingerprint")).unwrap_or_default();
    let record = store.join(format!("imported-{id}"));
    if !fingerprint.is_empty()
        && std::fs::read_to_string(&record).unwrap_or_default() == fingerprint
    {
        return Ok(());
    }
    ctr(dir, &["images", "import", &archive.display().to_string()])?;
    let _ = std::fs::write(record, fingerprint);
    Ok(())
}

/// Removes the containers a previous node left in the image store's metadata (their
/// processes are gone; the kubelet would otherwise find them as orphans).
pub fn remove_old_containers(dir: &Path) {
    let Ok(list) = ctr(dir, &["containers", "list", "--quiet"]) else {
        return;
    };
    let ids: Vec<&str> = list.lines().filter(|l| !l.is_empty()).collect();
    if !ids.is_empty() {
        let mut args = vec!["containers", "delete"];
        args.extend(ids);
        if let Err(err) = ctr(dir, &args) {
            tracing::debug!(error = %err, "removing old containers failed");
        }
    }
}

/// Where the CNI plugins are: `CNI_PATH`, or Debian's `/usr/lib/cni`.
pub fn cni_bin_dir() -> PathBuf {
    std::env::var_os("CNI_PATH").map_or_else(|| PathBuf::from("/usr/lib/cni"), PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_keeps_runtime_state_under_the_node_folder() {
        let text = config(
            Path::new("/n/containerd"),
            Path::new("/n/containerd/root"),
            Path::new("/usr/lib/cni"),
            Path::new("/n/cni"),
        );
        assert!(text.contains("root = \"/n/containerd/root\""), "{text}");
        assert!(text.contains("state = \"/n/containerd/state\""), "{text}");
        assert!(
            text.contains("address = \"/n/containerd/containerd.sock\""),
            "{text}"
        );
        assert!(text.contains("restrict_oom_score_adj = true"), "{text}");
        assert!(
            text.contains(&format!("sandbox_image = \"{PAUSE_IMAGE}\"")),
            "{text}"
        );
    }
}
