//! Backups and restores: each `DatabaseBackup` becomes a Job that dumps its Database
//! with the engine's own tool into the backup agent, which stores the dump compressed
//! in a bucket or on a volume ([`reconcile`]); a Database's schedule makes them and
//! its retention deletes old ones ([`schedule`]); a new Database with
//! `spec.restoreFrom` is filled from a dump by a restore Job before it goes Running
//! ([`restore`]).

pub mod dump;
pub mod job;
pub mod outcome;
pub mod reconcile;
pub mod restore;
pub mod schedule;

use database_api::Engine;
use database_api::backup::BackupDestination;

/// The finalizer that deletes a backup's dump with it.
pub const FINALIZER: &str = "databasebackups.mycompany.io/finalizer";

/// Longest Job name: its Pods add `-<5 characters>` and a Pod name's label value must
/// stay within 63.
const MAX_JOB_NAME: usize = 57;

/// The key a backup's dump is stored under: `<prefix><namespace>/<database>/<backup>.<ext>`.
pub fn key(
    destination: &BackupDestination,
    namespace: &str,
    database: &str,
    backup: &str,
    engine: Engine,
) -> String {
    let prefix = destination
        .s3
        .as_ref()
        .map(|s3| s3.prefix.as_str())
        .or(destination.volume.as_ref().map(|v| v.prefix.as_str()))
        .unwrap_or_default();
    let separator = if prefix.is_empty() || prefix.ends_with('/') {
        ""
    } else {
        "/"
    };
    format!(
        "{prefix}{separator}{namespace}/{database}/{backup}.{}",
        dump::extension(engine)
    )
}

/// A Job name from `base` and a `suffix` (`-backup`, `-delete`, `-restore`),
/// shortened with a hash of the whole when it would be too long.
pub fn job_name(base: &str, suffix: &str) -> String {
    let whole = format!("{base}{suffix}");
    if whole.len() <= MAX_JOB_NAME {
        return whole;
    }
    let hash = fnv1a(whole.as_bytes());
    let keep = MAX_JOB_NAME - suffix.len() - 9;
    let head: String = base.chars().take(keep).collect();
    format!("{}-{hash:08x}{suffix}", head.trim_end_matches('-'))
}

/// A short, stable hash (FNV-1a, 32 bits): the same name always gives the same Job.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, b| {
        (hash ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

#[cfg(test)]
mod tests {
    use database_api::backup::{S3Destination, VolumeDestination};

    use super::*;

    fn s3(prefix: &str) -> BackupDestination {
        BackupDestination {
            s3: Some(S3Destination {
                endpoint: "https://s3.example.com".into(),
                bucket: "backups".into(),
                prefix: prefix.into(),
                region: None,
                credentials_secret: "keys".into(),
                ca: None,
            }),
            volume: None,
        }
    }

    #[test]
    fn keys_sit_under_the_prefix_namespace_and_database() {
        assert_eq!(
            key(&s3(""), "shop", "orders", "orders-1", Engine::Postgres),
            "shop/orders/orders-1.sql.gz"
        );
        assert_eq!(
            key(&s3("prod"), "shop", "orders", "orders-1", Engine::Mongodb),
            "prod/shop/orders/orders-1.archive.gz"
        );
        let volume = BackupDestination {
            s3: None,
            volume: Some(VolumeDestination {
                claim_name: "dumps".into(),
                prefix: "db/".into(),
            }),
        };
        assert_eq!(
            key(&volume, "shop", "orders", "orders-1", Engine::Mysql),
            "db/shop/orders/orders-1.sql.gz"
        );
    }

    #[test]
    fn long_job_names_are_shortened_stably_and_stay_distinct() {
        assert_eq!(job_name("orders-1", "-backup"), "orders-1-backup");
        let long = "a".repeat(52) + "-20261205-0300";
        let name = job_name(&long, "-backup");
        assert!(name.len() <= MAX_JOB_NAME, "{name}");
        assert!(name.ends_with("-backup"));
        assert_eq!(name, job_name(&long, "-backup"), "stable");
        let other = "a".repeat(52) + "-20261205-0400";
        assert_ne!(name, job_name(&other, "-backup"), "distinct");
    }
}
