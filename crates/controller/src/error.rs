//! Typed errors of a reconcile, named for the action that failed. Each one reads as a
//! sentence a user can act on: what failed, on which object, and the API server's own
//! message (never a debug dump of the response).

use crate::resources::credentials::{MissingKey, RandomUnavailable};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Reading {kind} {name} failed: {}", api_message(.source))]
    Observe {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("Applying {kind} {name} failed: {}", api_message(.source))]
    Apply {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("Deleting {kind} {name} failed: {}", api_message(.source))]
    Delete {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("Creating the Secret {name} failed: {}", api_message(.source))]
    CreateSecret {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("Generating credentials failed: {0}")]
    GenerateCredentials(#[from] RandomUnavailable),
    #[error("The {0}; restore the Secret or delete it to have new credentials generated")]
    BrokenCredentials(#[from] MissingKey),
    #[error("Adding the finalizer failed: {}", api_message(.0))]
    AddFinalizer(#[source] kube::Error),
    #[error("Removing the finalizer failed: {}", api_message(.0))]
    RemoveFinalizer(#[source] kube::Error),
    #[error("Marking where the Database's data lives failed: {}", api_message(.0))]
    MarkDataLayout(#[source] kube::Error),
    #[error("Writing the status failed: {}", api_message(.0))]
    PatchStatus(#[source] kube::Error),
    #[error("Resizing volume claim {name} failed: {}", api_message(.source))]
    ResizeClaim {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "{kind} {name} already exists and is not controlled by this Database; the operator does not write it"
    )]
    NotControlled { kind: String, name: String },
    #[error("{0}")]
    Replication(#[from] crate::exec::ExecError),
    #[error("The Database has no namespace")]
    MissingNamespace,
    #[error("The reconcile panicked: {0}")]
    Panicked(String),
    #[error("Serializing {0} failed: {1}")]
    Serialize(&'static str, #[source] serde_json::Error),
}

impl Error {
    /// A short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Observe { .. } => "observe",
            Error::Apply { .. } => "apply",
            Error::Delete { .. } => "delete",
            Error::CreateSecret { .. } | Error::GenerateCredentials(_) => "credentials",
            Error::BrokenCredentials(_) => "broken_credentials",
            Error::AddFinalizer(_) | Error::RemoveFinalizer(_) => "finalizer",
            Error::PatchStatus(_) => "status",
            Error::MarkDataLayout(_) => "layout",
            Error::ResizeClaim { .. } => "resize",
            Error::MissingNamespace => "namespace",
            Error::NotControlled { .. } => "conflict",
            Error::Replication(_) => "replication",
            Error::Serialize(..) => "serialize",
            Error::Panicked(_) => "panic",
        }
    }
}

pub use operator_runtime::errors::api_message;

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn refused(code: u16, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            message: message.to_owned(),
            reason: "Invalid".to_owned(),
            ..Status::default()
        }))
    }

    #[test]
    fn an_api_refusal_reads_as_one_sentence_with_the_servers_message() {
        let error = Error::Apply {
            kind: "StatefulSet".into(),
            name: "victim".into(),
            source: refused(
                422,
                "StatefulSet.apps \"victim\" is invalid: spec: Forbidden: updates to statefulset spec for fields other than 'replicas' are forbidden",
            ),
        };
        let text = error.to_string();
        assert!(
            text.starts_with(
                "Applying StatefulSet victim failed: StatefulSet.apps \"victim\" is invalid"
            ),
            "{text}"
        );
        assert!(text.ends_with("(HTTP 422)"), "{text}");
        for debug_residue in ["Status {", "Some(", "ApiError", "code:"] {
            assert!(!text.contains(debug_residue), "{text}");
        }
    }
}
