//! `backup NAME [--backup-name N]`: takes a backup now by creating a DatabaseBackup of
//! the Database, written to the Database's own backup destination; the operator runs it.

use database_api::Database;
use database_api::backup::{DatabaseBackup, DatabaseBackupSpec, has_destination};
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, PostParams};

use crate::cluster::Target;
use crate::database::{self, FIELD_MANAGER};
use crate::error::Error;

/// `<database>-<yyyymmddhhmmss>` in UTC: sorts by time, and tells the backup's
/// Database at a glance.
pub fn default_name(database: &str, now: Timestamp) -> String {
    format!("{database}-{}", now.strftime("%Y%m%d%H%M%S"))
}

/// Why `db` cannot be backed up by a DatabaseBackup that names no destination of its
/// own, if it cannot: the operator would fail the backup for the same reason.
pub fn refusal(db: &Database) -> Option<String> {
    (!has_destination(db)).then(|| {
        format!(
            "Database {} has no spec.backup.destination to write the dump to",
            db.name_any()
        )
    })
}

/// The DatabaseBackup `name` of Database `database`, to its destination.
pub fn build(name: &str, database: &str) -> DatabaseBackup {
    DatabaseBackup {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: DatabaseBackupSpec {
            database: database.to_owned(),
            destination: None,
        },
        status: None,
    }
}

/// Creates the backup and says how to follow it.
pub async fn run(target: &Target, name: &str, backup_name: Option<&str>) -> Result<String, Error> {
    let db = database::get(target, name).await?;
    if let Some(reason) = refusal(&db) {
        return Err(Error::BackupRefused {
            database: name.to_owned(),
            reason,
        });
    }
    let backup_name =
        backup_name.map_or_else(|| default_name(name, Timestamp::now()), str::to_owned);
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let api: Api<DatabaseBackup> = Api::namespaced(target.client.clone(), &target.namespace);
    let created = api
        .create(&params, &build(&backup_name, name))
        .await
        .map_err(|source| Error::CreateBackup {
            name: backup_name.clone(),
            source,
        })?;
    Ok(created_message(
        &created.name_any(),
        name,
        &target.namespace,
    ))
}

fn created_message(backup: &str, database: &str, namespace: &str) -> String {
    format!(
        "DatabaseBackup {backup} of Database {database} created.\n\
         Follow it with: kubectl get dbbackup {backup} -w -n {namespace}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instances::fixtures::replicated;
    use serde_json::json;

    #[test]
    fn the_default_name_is_the_database_and_the_utc_time_to_the_second() {
        let now: Timestamp = "2025-03-01T03:04:05.678Z".parse().unwrap();
        assert_eq!(default_name("orders", now), "orders-20250301030405");
    }

    #[test]
    fn the_backup_names_its_database_and_leaves_the_destination_to_it() {
        let backup = build("orders-1", "orders");
        assert_eq!(
            serde_json::to_value(&backup).unwrap(),
            json!({
                "apiVersion": "mycompany.io/v1", "kind": "DatabaseBackup",
                "metadata": {"name": "orders-1"},
                "spec": {"database": "orders"},
            })
        );
    }

    #[test]
    fn a_database_without_a_destination_is_refused() {
        let db = replicated();
        assert_eq!(
            refusal(&db).as_deref(),
            Some("Database orders has no spec.backup.destination to write the dump to")
        );
        let mut with = db;
        with.spec.backup = serde_json::from_value(json!({
            "schedule": "0 3 * * *", "destination": {"volume": {"claimName": "dumps"}},
        }))
        .unwrap();
        assert_eq!(refusal(&with), None);
    }

    #[test]
    fn the_message_says_how_to_watch_the_backup() {
        assert_eq!(
            created_message("orders-1", "orders", "shop"),
            "DatabaseBackup orders-1 of Database orders created.\n\
             Follow it with: kubectl get dbbackup orders-1 -w -n shop\n"
        );
    }
}
