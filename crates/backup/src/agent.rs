//! What the agent does in a Job: its destination from the environment, and the report
//! it leaves for the controller in the container's termination message.

use database_api::backup::agent::last_lines;
use std::path::{Path, PathBuf};
use std::time::Duration;

use database_api::backup::agent as env;
pub use database_api::backup::agent::Report;

use crate::s3::{Bucket, BucketConfig, Credentials};
use crate::store::Store;

/// The store the environment names: a bucket (`BACKUP_S3_*`) or a volume
/// (`BACKUP_VOLUME`).
pub fn store_from_env(var: impl Fn(&str) -> Option<String>) -> Result<Store, String> {
    if let Some(root) = var(env::VOLUME) {
        return Ok(Store::Volume(PathBuf::from(root)));
    }
    let required = |name: &str| var(name).ok_or_else(|| format!("{name} is not set"));
    let ca_pem = match var(env::S3_CA_FILE) {
        Some(path) => Some(
            std::fs::read(&path)
                .map_err(|err| format!("the CA file {path} is unreadable: {err}"))?,
        ),
        None => None,
    };
    let bucket = Bucket::new(BucketConfig {
        endpoint: required(env::S3_ENDPOINT)?,
        bucket: required(env::S3_BUCKET)?,
        region: var(env::S3_REGION).unwrap_or_else(|| database_api::backup::DEFAULT_REGION.into()),
        credentials: Credentials {
            access_key_id: required(env::S3_ACCESS_KEY_ID)?,
            secret_access_key: required(env::S3_SECRET_ACCESS_KEY)?,
        },
        ca_pem,
    })
    .map_err(|err| err.to_string())?;
    Ok(Store::S3(Box::new(bucket)))
}

/// The producer's verdict once its output ended: the exit status it wrote to
/// `status` (and its last error lines, in `status` + `.err`), waited for up to
/// `patience`.
pub async fn verdict(status: &Path, patience: Duration) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + patience;
    loop {
        if let Ok(code) = tokio::fs::read_to_string(status).await
            && !code.trim().is_empty()
        {
            let code = code.trim();
            if code == "0" {
                return Ok(());
            }
            let errors = tokio::fs::read_to_string(status.with_extension("err"))
                .await
                .unwrap_or_default();
            let errors = last_lines(&errors, 5);
            return Err(if errors.is_empty() {
                format!("the dump command exited with status {code}")
            } else {
                format!("the dump command exited with status {code}: {errors}")
            });
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(format!(
                "the dump command's output ended but it reported no exit status within {}s",
                patience.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_zero_status_is_success_and_another_carries_the_errors() {
        let dir = tempfile::tempdir().expect("a directory");
        let status = dir.path().join("status");
        std::fs::write(&status, "0\n").expect("written");
        assert_eq!(verdict(&status, Duration::from_secs(1)).await, Ok(()));
        std::fs::write(&status, "1\n").expect("written");
        std::fs::write(
            dir.path().join("status.err"),
            "pg_dump: error: connection to server failed\npg_dump: detail: password authentication failed\n",
        )
        .expect("written");
        let failed = verdict(&status, Duration::from_secs(1))
            .await
            .expect_err("failed");
        assert!(
            failed.contains("status 1") && failed.contains("password authentication failed"),
            "{failed}"
        );
    }

    #[tokio::test]
    async fn no_status_in_time_is_a_failure() {
        let dir = tempfile::tempdir().expect("a directory");
        let failed = verdict(&dir.path().join("status"), Duration::from_millis(300))
            .await
            .expect_err("no status");
        assert!(failed.contains("no exit status"), "{failed}");
    }

    #[test]
    fn the_environment_names_a_volume_or_a_bucket() {
        let volume = store_from_env(|name| (name == env::VOLUME).then(|| "/backup".to_owned()));
        assert!(matches!(volume, Ok(Store::Volume(root)) if root == Path::new("/backup")));
        let incomplete = store_from_env(|name| {
            (name == env::S3_ENDPOINT).then(|| "https://s3.example.com".to_owned())
        })
        .expect_err("no bucket");
        assert_eq!(incomplete, format!("{} is not set", env::S3_BUCKET));
    }
}
