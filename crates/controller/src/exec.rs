//! Commands run in a database instance's container through the API server and the
//! kubelet, as `kubectl exec` runs them: how the controller asks an engine its role and
//! position, promotes a replica and re-points the others. No network path from the
//! controller to the databases is needed, only `pods/exec` on the API server, and each
//! command is the engine's own client in the official image.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use tokio::io::AsyncReadExt as _;

use crate::keys::CONTAINER;

/// How long one command may take before it counts as failed, unless told otherwise.
const TIMEOUT: Duration = Duration::from_secs(20);

/// A command that did not run to a successful end.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("running a command in Pod {pod} failed: {message}")]
    Transport { pod: String, message: String },
    #[error("a command in Pod {pod} failed: {stderr}")]
    Failed { pod: String, stderr: String },
    #[error("a command in Pod {pod} took longer than {} seconds", .limit.as_secs())]
    TimedOut { pod: String, limit: Duration },
}

/// Runs `command` in the database container of `pod` and returns its standard output.
pub async fn run(pods: &Api<Pod>, pod: &str, command: &[&str]) -> Result<String, ExecError> {
    run_within(pods, pod, command, TIMEOUT).await
}

/// [`run`], failing once `limit` has passed.
pub async fn run_within(
    pods: &Api<Pod>,
    pod: &str,
    command: &[&str],
    limit: Duration,
) -> Result<String, ExecError> {
    match tokio::time::timeout(limit, run_unbounded(pods, pod, command)).await {
        Ok(result) => result,
        Err(_) => Err(ExecError::TimedOut {
            pod: pod.to_owned(),
            limit,
        }),
    }
}

async fn run_unbounded(pods: &Api<Pod>, pod: &str, command: &[&str]) -> Result<String, ExecError> {
    let transport = |err: &dyn std::fmt::Display| ExecError::Transport {
        pod: pod.to_owned(),
        message: err.to_string(),
    };
    let params = AttachParams::default()
        .container(CONTAINER)
        .stdin(false)
        .stdout(true)
        .stderr(true);
    let mut process = pods
        .exec(pod, command.iter().copied(), &params)
        .await
        .map_err(|e| transport(&operator_runtime::errors::api_message(&e)))?;
    let status = process.take_status();
    let (mut stdout, mut stderr) = (String::new(), String::new());
    let out = process.stdout();
    let err = process.stderr();
    let read_out = async {
        if let Some(mut out) = out {
            let _ = out.read_to_string(&mut stdout).await;
        }
    };
    let read_err = async {
        if let Some(mut err) = err {
            let _ = err.read_to_string(&mut stderr).await;
        }
    };
    tokio::join!(read_out, read_err);
    let status = match status {
        Some(status) => status.await,
        None => None,
    };
    process.join().await.map_err(|e| transport(&e))?;
    match status {
        Some(s) if s.status.as_deref() == Some("Success") => Ok(stdout),
        Some(s) => Err(ExecError::Failed {
            pod: pod.to_owned(),
            stderr: first_line(if stderr.trim().is_empty() {
                s.message.as_deref().unwrap_or_default()
            } else {
                &stderr
            }),
        }),
        None => Ok(stdout),
    }
}

/// The first non-empty line, so an error reads as one sentence.
fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no output")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reads_as_its_first_line() {
        assert_eq!(
            first_line("\n  ERROR: relation missing\nDETAIL: x\n"),
            "ERROR: relation missing"
        );
        assert_eq!(first_line(""), "no output");
    }
}
