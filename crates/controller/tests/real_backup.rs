//! Backups and restores on real database servers and a real object store (versitygw
//! over TLS with its own CA, on the node's address): rows written, backed up, the
//! Database deleted with its volumes, a new Database restored from the backup, the rows
//! read back and counted; a backup to a missing bucket failing with its event,
//! condition and metric while the next scheduled one still runs; retention keeping
//! exactly the newest backup and deleting the others' dumps.
//!
//! postgres and mysql run real here. mongodb's dump tools (mongodump, mongorestore)
//! are served by no registry these machines reach, so its backups are not tested.

// Writing, backing up, deleting and restoring are one scenario, told in one function.
#![allow(clippy::too_many_lines)]

mod backup_store;
mod common;

use std::time::Duration;

use backup_store::{create_bucket, start_with_store};
use common::{Env, NAMESPACE};
use database_api::Database;
use database_api::backup::{BackupPhase, DatabaseBackup};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::api::{DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};
use testenv::clients::MYSQL_FROM_URI;
use testenv::object_store::ObjectStore;
use testenv::toolkit::fixtures;
use testenv::toolkit::real_tier::{REAL_WAIT, run_client, wait_running};
use testenv::toolkit::wait::eventually;

/// Rows the tests write and count back.
const ROWS: u32 = 5000;

struct Engine {
    image: &'static str,
    version: &'static str,
    name: &'static str,
    client: &'static str,
    /// Creates `orders` with ids 1..=ROWS and a text column.
    write: String,
    /// Prints `<count> <sum of ids>`.
    count: String,
}

fn postgres() -> Engine {
    Engine {
        image: "postgres-17",
        version: "17",
        name: "postgres",
        client: "postgres:17",
        write: format!(
            r#"psql "$URI" -v ON_ERROR_STOP=1 -qc "CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL); INSERT INTO orders SELECT g, 'item-' || g FROM generate_series(1, {ROWS}) g""#
        ),
        count:
            r#"psql "$URI" -v ON_ERROR_STOP=1 -tAc "SELECT count(*) || ' ' || sum(id) FROM orders""#
                .to_owned(),
    }
}

fn mysql() -> Engine {
    Engine {
        image: "mysql-9",
        version: "9.7",
        name: "mysql",
        client: "mysql:9.7",
        write: format!(
            r#"{MYSQL_FROM_URI}; sql "SET SESSION cte_max_recursion_depth = {ROWS}; CREATE TABLE orders (id int PRIMARY KEY, item varchar(32) NOT NULL); INSERT INTO orders WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {ROWS}) SELECT n, CONCAT('item-', n) FROM g""#
        ),
        count: format!(
            r#"{MYSQL_FROM_URI}; sql "SELECT CONCAT(COUNT(*), ' ', SUM(id)) FROM orders""#
        ),
    }
}

/// The node with `engine`'s image and the operator's, and an object store.
async fn start(engine: &Engine) -> (Env, ObjectStore) {
    start_with_store(&[engine.image, "operator"]).await
}

async fn create_backup(env: &Env, name: &str, database: &str, destination: &Value) {
    let backup = fixtures::database_backup(name, database, Some(destination));
    env.api::<DatabaseBackup>()
        .create(&PostParams::default(), &backup)
        .await
        .expect("backup created");
}

/// Waits until backup `name` finished and returns it.
async fn finished(env: &Env, name: &str) -> DatabaseBackup {
    eventually(REAL_WAIT, &format!("backup {name} finished"), || async {
        env.api::<DatabaseBackup>()
            .get(name)
            .await
            .ok()
            .filter(|b| {
                b.status.as_ref().is_some_and(|s| {
                    matches!(s.phase, BackupPhase::Succeeded | BackupPhase::Failed)
                })
            })
    })
    .await
}

async fn count(env: &Env, engine: &Engine, db: &str) -> String {
    let (ok, output) = run_client(env, db, engine.client, &engine.count).await;
    assert!(ok, "counting the rows failed: {output}");
    output.trim().to_owned()
}

fn condition(db: &Database, type_: &str) -> Option<(String, String, String)> {
    db.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Write, back up, delete the Database with its volumes, restore into a new one,
/// count; then delete the backup and its dump with it.
async fn backup_and_restore(engine: &Engine) {
    let (env, store) = start(engine).await;
    create_bucket(&store, "backups").await;
    env.create_database(
        "orders",
        json!({"engine": engine.name, "version": engine.version, "storage": "1Gi", "deletionPolicy": "Delete"}),
    )
    .await;
    wait_running(&env, "orders").await;
    let (ok, output) = run_client(&env, "orders", engine.client, &engine.write).await;
    assert!(ok, "writing the rows failed: {output}");
    let expected = format!("{ROWS} {}", u64::from(ROWS) * u64::from(ROWS + 1) / 2);
    assert_eq!(count(&env, engine, "orders").await, expected);

    create_backup(
        &env,
        "orders-before-move",
        "orders",
        &store.destination("backups", "dumps/"),
    )
    .await;
    let backup = finished(&env, "orders-before-move").await;
    let status = backup.status.clone().expect("a status");
    assert_eq!(status.phase, BackupPhase::Succeeded, "{:?}", status.error);
    let key = status.key.clone().expect("a key");
    assert_eq!(
        key,
        format!("dumps/{NAMESPACE}/orders/orders-before-move.sql.gz")
    );
    assert_eq!(store.keys("backups"), std::slice::from_ref(&key));
    let stored = std::fs::metadata(store.object_path("backups", &key))
        .expect("the dump")
        .len();
    assert_eq!(
        status.size_bytes,
        i64::try_from(stored).ok(),
        "the status reports the stored size"
    );
    // The Database's next pass, which the finished backup starts, sets the condition.
    eventually(REAL_WAIT, "LastBackupSucceeded on the Database", || async {
        let db = env.databases().get("orders").await.ok()?;
        let (status, reason, _) = condition(&db, "LastBackupSucceeded")?;
        (status == "True" && reason == "BackupSucceeded").then_some(())
    })
    .await;

    env.databases()
        .delete("orders", &DeleteParams::default())
        .await
        .expect("deleted");
    eventually(REAL_WAIT, "the Database and its volumes gone", || async {
        let gone = env.databases().get_opt("orders").await.ok()?.is_none();
        let claims = env
            .api::<PersistentVolumeClaim>()
            .list(&ListParams::default())
            .await
            .ok()?;
        (gone && claims.items.is_empty()).then_some(())
    })
    .await;

    env.create_database(
        "orders-restored",
        json!({"engine": engine.name, "version": engine.version, "storage": "1Gi",
               "restoreFrom": {"backup": "orders-before-move"}}),
    )
    .await;
    let restored = wait_running(&env, "orders-restored").await;
    assert_eq!(
        condition(&restored, "Restored").map(|c| (c.0, c.1)),
        Some(("True".to_owned(), "Restored".to_owned()))
    );
    assert_eq!(
        count(&env, engine, "orders-restored").await,
        expected,
        "every row came back"
    );

    env.api::<DatabaseBackup>()
        .delete("orders-before-move", &DeleteParams::default())
        .await
        .expect("backup deleted");
    eventually(REAL_WAIT, "the backup and its dump gone", || async {
        let gone = env
            .api::<DatabaseBackup>()
            .get_opt("orders-before-move")
            .await
            .ok()?
            .is_none();
        (gone && store.keys("backups").is_empty()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn postgres_rows_survive_backup_deletion_and_restore() {
    Box::pin(backup_and_restore(&postgres())).await;
}

#[tokio::test]
async fn mysql_rows_survive_backup_deletion_and_restore() {
    Box::pin(backup_and_restore(&mysql())).await;
}

/// A schedule every minute to a bucket that is missing at first: the first backup fails
/// with a Warning event, LastBackupSucceeded=False and the failure metric; the bucket is
/// made and the next ones succeed; with a retention of one, exactly the newest stays,
/// and the dumps of the others are deleted.
#[tokio::test]
async fn a_failed_scheduled_backup_is_reported_and_the_schedule_and_retention_go_on() {
    let engine = postgres();
    let (env, store) = start(&engine).await;
    env.create_database(
        "orders",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi", "backup": {
            "schedule": "* * * * *", "retention": {"count": 1},
            "destination": store.destination("nightly", "dumps/"),
        }}),
    )
    .await;
    wait_running(&env, "orders").await;

    let failed = first_backup_fails(&env).await;
    create_bucket(&store, "nightly").await;
    let first = eventually(
        Duration::from_secs(150),
        "a scheduled backup succeeded",
        || async {
            let list = env
                .api::<DatabaseBackup>()
                .list(&ListParams::default())
                .await
                .ok()?;
            list.items.into_iter().find(|b| {
                b.status
                    .as_ref()
                    .is_some_and(|s| s.phase == BackupPhase::Succeeded)
            })
        },
    )
    .await;
    let first_name = first.metadata.name.clone().expect("a name");
    let first_key = first.status.and_then(|s| s.key).expect("a key");
    retention_keeps_the_newest(&env, &store, &first_name, &first_key, &failed).await;
}

/// The first scheduled backup, to the missing bucket: failed, said so and counted.
async fn first_backup_fails(env: &Env) -> DatabaseBackup {
    let failed = eventually(
        Duration::from_secs(150),
        "a failed scheduled backup",
        || async {
            let list = env
                .api::<DatabaseBackup>()
                .list(&ListParams::default())
                .await
                .ok()?;
            list.items.into_iter().find(|b| {
                b.status
                    .as_ref()
                    .is_some_and(|s| s.phase == BackupPhase::Failed)
            })
        },
    )
    .await;
    let error = failed
        .status
        .clone()
        .and_then(|s| s.error)
        .unwrap_or_default();
    assert!(
        error.contains("NoSuchBucket") && error.contains("s3://nightly/"),
        "{error}"
    );
    let db = eventually(
        Duration::from_secs(60),
        "LastBackupSucceeded=False",
        || async {
            env.databases()
                .get("orders")
                .await
                .ok()
                .filter(|d| condition(d, "LastBackupSucceeded").is_some_and(|c| c.0 == "False"))
        },
    )
    .await;
    let (_, reason, message) = condition(&db, "LastBackupSucceeded").expect("the condition");
    assert_eq!(reason, "BackupFailed");
    assert!(message.contains("NoSuchBucket"), "{message}");
    env.events_eventually("Database", "orders", "a BackupFailed warning", |events| {
        events
            .iter()
            .any(|(type_, reason, _)| type_ == "Warning" && reason == "BackupFailed")
    })
    .await;
    assert!(
        env.metrics.encode().contains(&format!(
            "database_controller_backup_failures_total{{namespace=\"{NAMESPACE}\",database=\"orders\"}} 1"
        )),
        "the failure is counted"
    );

    failed
}

/// Once the first success and the failure are past the retention, one backup stays and
/// the bucket holds exactly its dump.
async fn retention_keeps_the_newest(
    env: &Env,
    store: &ObjectStore,
    first_name: &str,
    first_key: &str,
    failed: &DatabaseBackup,
) {
    // One more success later, the retention of one has deleted the failed backup and
    // the first success, its dump included.
    eventually(
        Duration::from_secs(300),
        "the first backups let go",
        || async {
            let api = env.api::<DatabaseBackup>();
            let first_gone = api.get_opt(first_name).await.ok()?.is_none();
            let failed_gone = api
                .get_opt(&failed.metadata.name.clone()?)
                .await
                .ok()?
                .is_none();
            (first_gone && failed_gone).then_some(())
        },
    )
    .await;
    // No more new backups; the retention still holds the ones there are to one.
    env.patch_database("orders", json!({"spec": {"backup": {"suspend": true}}}))
        .await;
    let kept = eventually(
        Duration::from_secs(180),
        "one finished backup kept",
        || async {
            let list = env
                .api::<DatabaseBackup>()
                .list(&ListParams::default())
                .await
                .ok()?;
            let finished = list.items.iter().all(|b| {
                b.status
                    .as_ref()
                    .is_some_and(|s| s.phase == BackupPhase::Succeeded)
                    && b.metadata.deletion_timestamp.is_none()
            });
            (list.items.len() == 1 && finished).then_some(list.items)
        },
    )
    .await;
    let mut keys: Vec<String> = kept
        .iter()
        .filter_map(|b| b.status.as_ref()?.key.clone())
        .collect();
    keys.sort();
    eventually(
        Duration::from_secs(60),
        "the bucket holding exactly the kept dumps",
        || async { (store.keys("nightly") == keys).then_some(()) },
    )
    .await;
    assert!(!keys.iter().any(|k| k == first_key));
    let db = env.databases().get("orders").await.expect("the Database");
    assert_eq!(
        condition(&db, "LastBackupSucceeded")
            .map(|c| c.0)
            .as_deref(),
        Some("True")
    );
}
