//! Why a control plane, or a part of the cluster the tests set up, could not start or
//! be reached.

use std::time::Duration;

use crate::assets;

/// Set to a kubeconfig's path, this makes every control plane a test asks for the
/// cluster it names (a kind cluster in hosted CI, for example): the same test code runs
/// there with the cluster's own nodes, storage and the images it pulls. What only a
/// local control plane has (its audit log, its processes, client certificates from its
/// CA) is refused with [`Error::Unsupported`].
pub const ATTACH_ENV: &str = "TESTENV_KUBECONFIG";

/// Why the control plane could not start or be reached.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    BinaryNotFound(#[from] assets::NotFound),
    #[error("creating certificates: {0}")]
    Certificates(#[from] rcgen::Error),
    #[error("preparing the control plane: {0}")]
    Io(#[from] std::io::Error),
    #[error("{component} exited with {status} while starting; last log lines:\n{log}")]
    Exited {
        component: String,
        status: String,
        log: String,
    },
    #[error("{what} not ready after {timeout:?}; last log lines:\n{log}")]
    NotReady {
        what: String,
        timeout: Duration,
        log: String,
    },
    #[error("reading the kubeconfig: {0}")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    #[error("talking to the API server: {0}")]
    Kube(#[from] kube::Error),
    #[error("starting the real node: {0}")]
    Node(#[from] crate::real::NodeError),
    #[error(
        "{0} needs the local control plane, and this run is attached to an existing cluster ({ATTACH_ENV})"
    )]
    Unsupported(String),
}
