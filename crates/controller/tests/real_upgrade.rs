//! Major-version upgrades of a real postgres primary and standby by dump and restore,
//! with the backup in a real object store: a step to a version whose image the node cannot get
//! rolls back to the old version with every row, and the Database says why; then 15 to
//! 17 (a new directory under the same mount) and 17 to 18 (the image's own layout, one
//! level up) keep every row and take writes after; in between, the Database deleted
//! with its data retained and created again runs on the 17 directory.
//!
//! mysql upgrades in place after a backup: a step to a series whose image the node
//! cannot get takes the backup with the old version, then goes back to it with every
//! row. (No image of a later series can be built here, so no in-place upgrade that
//! succeeds runs on a real server.)

mod backup_store;
mod common;

use backup_store::{create_bucket, start_with_store};
use common::Env;
use database_api::backup::{BackupPhase, DatabaseBackup};
use database_api::upgrade::{UPGRADE_LABEL, UpgradePhase};
use database_api::{Database, Phase};
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};
use serde_json::json;
use testenv::clients::MYSQL_FROM_URI;
use testenv::toolkit::real_tier::{REAL_WAIT, run_client, wait_running};
use testenv::toolkit::wait::{eventually, gone};

/// Rows written before the first upgrade.
const ROWS: u32 = 5000;
/// A client new enough for every server here.
const CLIENT: &str = "postgres:18";

/// Runs `script` in a client Pod of `image`; its output, or why it failed.
async fn client(env: &Env, image: &str, script: &str) -> Result<String, String> {
    let (ok, output) = run_client(env, "orders", image, script).await;
    if ok {
        Ok(output.trim().to_owned())
    } else {
        Err(output)
    }
}

async fn sql(env: &Env, statement: &str) -> Result<String, String> {
    client(
        env,
        CLIENT,
        &format!(r#"psql "$URI" -v ON_ERROR_STOP=1 -tAc "{statement}""#),
    )
    .await
}

/// `<count> <sum of ids>` of the orders table.
async fn count(env: &Env) -> String {
    sql(env, "SELECT count(*) || ' ' || sum(id) FROM orders")
        .await
        .expect("the rows counted")
}

fn expected(rows: u32) -> String {
    format!("{rows} {}", u64::from(rows) * u64::from(rows + 1) / 2)
}

/// Adds row `id`, retrying while the server still holds writes or restarts.
async fn insert(env: &Env, id: u32) {
    eventually(REAL_WAIT, &format!("row {id} written"), || async {
        sql(
            env,
            &format!("INSERT INTO orders VALUES ({id}, 'item-{id}') ON CONFLICT DO NOTHING"),
        )
        .await
        .ok()
    })
    .await;
}

async fn set_version(env: &Env, version: &str) {
    env.patch_database("orders", json!({"spec": {"version": version}}))
        .await;
}

/// Waits until the upgrade to `version` ended in `phase`, and returns the Database.
async fn upgrade_ended(env: &Env, version: &str, phase: UpgradePhase) -> Database {
    eventually(
        REAL_WAIT * 2,
        &format!("the upgrade to {version} {phase:?}"),
        || async {
            env.databases().get("orders").await.ok().filter(|d| {
                d.status
                    .as_ref()
                    .and_then(|s| s.upgrade.as_ref())
                    .is_some_and(|u| u.to_version == version && u.phase == phase)
            })
        },
    )
    .await
}

/// The StatefulSet's image and data directory.
async fn runs(env: &Env) -> (String, Option<String>) {
    let set = env
        .api::<StatefulSet>()
        .get("orders")
        .await
        .expect("the StatefulSet");
    let container = set
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|p| p.containers.into_iter().find(|c| c.name == "database"))
        .expect("the database container");
    let pgdata = container
        .env
        .unwrap_or_default()
        .into_iter()
        .find(|e| e.name == "PGDATA")
        .and_then(|e| e.value);
    (container.image.unwrap_or_default(), pgdata)
}

/// Moves `orders` to `version`, then checks that every one of `rows` rows came
/// through, that it takes writes (one more row), and where it runs.
async fn upgrade_keeps_every_row(env: &Env, version: &str, rows: u32, directory: &str) {
    set_version(env, version).await;
    upgrade_ended(env, version, UpgradePhase::Succeeded).await;
    wait_running(env, "orders").await;
    assert_eq!(count(env).await, expected(rows), "every row in {version}");
    insert(env, rows + 1).await;
    assert_eq!(count(env).await, expected(rows + 1));
    assert_eq!(
        runs(env).await,
        (format!("postgres:{version}"), Some(directory.to_owned()))
    );
    // The standby cloned the new primary and follows it.
    eventually(REAL_WAIT, "the standby has every row", || async {
        let script = r#"psql "$RO_URI" -tAc "SELECT count(*) || ' ' || sum(id) FROM orders""#;
        let (ok, output) = run_client(env, "orders", CLIENT, script).await;
        (ok && output.trim() == expected(rows + 1)).then_some(())
    })
    .await;
}

/// A step to 18.99, whose image no registry serves here: the new version never starts.
async fn a_failed_upgrade_rolls_back(env: &Env, rows: u32) {
    set_version(env, "18.99").await;
    let failed = upgrade_ended(env, "18.99", UpgradePhase::RolledBack).await;
    let upgrade = failed
        .status
        .as_ref()
        .and_then(|s| s.upgrade.clone())
        .expect("recorded");
    let message = upgrade.message.clone().unwrap_or_default();
    assert!(message.contains("18.99 did not start"), "{message}");
    assert!(message.contains("runs 15 again"), "{message}");
    insert(env, rows + 1).await;
    assert_eq!(
        count(env).await,
        expected(rows + 1),
        "every row, and writes again"
    );
    let status = env
        .databases()
        .get("orders")
        .await
        .expect("the Database")
        .status
        .expect("a status");
    assert_eq!(
        status.phase,
        Phase::Failed,
        "the version asked for does not run"
    );
    let degraded = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Degraded")
        .expect("Degraded");
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "UpgradeFailed")
    );
    assert_eq!(
        runs(env).await,
        (
            "postgres:15".to_owned(),
            Some("/var/lib/postgresql/data/pgdata".to_owned())
        )
    );
    env.events_eventually(
        "Database",
        "orders",
        "UpgradeStarted and UpgradeFailed",
        |events| {
            ["UpgradeStarted", "UpgradeFailed"]
                .iter()
                .all(|reason| events.iter().any(|(_, r, _)| r == reason))
        },
    )
    .await;
}

#[tokio::test]
async fn postgres_major_upgrades_keep_every_row_and_a_failed_one_rolls_back() {
    let (env, store) =
        start_with_store(&["postgres-15", "postgres-17", "postgres-18", "operator"]).await;
    create_bucket(&store, "backups").await;
    let spec = |version: &str| {
        json!({"engine": "postgres", "version": version, "storage": "1Gi", "replicas": 2,
               "backup": {"schedule": "0 3 1 1 *", "destination": store.destination("backups", "dumps/")}})
    };
    env.create_database("orders", spec("15")).await;
    wait_running(&env, "orders").await;
    sql(&env, &format!("CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL); INSERT INTO orders SELECT g, 'item-' || g FROM generate_series(1, {ROWS}) g"))
        .await
        .expect("rows written");
    assert_eq!(count(&env).await, expected(ROWS));

    a_failed_upgrade_rolls_back(&env, ROWS).await;
    // 15 to 17: a directory of its own beside the 15 one.
    upgrade_keeps_every_row(&env, "17", ROWS + 1, "/var/lib/postgresql/data/pgdata-17").await;
    let backups = env
        .api::<DatabaseBackup>()
        .list(&ListParams::default().labels(&format!("{UPGRADE_LABEL}=true")))
        .await
        .expect("backups listed")
        .items;
    assert!(
        backups
            .iter()
            .any(|b| b.name_any().starts_with("orders-before-17-")
                && b.status.as_ref().is_some_and(
                    |s| s.phase == BackupPhase::Succeeded && s.version.as_deref() == Some("15")
                )),
        "the backup of 15 taken first: {backups:?}"
    );
    // Deleted with its data retained and created again, it finds the 17 directory.
    a_new_database_takes_the_retained_data_back(
        &env,
        spec("17"),
        ROWS + 2,
        "/var/lib/postgresql/data/pgdata-17",
    )
    .await;
    // 17 to 18: the image's own layout, with the volume mounted one level up.
    upgrade_keeps_every_row(&env, "18", ROWS + 2, "/var/lib/postgresql/18/docker").await;
    let upgraded = |events: &[(String, String, String)]| {
        events.iter().filter(|(_, r, _)| r == "Upgraded").count()
    };
    let events = env
        .events_eventually("Database", "orders", "two Upgraded", |events| {
            upgraded(events) >= 2
        })
        .await;
    assert_eq!(upgraded(&events), 2, "{events:?}");
}

/// Deletes `orders` (its data retained) and creates it again from `spec`: it runs on
/// the upgraded directory, with every one of `rows` rows.
async fn a_new_database_takes_the_retained_data_back(
    env: &Env,
    spec: serde_json::Value,
    rows: u32,
    directory: &str,
) {
    env.databases()
        .delete("orders", &DeleteParams::default())
        .await
        .expect("deleted");
    gone(&env.databases(), "orders", REAL_WAIT).await;
    env.create_database("orders", spec).await;
    wait_running(env, "orders").await;
    assert_eq!(count(env).await, expected(rows), "the retained rows");
    assert_eq!(runs(env).await.1.as_deref(), Some(directory));
}

async fn mysql(env: &Env, statement: &str) -> Result<String, String> {
    client(
        env,
        "mysql:9.7",
        &format!(r#"{MYSQL_FROM_URI}; sql "{statement}""#),
    )
    .await
}

#[tokio::test]
async fn a_mysql_upgrade_takes_a_backup_first_and_goes_back_when_the_new_version_cannot_start() {
    let (env, store) = start_with_store(&["mysql-9", "operator"]).await;
    create_bucket(&store, "backups").await;
    env.create_database(
        "orders",
        json!({"engine": "mysql", "version": "9.7", "storage": "1Gi",
               "backup": {"schedule": "0 3 1 1 *", "destination": store.destination("backups", "dumps/")}}),
    )
    .await;
    wait_running(&env, "orders").await;
    mysql(&env, &format!("SET SESSION cte_max_recursion_depth = {ROWS}; CREATE TABLE orders (id int PRIMARY KEY, item varchar(32) NOT NULL); INSERT INTO orders WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < {ROWS}) SELECT n, CONCAT('item-', n) FROM g"))
        .await
        .expect("rows written");
    let count = "SELECT CONCAT(COUNT(*), ' ', SUM(id)) FROM orders";

    // No image 9.8 reaches the node.
    set_version(&env, "9.8").await;
    let failed = upgrade_ended(&env, "9.8", UpgradePhase::RolledBack).await;
    let upgrade = failed
        .status
        .as_ref()
        .and_then(|s| s.upgrade.clone())
        .expect("recorded");
    assert!(upgrade.in_place);
    let message = upgrade.message.unwrap_or_default();
    assert!(message.contains("9.8 did not start"), "{message}");
    let backup = env
        .api::<DatabaseBackup>()
        .get(&upgrade.backup)
        .await
        .expect("the backup taken first");
    let taken = backup.status.expect("a status");
    assert_eq!(taken.phase, BackupPhase::Succeeded, "{:?}", taken.error);
    assert_eq!(
        taken.version.as_deref(),
        Some("9.7"),
        "dumped by the old version"
    );
    eventually(REAL_WAIT, "9.7 serving every row again", || async {
        let counted = mysql(&env, count).await.ok()?;
        (counted == expected(ROWS)).then_some(())
    })
    .await;
    mysql(
        &env,
        &format!("INSERT INTO orders VALUES ({}, 'more')", ROWS + 1),
    )
    .await
    .expect("writes again");
    assert_eq!(runs(&env).await.0, "mysql:9.7");
}
