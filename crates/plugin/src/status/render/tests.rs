use super::*;
use serde_json::{Value, json};

/// 2025-03-01T03:00:00Z.
const NOW: i64 = 1_740_798_000;

fn now() -> Timestamp {
    Timestamp::from_second(NOW).unwrap()
}

/// `seconds` before [`NOW`], as the API writes a time.
fn ago(seconds: i64) -> String {
    Timestamp::from_second(NOW - seconds).unwrap().to_string()
}

fn database(engine: &str, status: &Value) -> Database {
    serde_json::from_value(json!({
        "apiVersion": "mycompany.io/v1", "kind": "Database",
        "metadata": {"name": "orders", "namespace": "shop"},
        "spec": {"engine": engine, "version": "17", "storage": "1Gi", "replicas": 3},
        "status": status,
    }))
    .unwrap()
}

fn condition(type_: &str, status: &str, reason: &str, seconds_ago: i64, message: &str) -> Value {
    json!({
        "type": type_, "status": status, "reason": reason, "message": message,
        "lastTransitionTime": ago(seconds_ago),
    })
}

fn event(type_: &str, reason: &str, seconds_ago: i64, note: &str) -> Event {
    serde_json::from_value(json!({
        "metadata": {"name": format!("orders.{reason}")},
        "eventTime": ago(seconds_ago), "type": type_, "reason": reason, "note": note,
        "regarding": {"kind": "Database", "name": "orders"},
    }))
    .unwrap()
}

/// The lines of `section` (up to the blank line after it) of `text`.
fn section<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| *l != title)
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect()
}

fn running(instances: &Value) -> Value {
    json!({
        "phase": "Running", "replicas": 2, "primary": "orders-0",
        "endpoint": "orders-0.orders.shop.svc.cluster.local:5432",
        "instances": instances,
    })
}

#[test]
fn the_summary_names_engine_phase_endpoint_primary_and_readiness() {
    let mut status = running(&json!([]));
    status["message"] = json!("2 of 3 instances\nready");
    let text = render(&database("postgres", &status), &[], now());
    let summary: Vec<&str> = text.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(
        summary,
        [
            "Name:       orders",
            "Namespace:  shop",
            "Engine:     postgres 17",
            "Phase:      Running",
            "Message:    2 of 3 instances ready",
            "Endpoint:   orders-0.orders.shop.svc.cluster.local:5432",
            "Primary:    orders-0",
            "Instances:  2/3 ready",
        ]
    );
}

#[test]
fn a_database_without_status_reads_as_pending_with_nothing_reported() {
    let mut db = database("mysql", &Value::Null);
    db.status = None;
    let text = render(&db, &[], now());
    assert!(text.contains("Phase:      Pending\n"), "{text}");
    assert!(text.contains("Primary:    <none>\n"), "{text}");
    assert!(text.contains("Instances:  0/3 ready\n"), "{text}");
    assert_eq!(section(&text, "INSTANCES"), ["No instances reported yet."]);
    assert_eq!(
        section(&text, "CONDITIONS"),
        ["No conditions reported yet."]
    );
    assert_eq!(section(&text, "RECENT EVENTS"), ["No recent events."]);
    assert!(!text.contains("Message:"), "{text}");
}

#[test]
fn a_paused_database_says_so() {
    let mut db = database("postgres", &running(&json!([])));
    db.annotations_mut()
        .insert(PAUSED_ANNOTATION.to_owned(), "true".to_owned());
    let text = render(&db, &[], now());
    assert!(
        text.contains("Paused:     yes: the operator changes nothing (mycompany.io/paused)\n"),
        "{text}"
    );
}

#[test]
fn postgres_replicas_lag_in_bytes() {
    let instances = json!([
        {"name": "orders-0", "role": "Primary", "ready": true},
        {"name": "orders-1", "role": "Replica", "ready": true, "lagBytes": 4096},
        {"name": "orders-2", "role": "Replica", "ready": false, "lagBytes": 1},
    ]);
    let text = render(&database("postgres", &running(&instances)), &[], now());
    assert_eq!(
        section(&text, "INSTANCES"),
        [
            "NAME       ROLE      READY   LAG",
            "orders-0   Primary   true    -",
            "orders-1   Replica   true    4096 bytes",
            "orders-2   Replica   false   1 byte",
        ]
    );
}

#[test]
fn mysql_replicas_lag_in_transactions() {
    let instances = json!([
        {"name": "orders-0", "role": "Primary", "ready": true},
        {"name": "orders-1", "role": "Replica", "ready": true, "lagTransactions": 12},
        {"name": "orders-2", "role": "Unknown", "ready": false},
    ]);
    let text = render(&database("mysql", &running(&instances)), &[], now());
    assert_eq!(
        section(&text, "INSTANCES")[2..],
        [
            "orders-1   Replica   true    12 transactions",
            "orders-2   Unknown   false   -",
        ]
    );
}

#[test]
fn mongodb_secondaries_lag_in_seconds() {
    let instances = json!([
        {"name": "orders-1", "role": "Replica", "ready": true, "lagSeconds": 0},
    ]);
    let text = render(&database("mongodb", &running(&instances)), &[], now());
    assert_eq!(
        section(&text, "INSTANCES")[1],
        "orders-1   Replica   true    0 seconds"
    );
}

#[test]
fn conditions_show_status_reason_age_and_message() {
    let mut status = running(&json!([]));
    status["conditions"] = json!([
        condition("Ready", "True", "AllReplicasReady", 3600, "3/3 ready"),
        condition(
            "Replicated",
            "False",
            "ReplicasBehind",
            90,
            "orders-2 is\nbehind"
        ),
    ]);
    let text = render(&database("postgres", &status), &[], now());
    assert_eq!(
        section(&text, "CONDITIONS"),
        [
            "TYPE         STATUS   REASON             AGE   MESSAGE",
            "Ready        True     AllReplicasReady   60m   3/3 ready",
            "Replicated   False    ReplicasBehind     90s   orders-2 is behind",
        ]
    );
}

#[test]
fn events_show_age_type_reason_and_note_newest_last() {
    let events = [
        event("Normal", "Created", 3 * 3600, "Created StatefulSet orders"),
        event(
            "Warning",
            "BackupFailed",
            30,
            "Backup orders-1 failed: bucket missing",
        ),
    ];
    let text = render(&database("postgres", &running(&json!([]))), &events, now());
    assert_eq!(
        section(&text, "RECENT EVENTS"),
        [
            "AGE   TYPE      REASON         NOTE",
            "3h    Normal    Created        Created StatefulSet orders",
            "30s   Warning   BackupFailed   Backup orders-1 failed: bucket missing",
        ]
    );
}

#[test]
fn backups_show_the_schedule_the_last_and_next_backups_and_the_last_result() {
    let mut db = database("postgres", &Value::Null);
    db.spec.backup = serde_json::from_value(json!({
        "schedule": "0 3 * * *",
        "destination": {"volume": {"claimName": "dumps"}},
    }))
    .unwrap();
    let mut status = running(&json!([]));
    status["backups"] = json!({
        "lastSucceeded": "orders-20250301030000",
        "lastScheduled": ago(0),
        "nextScheduled": ago(-86400),
    });
    status["conditions"] = json!([condition(
        "LastBackupSucceeded",
        "True",
        "BackupSucceeded",
        600,
        "Backup orders-20250301030000 stored"
    )]);
    db.status = serde_json::from_value(status).unwrap();
    let text = render(&db, &[], now());
    assert_eq!(
        section(&text, "BACKUPS"),
        [
            "Schedule:        0 3 * * *",
            "Last succeeded:  orders-20250301030000",
            "Last scheduled:  2025-03-01T03:00:00Z (0s ago)",
            "Next scheduled:  2025-03-02T03:00:00Z (in 24h)",
            "Last backup:     succeeded (BackupSucceeded, 10m ago): Backup orders-20250301030000 stored",
        ]
    );
}

#[test]
fn a_database_without_backups_says_so() {
    let mut status = running(&json!([]));
    status["conditions"] = json!([condition(
        "LastBackupSucceeded",
        "False",
        "BackupFailed",
        60,
        ""
    )]);
    let text = render(&database("mysql", &status), &[], now());
    assert_eq!(
        section(&text, "BACKUPS"),
        [
            "Schedule:        none",
            "Last succeeded:  <none>",
            "Last scheduled:  <none>",
            "Next scheduled:  <none>",
            "Last backup:     failed (BackupFailed, 60s ago)",
        ]
    );
}

#[test]
fn sections_come_in_order_separated_by_blank_lines() {
    let text = render(&database("postgres", &running(&json!([]))), &[], now());
    let headings: Vec<&str> = text
        .lines()
        .filter(|l| l.chars().all(|c| c.is_ascii_uppercase() || c == ' ') && !l.is_empty())
        .collect();
    assert_eq!(
        headings,
        ["INSTANCES", "BACKUPS", "CONDITIONS", "RECENT EVENTS"]
    );
    assert_eq!(text.matches("\n\n").count(), 4, "{text}");
}
