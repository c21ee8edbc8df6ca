//! Requests that must be refused: the API server's answer, with its message checked.

use std::fmt::Debug;

use kube::core::Status;

/// The Status the API server refused `result` with (`what` names the request), after
/// checking that its message contains every one of `fragments`.
pub fn refused<T: Debug>(result: Result<T, kube::Error>, what: &str, fragments: &[&str]) -> Status {
    let answer = match &result {
        Ok(accepted) => format!("accepted: {accepted:?}"),
        Err(error) => error.to_string(),
    };
    let status = match result {
        Err(kube::Error::Api(status)) => Some(*status),
        _ => None,
    };
    assert!(
        status.is_some(),
        "{what}: not the API server's refusal but {answer}"
    );
    let status = status.unwrap_or_default();
    for fragment in fragments {
        assert!(
            status.message.contains(fragment),
            "{what}: the message does not say {fragment:?}: {}",
            status.message
        );
    }
    status
}
