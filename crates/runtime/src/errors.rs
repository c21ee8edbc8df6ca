//! API errors as a reader sees them: the API server's own sentence, never a debug dump
//! of the response, and the questions a caller asks of an error (is it "not found", a
//! conflict) answered by kube-core's own status checks rather than by status codes.

/// The API server's own message for a refused request (`StatefulSet.apps "orders" is
/// invalid: ...`), or the client's description of what went wrong on the way.
pub fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => {
            let code = if status.code > 0 {
                format!(" (HTTP {})", status.code)
            } else {
                String::new()
            };
            format!("{}{code}", status.message.trim_end_matches('.'))
        }
        kube::Error::Api(status) => format!(
            "the API server refused the request with HTTP {}",
            status.code
        ),
        kube::Error::Service(cause) => format!(
            "the request to the API server failed on the way: {}",
            with_causes(cause.as_ref())
        ),
        kube::Error::HyperError(cause) => format!(
            "the connection to the API server failed: {}",
            with_causes(cause)
        ),
        kube::Error::SerdeError(cause) => {
            format!("the API server's answer could not be read: {cause}")
        }
        other => with_causes(other),
    }
}

/// `error` followed by each of its causes not already in the text: the client's own
/// message ("client error (SendRequest)") says little without the cause under it
/// ("connection closed before message completed").
fn with_causes(error: &(dyn std::error::Error + 'static)) -> String {
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

/// A failed watch, as a sentence with the API server's message.
pub fn watch_message(error: &kube::runtime::watcher::Error) -> String {
    use kube::runtime::watcher::Error as Watch;
    match error {
        Watch::InitialListFailed(e) => format!("listing failed: {}", api_message(e)),
        Watch::WatchStartFailed(e) => format!("starting the watch failed: {}", api_message(e)),
        Watch::WatchError(status) => format!("the API server ended the watch: {}", status.message),
        Watch::WatchFailed(e) => format!("the watch stream failed: {}", api_message(e)),
        Watch::NoResourceVersion => error.to_string(),
    }
}

/// The object asked for does not exist (HTTP 404).
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_not_found())
}

/// The write lost a race: the object changed since it was read (HTTP 409, Conflict).
pub fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_conflict())
}

/// A create found the object there already (HTTP 409, AlreadyExists).
pub fn is_already_exists(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_already_exists())
}

/// A delete whose object is already gone counts as done.
pub fn ignore_not_found<T>(result: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(error) if is_not_found(&error) => Ok(None),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    fn refused(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(Status {
            code,
            message: message.to_owned(),
            reason: reason.to_owned(),
            ..Status::default()
        }))
    }

    #[test]
    fn a_refusal_reads_as_the_servers_sentence_with_its_code() {
        let text = api_message(&refused(
            422,
            "Invalid",
            "StatefulSet.apps \"a\" is invalid.",
        ));
        assert_eq!(text, "StatefulSet.apps \"a\" is invalid (HTTP 422)");
        let bare = api_message(&refused(500, "", ""));
        assert_eq!(bare, "the API server refused the request with HTTP 500");
    }

    #[derive(Debug, thiserror::Error)]
    #[error("client error (SendRequest)")]
    struct SendRequest(#[source] std::io::Error);

    #[test]
    fn a_failure_on_the_way_reads_as_a_sentence_with_its_cause() {
        let closed = std::io::Error::other("connection closed before message completed");
        let text = api_message(&kube::Error::Service(Box::new(SendRequest(closed))));
        assert_eq!(
            text,
            "the request to the API server failed on the way: client error (SendRequest): \
             connection closed before message completed"
        );
        assert!(!text.contains("ServiceError"), "{text}");
    }

    #[test]
    fn not_found_conflict_and_already_exists_are_told_apart_by_reason() {
        assert!(is_not_found(&refused(404, "NotFound", "gone")));
        assert!(!is_not_found(&refused(409, "Conflict", "raced")));
        assert!(is_conflict(&refused(409, "Conflict", "raced")));
        assert!(!is_conflict(&refused(409, "AlreadyExists", "there")));
        assert!(is_already_exists(&refused(409, "AlreadyExists", "there")));
        assert!(!is_conflict(&refused(404, "NotFound", "gone")));
        assert!(matches!(
            ignore_not_found::<()>(Err(refused(404, "NotFound", "gone"))),
            Ok(None)
        ));
        assert!(ignore_not_found::<()>(Err(refused(403, "Forbidden", "no"))).is_err());
    }
}
