//! `logs NAME [--instance POD] [-f] [--tail N]`: the database container's log of the
//! primary, or of another instance, streamed through the API server as it arrives.

use std::io::Write as _;

use database_api::Database;
use futures::AsyncReadExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, LogParams};

use crate::cluster::Target;
use crate::connect::CONTAINER;
use crate::database;
use crate::error::Error;
use crate::instances;

/// Which Pod's log to read: the named instance, else the primary. A named Pod must be
/// one the status reports or one named as the Database's StatefulSet names its Pods
/// (whose log is most wanted while it is being created, before the status lists it).
pub fn pod_of<'a>(db: &'a Database, instance: Option<&'a str>) -> Result<&'a str, String> {
    match instance {
        Some(pod) if instances::is_reported(db, pod) || instances::is_pod_name_of(db, pod) => {
            Ok(pod)
        }
        Some(pod) => Err(format!(
            "{pod} is not an instance of {} (instances: {})",
            db.name_any(),
            instances::listing(db)
        )),
        None => instances::primary(db).map_err(|reason| {
            format!(
                "{reason}; name an instance with --instance {}-0",
                db.name_any()
            )
        }),
    }
}

/// What to ask the API server for.
pub fn params(follow: bool, tail: Option<i64>) -> LogParams {
    LogParams {
        container: Some(CONTAINER.to_owned()),
        follow,
        tail_lines: tail,
        ..LogParams::default()
    }
}

/// Copies the log to standard output until it ends (or, with `follow`, until the
/// container stops or the user interrupts).
pub async fn run(
    target: &Target,
    name: &str,
    instance: Option<&str>,
    follow: bool,
    tail: Option<i64>,
) -> Result<(), Error> {
    let db = database::get(target, name).await?;
    let pod = pod_of(&db, instance).map_err(|reason| Error::NoInstance {
        action: format!("reading the log of {name}"),
        reason,
    })?;
    let pods: Api<Pod> = Api::namespaced(target.client.clone(), &target.namespace);
    let mut log = pods
        .log_stream(pod, &params(follow, tail))
        .await
        .map_err(|source| Error::ReadLog {
            pod: pod.to_owned(),
            source,
        })?;
    let mut buffer = vec![0_u8; 16 * 1024];
    loop {
        let read = log
            .read(&mut buffer)
            .await
            .map_err(|source| Error::StreamLog {
                pod: pod.to_owned(),
                source,
            })?;
        if read == 0 {
            return Ok(());
        }
        let mut out = std::io::stdout();
        match out.write_all(&buffer[..read]).and_then(|()| out.flush()) {
            Ok(()) => {}
            // The reader went away (`| head`): nothing more to print.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(Error::WriteOutput(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instances::fixtures::{database, replicated};
    use serde_json::json;

    #[test]
    fn the_primary_by_default_or_the_named_instance() {
        let db = replicated();
        assert_eq!(pod_of(&db, None), Ok("orders-0"));
        assert_eq!(pod_of(&db, Some("orders-1")), Ok("orders-1"));
    }

    #[test]
    fn a_pod_of_the_statefulset_not_reported_yet_may_be_named() {
        let creating = database(&json!({"phase": "Creating"}));
        assert_eq!(pod_of(&creating, Some("orders-2")), Ok("orders-2"));
    }

    #[test]
    fn another_pod_is_refused_with_the_instances_named() {
        assert_eq!(
            pod_of(&replicated(), Some("users-0")),
            Err("users-0 is not an instance of orders (instances: orders-0, orders-1)".to_owned())
        );
    }

    #[test]
    fn without_a_primary_the_error_says_to_name_an_instance() {
        let creating = database(&json!({"phase": "Creating"}));
        let error = pod_of(&creating, None).unwrap_err();
        assert!(
            error.starts_with("orders has no primary yet (phase Creating)"),
            "{error}"
        );
        assert!(
            error.ends_with("; name an instance with --instance orders-0"),
            "{error}"
        );
    }

    #[test]
    fn the_database_container_is_read_with_follow_and_tail_as_asked() {
        let p = params(true, Some(20));
        assert_eq!(p.container.as_deref(), Some("database"));
        assert!(p.follow);
        assert_eq!(p.tail_lines, Some(20));
        let p = params(false, None);
        assert!(!p.follow);
        assert_eq!(p.tail_lines, None);
    }
}
