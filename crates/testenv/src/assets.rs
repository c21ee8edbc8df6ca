//! Where the control-plane binaries come from, and the versions they are pinned to.
//!
//! Lookup order for each binary: `$KUBEBUILDER_ASSETS/<name>`, then the per-user cache
//! that `cargo xtask control-plane build` writes (keyed by the pinned versions, so a
//! second run builds nothing).

use std::path::{Path, PathBuf};

/// Kubernetes release the control plane is built from; k8s-openapi's `v1_36` matches it.
// renovate: datasource=go depName=k8s.io/kubernetes
pub const KUBERNETES_VERSION: &str = "v1.36.3";
/// etcd server release.
// renovate: datasource=go depName=go.etcd.io/etcd/server/v3
pub const ETCD_VERSION: &str = "v3.6.16";
/// kwok release (fake nodes, Pod readiness and volume binding).
// renovate: datasource=go depName=sigs.k8s.io/kwok
pub const KWOK_VERSION: &str = "v0.8.0";
/// CoreDNS release (cluster DNS of the real tier).
// renovate: datasource=go depName=github.com/coredns/coredns
pub const COREDNS_VERSION: &str = "v1.14.7";
/// versitygw release: the S3-compatible object store backups are tested against.
// renovate: datasource=go depName=github.com/versity/versitygw
pub const VERSITYGW_VERSION: &str = "v1.8.0";

/// Binaries of the integration tier.
pub const CORE_BINARIES: [&str; 3] = ["etcd", "kube-apiserver", "kubectl"];
/// Binaries only the full tier needs.
pub const FULL_BINARIES: [&str; 3] = ["kube-controller-manager", "kube-scheduler", "kwok"];
/// Binaries only the real tier needs (besides containerd, runc and the CNI plugins,
/// which come from the system's packages), and the object store backups go to.
pub const REAL_BINARIES: [&str; 4] = ["kubelet", "kube-proxy", "coredns", "versitygw"];
/// Stage definitions for kwok, assembled at build time from the kwok module.
pub const KWOK_STAGES_FILE: &str = "kwok-stages.yaml";

/// The per-user cache root:
/// `${DATABASE_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/database-operator}`.
pub fn cache_root() -> PathBuf {
    std::env::var_os("DATABASE_OPERATOR_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("database-operator"))
        })
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/database-operator"))
        })
        .unwrap_or_else(|| std::env::temp_dir().join("database-operator-cache"))
}

/// The cache folder for this exact set of versions: `<cache root>/control-plane/<key>`.
pub fn cache_dir() -> PathBuf {
    cache_root().join("control-plane").join(format!(
        "k8s-{KUBERNETES_VERSION}_etcd-{ETCD_VERSION}_kwok-{KWOK_VERSION}"
    ))
}

/// The folder the built binaries live in.
pub fn cache_bin_dir() -> PathBuf {
    cache_dir().join("bin")
}

/// Finds one binary or explains where it was looked for.
pub fn find(name: &str) -> Result<PathBuf, NotFound> {
    let mut searched = Vec::new();
    if let Some(dir) = std::env::var_os("KUBEBUILDER_ASSETS") {
        let candidate = Path::new(&dir).join(name);
        if candidate.is_file() {
            return Ok(candidate);
        }
        searched.push(candidate);
    }
    let candidate = cache_bin_dir().join(name);
    if candidate.is_file() {
        return Ok(candidate);
    }
    searched.push(candidate);
    Err(NotFound {
        name: name.to_owned(),
        searched,
    })
}

/// A binary was in none of the places searched.
#[derive(Debug, thiserror::Error)]
#[error(
    "{name} not found (looked at {searched:?}); run `cargo xtask control-plane build` \
     or set KUBEBUILDER_ASSETS to a folder holding it"
)]
pub struct NotFound {
    name: String,
    searched: Vec<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_dir_is_keyed_by_every_pinned_version() {
        let dir = cache_dir().display().to_string();
        for version in [KUBERNETES_VERSION, ETCD_VERSION, KWOK_VERSION] {
            assert!(dir.contains(version), "{dir} lacks {version}");
        }
    }

    #[test]
    fn missing_binary_names_itself_and_the_fix() {
        let err = find("no-such-binary-for-testenv").expect_err("not installed");
        let message = err.to_string();
        assert!(message.contains("no-such-binary-for-testenv"), "{message}");
        assert!(
            message.contains("cargo xtask control-plane build"),
            "{message}"
        );
    }
}
