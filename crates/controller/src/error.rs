//! Typed errors of a reconcile, named for the action that failed.

use crate::resources::credentials::{MissingKey, RandomUnavailable};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {kind} {name}: {source}")]
    Observe {
        kind: String,
        name: String,
        source: kube::Error,
    },
    #[error("applying {kind} {name}: {source}")]
    Apply {
        kind: String,
        name: String,
        source: kube::Error,
    },
    #[error("deleting {kind} {name}: {source}")]
    Delete {
        kind: String,
        name: String,
        source: kube::Error,
    },
    #[error("creating the credentials Secret: {0}")]
    CreateCredentials(#[source] kube::Error),
    #[error(transparent)]
    GenerateCredentials(#[from] RandomUnavailable),
    #[error("{0}; restore the Secret or delete it to have new credentials generated")]
    BrokenCredentials(#[from] MissingKey),
    #[error("adding the finalizer: {0}")]
    AddFinalizer(#[source] kube::Error),
    #[error("removing the finalizer: {0}")]
    RemoveFinalizer(#[source] kube::Error),
    #[error("patching status: {0}")]
    PatchStatus(#[source] kube::Error),
    #[error("resizing volume claim {name}: {source}")]
    ResizeClaim { name: String, source: kube::Error },
    #[error("Database has no namespace")]
    MissingNamespace,
    #[error("reconcile panicked: {0}")]
    Panicked(String),
    #[error("serializing {0}: {1}")]
    Serialize(&'static str, #[source] serde_json::Error),
}

impl Error {
    /// A short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Observe { .. } => "observe",
            Error::Apply { .. } => "apply",
            Error::Delete { .. } => "delete",
            Error::CreateCredentials(_) | Error::GenerateCredentials(_) => "credentials",
            Error::BrokenCredentials(_) => "broken_credentials",
            Error::AddFinalizer(_) | Error::RemoveFinalizer(_) => "finalizer",
            Error::PatchStatus(_) => "status",
            Error::ResizeClaim { .. } => "resize",
            Error::MissingNamespace => "namespace",
            Error::Serialize(..) => "serialize",
            Error::Panicked(_) => "panic",
        }
    }
}
