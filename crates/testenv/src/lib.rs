//! A real Kubernetes control plane on loopback for acceptance tests.
//!
//! [`ControlPlane::start`] runs etcd and kube-apiserver (RBAC, the default admission
//! plugins, service-account token signing) on free ports in a temporary directory and
//! writes an admin kubeconfig. [`Options::full`] adds kube-controller-manager,
//! kube-scheduler and kwok with fake nodes, so StatefulSets get Pods that become Ready,
//! and a volume provisioner, so their PersistentVolumeClaims bind.
//!
//! Everything stops when the [`ControlPlane`] is dropped, including on panic; each
//! component also gets `SIGKILL` from the kernel if the process that started it dies, so
//! nothing is left running after Ctrl-C or a crash.
//!
//! Binaries come from `$KUBEBUILDER_ASSETS` (the envtest convention) or from the cache
//! that `cargo xtask control-plane build` fills; see [`assets`].
//!
//! [`toolkit`] holds what the acceptance tests share: waits, a control plane with the
//! CRDs and a namespace, kubectl, Database fixtures and the real tier's steps.

pub mod assets;
pub mod clients;
mod control_plane;
mod crd;
mod error;
pub mod etcd;
mod full;
pub mod https;
pub mod images;
mod kubeconfig;
pub mod object_store;
mod pki;
mod ports;
pub mod process;
pub mod prometheus;
pub mod real;
pub mod scripted;
pub mod toolkit;
mod volumes;

pub use control_plane::{ControlPlane, Options, client_from};
pub use crd::install_crd;
pub use error::Error;
pub use pki::{CertifiedKey, TestCa};
pub use ports::free_port;
pub use volumes::STORAGE_CLASS;

/// A count for a fault test: the environment variable `var` when it holds a number
/// (`cargo xtask test --long` sets the longer runs), else `default`, the bounded run
/// every test command makes.
pub fn count_from_env(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}
