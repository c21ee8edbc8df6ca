#![allow(clippy::needless_pass_by_value)] // the fixtures take the json! they are given

use serde_json::{Value, json};

use super::*;

fn at(text: &str) -> Timestamp {
    text.parse().expect("a timestamp")
}

fn database(backup: Value, status: Value) -> Database {
    serde_json::from_value(json!({
        "apiVersion": "mycompany.io/v1", "kind": "Database",
        "metadata": {"name": "orders", "namespace": "shop", "creationTimestamp": "2026-12-01T12:00:00Z"},
        "spec": {"engine": "postgres", "version": "17", "storage": "1Gi", "backup": backup},
        "status": status,
    }))
    .expect("a Database")
}

fn daily(retention: Value) -> Value {
    json!({"schedule": "0 3 * * *", "retention": retention,
           "destination": {"volume": {"claimName": "dumps"}}})
}

fn backup(name: &str, created: &str, phase: &str, scheduled: bool) -> DatabaseBackup {
    let mut labels = json!({DATABASE_LABEL: "orders"});
    if scheduled {
        labels[SCHEDULED_LABEL] = json!("true");
    }
    serde_json::from_value(json!({
        "apiVersion": "mycompany.io/v1", "kind": "DatabaseBackup",
        "metadata": {"name": name, "namespace": "shop", "labels": labels, "creationTimestamp": created},
        "spec": {"database": "orders"},
        "status": {"phase": phase, "sizeBytes": 2048, "location": format!("pvc://dumps/{name}"),
                   "error": (phase == "Failed").then_some("NoSuchBucket")},
    }))
    .expect("a DatabaseBackup")
}

#[test]
fn a_daily_backup_is_made_at_its_time_and_not_before() {
    let db = database(daily(json!({})), json!({}));
    let before = plan(&db, &[], at("2026-12-02T02:59:00Z"));
    assert_eq!(before.create, None);
    assert_eq!(before.requeue, Some(Duration::from_secs(60)));
    let due = plan(&db, &[], at("2026-12-02T03:00:30Z"));
    assert_eq!(due.create.as_deref(), Some("orders-20261202-0300"));
    let status = due.status.expect("a status");
    assert_eq!(
        status.last_scheduled,
        Some(Time(at("2026-12-02T03:00:00Z")))
    );
    assert_eq!(
        status.next_scheduled,
        Some(Time(at("2026-12-03T03:00:00Z")))
    );
}

#[test]
fn after_a_long_outage_only_the_latest_missed_backup_is_made() {
    let db = database(
        daily(json!({})),
        json!({"backups": {"lastScheduled": "2026-12-02T03:00:00Z"}}),
    );
    let planned = plan(&db, &[], at("2026-12-05T10:00:00Z"));
    assert_eq!(planned.create.as_deref(), Some("orders-20261205-0300"));
    let again = database(
        daily(json!({})),
        json!({"backups": {"lastScheduled": "2026-12-05T03:00:00Z"}}),
    );
    assert_eq!(
        plan(&again, &[], at("2026-12-05T10:00:00Z")).create,
        None,
        "made once"
    );
}

#[test]
fn a_suspended_schedule_makes_nothing_and_names_no_next_time() {
    let mut spec = daily(json!({}));
    spec["suspend"] = json!(true);
    let planned = plan(&database(spec, json!({})), &[], at("2026-12-09T10:00:00Z"));
    assert_eq!(planned.create, None);
    assert_eq!(planned.requeue, None);
    assert_eq!(planned.status.and_then(|s| s.next_scheduled), None);
}

#[test]
fn retention_keeps_seven_by_default_never_touching_running_or_manual_backups() {
    let mut backups: Vec<DatabaseBackup> = (1..=9)
        .map(|day| {
            backup(
                &format!("orders-2026120{day}-0300"),
                &format!("2026-12-0{day}T03:00:00Z"),
                "Succeeded",
                true,
            )
        })
        .collect();
    backups.push(backup(
        "orders-manual",
        "2026-11-01T00:00:00Z",
        "Succeeded",
        false,
    ));
    backups.push(backup(
        "orders-20261110-0300",
        "2026-11-10T03:00:00Z",
        "Running",
        true,
    ));
    let planned = plan(
        &database(daily(json!({})), json!({})),
        &backups,
        at("2026-12-09T10:00:00Z"),
    );
    assert_eq!(
        planned.delete,
        ["orders-20261201-0300", "orders-20261202-0300"]
    );
}

#[test]
fn an_age_bound_deletes_old_backups_but_keeps_the_newest_that_succeeded() {
    let backups = vec![
        backup(
            "orders-20261201-0300",
            "2026-12-01T03:00:00Z",
            "Succeeded",
            true,
        ),
        backup(
            "orders-20261202-0300",
            "2026-12-02T03:00:00Z",
            "Succeeded",
            true,
        ),
        backup(
            "orders-20261208-0300",
            "2026-12-08T03:00:00Z",
            "Failed",
            true,
        ),
    ];
    let db = database(daily(json!({"maxAge": "3d"})), json!({}));
    let planned = plan(&db, &backups, at("2026-12-09T10:00:00Z"));
    assert_eq!(
        planned.delete,
        ["orders-20261201-0300"],
        "the newest success stays"
    );
    let counted = database(daily(json!({"count": 1, "maxAge": "30d"})), json!({}));
    let planned = plan(&counted, &backups, at("2026-12-09T10:00:00Z"));
    assert_eq!(planned.delete, ["orders-20261201-0300"]);
}

#[test]
fn the_condition_follows_the_newest_finished_backup() {
    let db = database(daily(json!({})), json!({}));
    let backups = vec![
        backup(
            "orders-20261201-0300",
            "2026-12-01T03:00:00Z",
            "Succeeded",
            true,
        ),
        backup(
            "orders-20261202-0300",
            "2026-12-02T03:00:00Z",
            "Failed",
            true,
        ),
        backup(
            "orders-20261203-0300",
            "2026-12-03T03:00:00Z",
            "Running",
            true,
        ),
    ];
    let planned = plan(&db, &backups, at("2026-12-03T03:01:00Z"));
    let (ok, reason, message) = planned.last_backup.expect("a condition");
    assert!(!ok);
    assert_eq!(reason, "BackupFailed");
    assert!(
        message.contains("orders-20261202-0300") && message.contains("NoSuchBucket"),
        "{message}"
    );
    assert_eq!(
        planned.status.and_then(|s| s.last_succeeded).as_deref(),
        Some("orders-20261201-0300")
    );
    assert_eq!(
        plan(&db, &backups[..1], at("2026-12-03T03:01:00Z"))
            .last_backup
            .map(|c| c.0),
        Some(true)
    );
}

#[test]
fn a_database_with_a_backup_under_way_looks_again_soon() {
    let manual = database(Value::Null, json!({}));
    let running = [backup("b", "2026-12-03T03:00:00Z", "Running", false)];
    assert_eq!(
        plan(&manual, &running, at("2026-12-03T03:01:00Z")).requeue,
        Some(WHILE_A_BACKUP_RUNS)
    );
    let done = [backup("b", "2026-12-03T03:00:00Z", "Succeeded", false)];
    assert_eq!(
        plan(&manual, &done, at("2026-12-03T03:01:00Z")).requeue,
        None
    );
    let scheduled = database(daily(json!({})), json!({}));
    assert_eq!(
        plan(&scheduled, &running, at("2026-12-03T03:01:00Z")).requeue,
        Some(WHILE_A_BACKUP_RUNS),
        "sooner than the next scheduled time"
    );
}
