//! What became of a backup, restore or deletion Job, read from the Job's conditions and
//! its Pod's containers: the agent's report on success, and on failure the clearest
//! reason there is (the agent's, the engine tool's own error, then the Job's).

use database_api::backup::agent::Report;
use database_api::backup::agent::last_lines;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::job::{AGENT, ENGINE};

/// Where a Job is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobOutcome {
    Running,
    Succeeded(Report),
    Failed(String),
    /// A container cannot start and never will without a change (a Secret's key is
    /// missing, an image name is invalid): the Job is stopped and reported as failed.
    Stuck(String),
}

/// Waiting reasons no retry gets past.
const STUCK: [&str; 2] = ["CreateContainerConfigError", "InvalidImageName"];

/// The outcome of `job`, given the Pods it made.
pub fn of(job: &Job, pods: &[Pod]) -> JobOutcome {
    let conditions = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .unwrap_or_default();
    let holds = |type_: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
    };
    let statuses: Vec<&ContainerStatus> = pods
        .iter()
        .filter_map(|p| p.status.as_ref())
        .flat_map(|s| {
            s.container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten())
        })
        .collect();
    let message_of = |name: &str| {
        statuses
            .iter()
            .filter(|s| s.name == name)
            .find_map(|s| s.state.as_ref()?.terminated.as_ref()?.message.clone())
            .map(|m| m.trim().to_owned())
            .filter(|m| !m.is_empty())
    };
    let report = message_of(AGENT).and_then(|m| serde_json::from_str::<Report>(&m).ok());
    if holds("Complete").is_some() {
        return JobOutcome::Succeeded(report.unwrap_or_default());
    }
    if let Some(failed) = holds("Failed") {
        let reason = report
            .and_then(|r| r.error)
            .or_else(|| message_of(ENGINE).map(|m| last_lines(&m, 5)))
            .unwrap_or_else(|| {
                failed
                    .message
                    .clone()
                    .unwrap_or_else(|| "the Job failed".to_owned())
            });
        return JobOutcome::Failed(reason);
    }
    let stuck = statuses.iter().find_map(|s| {
        let waiting = s.state.as_ref()?.waiting.as_ref()?;
        STUCK
            .contains(&waiting.reason.as_deref()?)
            .then(|| waiting.message.clone().unwrap_or_default())
    });
    match stuck {
        Some(message) => JobOutcome::Stuck(message),
        None => JobOutcome::Running,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job(condition: Option<(&str, &str)>) -> Job {
        serde_json::from_value(json!({
            "metadata": {"name": "orders-1-backup"},
            "status": {"conditions": condition.map(|(type_, message)| vec![json!({
                "type": type_, "status": "True", "message": message,
            })])},
        }))
        .expect("a Job")
    }

    fn pod(containers: &[(&str, serde_json::Value)]) -> Pod {
        let statuses: Vec<_> = containers
            .iter()
            .map(|(name, state)| {
                json!({"name": name, "state": state, "ready": false,
                "restartCount": 0, "image": "x", "imageID": ""})
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "orders-1-backup-abcde"},
            "status": {"containerStatuses": statuses},
        }))
        .expect("a Pod")
    }

    fn terminated(message: &str) -> serde_json::Value {
        json!({"terminated": {"exitCode": 0, "message": message}})
    }

    #[test]
    fn a_complete_job_reports_what_the_agent_stored() {
        let report = r#"{"location":"s3://backups/shop/orders/orders-1.sql.gz","storedBytes":1234,"sourceBytes":5678}"#;
        let outcome = of(
            &job(Some(("Complete", ""))),
            &[pod(&[
                (AGENT, terminated(report)),
                (ENGINE, terminated("")),
            ])],
        );
        let JobOutcome::Succeeded(report) = outcome else {
            panic!("{outcome:?}");
        };
        assert_eq!(report.stored_bytes, Some(1234));
        assert_eq!(
            report.location.as_deref(),
            Some("s3://backups/shop/orders/orders-1.sql.gz")
        );
    }

    #[test]
    fn a_failure_says_why_in_the_clearest_words_there_are() {
        let agent_error = r#"{"error":"the store refused to start the upload of s3://missing/x: NoSuchBucket (The specified bucket does not exist, HTTP 404)"}"#;
        let by_agent = of(
            &job(Some((
                "Failed",
                "Job has reached the specified backoff limit",
            ))),
            &[pod(&[(AGENT, terminated(agent_error))])],
        );
        assert!(
            matches!(&by_agent, JobOutcome::Failed(why) if why.contains("NoSuchBucket")),
            "{by_agent:?}"
        );
        let by_engine = of(
            &job(Some((
                "Failed",
                "Job has reached the specified backoff limit",
            ))),
            &[pod(&[(
                ENGINE,
                terminated("psql:/stream/dump:12: ERROR:  relation \"orders\" already exists\n"),
            )])],
        );
        assert!(
            matches!(&by_engine, JobOutcome::Failed(why) if why.contains("already exists")),
            "{by_engine:?}"
        );
        let by_job = of(
            &job(Some((
                "Failed",
                "Job was active longer than specified deadline",
            ))),
            &[],
        );
        assert_eq!(
            by_job,
            JobOutcome::Failed("Job was active longer than specified deadline".into())
        );
    }

    #[test]
    fn a_container_that_cannot_start_is_stuck_and_others_are_running() {
        let waiting = json!({"waiting": {"reason": "CreateContainerConfigError",
            "message": "couldn't find key access-key-id in Secret shop/backup-keys"}});
        assert_eq!(
            of(&job(None), &[pod(&[(AGENT, waiting)])]),
            JobOutcome::Stuck("couldn't find key access-key-id in Secret shop/backup-keys".into())
        );
        let pulling = json!({"waiting": {"reason": "ContainerCreating"}});
        assert_eq!(
            of(&job(None), &[pod(&[(AGENT, pulling)])]),
            JobOutcome::Running
        );
    }
}
