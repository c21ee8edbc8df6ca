//! What can go wrong, each as the sentence the user reads after `kubectl database: `:
//! what failed, then why, in the API server's own words where it gave some.

use std::path::PathBuf;

/// A command that could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading the kubeconfig: {}", kubeconfig_message(.0))]
    Kubeconfig(#[source] kube::config::KubeconfigError),
    #[error(
        "finding the cluster: no kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config), \
         and no in-cluster configuration either: {0}"
    )]
    InCluster(#[source] kube::config::InClusterError),
    #[error("making an API client: {0}")]
    Client(#[source] kube::Error),
    #[error("no Database {name} in namespace {namespace}")]
    DatabaseNotFound { name: String, namespace: String },
    #[error("reading Database {name}: {}", api_message(.source))]
    ReadDatabase {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading the events of Database {name}: {}", api_message(.source))]
    ListEvents {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("annotating Database {name}: {}", api_message(.source))]
    Annotate {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("switchover of {database} refused: {reason}")]
    SwitchoverRefused { database: String, reason: String },
    #[error("{action}: {reason}")]
    NoInstance { action: String, reason: String },
    #[error("backup of {database} refused: {reason}")]
    BackupRefused { database: String, reason: String },
    #[error("creating DatabaseBackup {name}: {}", api_message(.source))]
    CreateBackup {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading the log of Pod {pod}: {}", api_message(.source))]
    ReadLog {
        pod: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading the log of Pod {pod}: {source}")]
    StreamLog {
        pod: String,
        #[source]
        source: std::io::Error,
    },
    #[error("writing to standard output: {0}")]
    WriteOutput(#[source] std::io::Error),
    #[error("running {}: {source} (kubectl must be on PATH)", .program.display())]
    RunKubectl {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The API server's own message for a refused request (`databases.mycompany.io
/// "orders" not found`), or the client's description of what went wrong on the way;
/// never a debug dump of the response. The operator's runtime crate has the same
/// function, but it also carries metrics and OTLP tracing that a command-line tool has
/// no use for.
pub fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => {
            format!(
                "{} (HTTP {})",
                status.message.trim_end_matches('.'),
                status.code
            )
        }
        kube::Error::Api(status) => format!(
            "the API server refused the request with HTTP {}",
            status.code
        ),
        other => with_causes(other),
    }
}

/// `error` followed by each of its causes not already in the text: the client's own
/// message ("client error (Connect)") says little without the cause under it
/// ("Connection refused").
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let message = next.to_string();
        if !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        cause = next.source();
    }
    text
}

/// A kubeconfig problem; a file that cannot be read is named plainly (kube's own
/// message quotes the path twice over).
fn kubeconfig_message(error: &kube::config::KubeconfigError) -> String {
    match error {
        kube::config::KubeconfigError::ReadConfig(source, path) => {
            format!("{}: {source}", path.display())
        }
        other => other.to_string(),
    }
}

/// Whether the API server answered 404: the object does not exist.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_not_found())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn refused(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            reason: reason.to_owned(),
            message: message.to_owned(),
            ..Status::default()
        }))
    }

    #[test]
    fn a_refusal_reads_as_the_servers_sentence_with_its_code() {
        let error = Error::Annotate {
            name: "orders".to_owned(),
            source: refused(
                403,
                "Forbidden",
                "databases.mycompany.io \"orders\" is forbidden.",
            ),
        };
        assert_eq!(
            error.to_string(),
            "annotating Database orders: databases.mycompany.io \"orders\" is forbidden (HTTP 403)"
        );
    }

    #[test]
    fn a_refusal_without_a_message_still_names_its_code() {
        assert_eq!(
            api_message(&refused(500, "", "")),
            "the API server refused the request with HTTP 500"
        );
    }

    #[test]
    fn an_unreadable_kubeconfig_is_named_by_its_path() {
        let error = Error::Kubeconfig(kube::config::KubeconfigError::ReadConfig(
            std::io::Error::from(std::io::ErrorKind::NotFound),
            PathBuf::from("/home/me/.kube/prod"),
        ));
        assert_eq!(
            error.to_string(),
            "reading the kubeconfig: /home/me/.kube/prod: entity not found"
        );
    }

    #[test]
    fn a_failure_on_the_way_names_its_causes() {
        let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let error = kube::Error::ReadEvents(refused);
        assert_eq!(api_message(&error), "Error reading events stream: refused");
    }

    #[test]
    fn only_a_404_counts_as_not_found() {
        assert!(is_not_found(&refused(404, "NotFound", "not found")));
        assert!(!is_not_found(&refused(403, "Forbidden", "forbidden")));
    }
}
