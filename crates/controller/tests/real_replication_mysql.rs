//! mysql replication on real servers: GTID replicas cloned from the primary behind the
//! `-ro` Service, failover to the most advanced replica, the old primary rejoining as a
//! replica, and switchover.

mod common;

use common::Env;
use serde_json::json;
use testenv::Options;
use testenv::clients::MYSQL_FROM_URI;
use testenv::toolkit::failover::{
    assert_none_lost, assert_primary, assert_written_on_a_primary,
    controller_killed_mid_failover_finishes_it, create_replicated, hang_the_primary,
    kill_the_primary_under_writes, lose_the_primary, replicated, scale_and_wait_replicated,
    switchover_under_writes, three_with_a_short_bound, write_from,
};
use testenv::toolkit::real_tier::{
    assert_primary_and_lag, client_answers, cordon, enforce_restricted, exec, run_client,
    wait_for_answer,
};

const CLIENT: &str = "mysql:9.7";
/// Inserts row 2 through `-rw` from an instance's container, retrying once a second for
/// up to 30 attempts, and prints `written on primary=<0|1>` as [`write_row`] does.
const WRITE_THROUGH_RW_INSIDE: &str = r#"for i in $(seq 30); do if answer=$(MYSQL_PWD="$MYSQL_PASSWORD" mysql -h orders-rw -u "$MYSQL_USER" --connect-timeout=3 -N -B "$MYSQL_DATABASE" -e "INSERT INTO orders VALUES (2, 'coffee'); SELECT @@global.read_only"); then echo "written on primary=$answer"; exit 0; fi; sleep 1; done; exit 1"#;

async fn start() -> Env {
    let env = Env::start(Options::real(&["mysql-9"])).await;
    enforce_restricted(&env).await;
    env
}

/// A client script: `body` with `sql` connected through `uri_variable` (`URI` for
/// `-rw`, `RO_URI` for `-ro`).
fn through(uri_variable: &str, body: &str) -> String {
    format!("URI=\"${uri_variable}\"; {MYSQL_FROM_URI}; {body}")
}

/// Inserts row `id` through `-rw`, retrying once a second for up to 30 attempts (the
/// Service follows a new primary within seconds), and prints `written on primary=<0|1>`
/// with the answering server's read_only for the attempt that succeeded.
fn write_row(id: u32) -> String {
    through(
        "URI",
        &format!(
            r#"for i in $(seq 30); do if answer=$(sql "CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, item text); INSERT INTO orders VALUES ({id}, 'tea'); SELECT @@global.read_only"); then echo "written on primary=$answer"; exit 0; fi; sleep 1; done; exit 1"#
        ),
    )
}

/// The command that runs `query` in an instance as mysql's root user.
fn root_sql(query: &str) -> [&str; 5] {
    [
        "sh",
        "-c",
        r#"MYSQL_PWD="$MYSQL_ROOT_PASSWORD" exec mysql -uroot -N -B -e "$1""#,
        "sh",
        query,
    ]
}

/// Instance `pod` is a read-only replica streaming from the primary and holding `rows`
/// rows of `orders`.
async fn assert_follows_with_rows(env: &Env, pod: &str, rows: usize) {
    let query = "SELECT @@global.super_read_only, \
        (SELECT SERVICE_STATE FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = ''), \
        (SELECT count(*) FROM app.orders)";
    let expected = ["1", "ON", &rows.to_string()];
    let what = format!("{pod} a read-only replica streaming with {rows} rows");
    wait_for_answer(env, pod, &root_sql(query), &expected, &what).await;
}

#[tokio::test]
async fn three_mysql_instances_are_one_primary_and_two_gtid_replicas_and_scale_keeping_it() {
    let env = start().await;
    three_with_a_short_bound(&env, "mysql", "9.7").await;
    assert_primary_and_lag(&env, "orders", "orders-0", "transactions", |i| {
        i.lag_transactions.is_some() && i.lag_bytes.is_none()
    })
    .await;

    let (ok, output) = run_client(&env, "orders", CLIENT, &write_row(1)).await;
    assert!(ok, "{output}");
    assert_written_on_a_primary(&output, "0");
    // Read through -ro: the row arrives, on a server that refuses writes.
    let read = through(
        "RO_URI",
        r#"for i in $(seq 30); do item=$(sql "SELECT item FROM orders WHERE id = 1" 2>/dev/null) && [ -n "$item" ] && break; sleep 1; done; echo "$item"; sql "SELECT @@global.super_read_only"; if sql "INSERT INTO orders VALUES (9, 'x')" 2>/dev/null; then echo "a replica took a write"; fi"#,
    );
    client_answers(
        &env,
        "orders",
        CLIENT,
        &read,
        &["tea", "1"],
        "read on a read-only replica",
    )
    .await;
    for replica in ["orders-1", "orders-2"] {
        assert_follows_with_rows(&env, replica, 1).await;
    }

    // Scaled to five (the new replicas cloned from the primary) and down to one,
    // `orders-0` stays the primary and every replica holds the row.
    for replicas in [5, 2, 1] {
        let db = scale_and_wait_replicated(&env, "orders", replicas).await;
        assert_eq!(
            db.status.and_then(|s| s.primary).as_deref(),
            Some("orders-0"),
            "at {replicas}"
        );
        for ordinal in 1..replicas {
            assert_follows_with_rows(&env, &format!("orders-{ordinal}"), 1).await;
        }
    }
    // One instance left: the primary, still taking writes with the row.
    let (ok, output) = run_client(&env, "orders", CLIENT, &write_row(2)).await;
    assert!(ok, "{output}");
    assert_written_on_a_primary(&output, "0");
}

#[tokio::test]
async fn a_lost_mysql_primary_is_replaced_and_rejoins_as_a_replica() {
    let env = start().await;
    three_with_a_short_bound(&env, "mysql", "9.7").await;
    let (ok, output) = run_client(&env, "orders", CLIENT, &write_row(1)).await;
    assert!(ok, "{output}");

    // The primary's Pod goes, and cannot come back while the node takes no new Pods.
    let promoted = lose_the_primary(&env).await;
    // No new Pod can start on the cordoned node: write from a replica's container.
    write_from(&env, "orders-2", WRITE_THROUGH_RW_INSIDE, "0").await;

    // The old primary comes back read-only, and follows the new one with both rows.
    cordon(&env, false).await;
    replicated(&env, "orders").await;
    assert_follows_with_rows(&env, "orders-0", 2).await;
    assert_primary(&env, &promoted).await;
}

#[tokio::test]
async fn a_mysql_switchover_under_writes_loses_no_acknowledged_write() {
    let env = start().await;
    three_with_a_short_bound(&env, "mysql", "9.7").await;
    let writer = testenv::clients::mysql_writer(40, 1);
    let (output, primary) = switchover_under_writes(&env, CLIENT, &writer, "orders-2").await;
    assert_eq!(primary, "orders-2");
    assert_none_lost(&env, CLIENT, &testenv::clients::mysql_written(), &output).await;

    // The old primary follows the new one.
    replicated(&env, "orders").await;
    assert_primary(&env, "orders-2").await;
    for replica in ["orders-0", "orders-1"] {
        assert_follows(&env, replica).await;
    }
}

#[tokio::test]
async fn in_sync_mode_a_mysql_failover_loses_no_acknowledged_write() {
    let env = start().await;
    create_replicated(
        &env,
        json!({"engine": "mysql", "version": "9.7", "storage": "1Gi", "replicas": 3,
               "replication": {"mode": "Sync", "failoverAfterSeconds": 10}}),
    )
    .await;
    let semi_sync = exec(
        &env,
        "orders-0",
        &[
            "sh",
            "-c",
            r#"MYSQL_PWD="$MYSQL_ROOT_PASSWORD" exec mysql -uroot -N -B -e "SELECT @@global.rpl_semi_sync_source_enabled""#,
        ],
    )
    .await
    .expect("mysql");
    assert_eq!(semi_sync.trim(), "1", "commits wait for a replica");

    // The primary is killed on a cordoned node under a writer.
    let writer = testenv::clients::mysql_writer(45, 1);
    let (output, _) = kill_the_primary_under_writes(&env, CLIENT, &writer, "orders-0").await;
    replicated(&env, "orders").await;
    assert_none_lost(&env, CLIENT, &testenv::clients::mysql_written(), &output).await;
    assert_follows(&env, "orders-0").await;
}

/// Instance `pod` is a read-only replica streaming from the primary.
async fn assert_follows(env: &Env, pod: &str) {
    let what = format!("{pod} a read-only replica streaming");
    let query = "SELECT @@global.super_read_only, \
        (SELECT SERVICE_STATE FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = '')";
    wait_for_answer(env, pod, &root_sql(query), &["1", "ON"], &what).await;
}

#[tokio::test]
async fn a_hung_mysql_primary_is_fenced_replaced_and_rejoins_as_a_replica() {
    let env = start().await;
    three_with_a_short_bound(&env, "mysql", "9.7").await;
    let (ok, output) = run_client(&env, "orders", CLIENT, &write_row(1)).await;
    assert!(ok, "{output}");

    // The server stops answering but its Pod stays: unready, not gone.
    let (_, promoted) = hang_the_primary(&env, "mysqld").await;
    let (ok, output) = run_client(&env, "orders", CLIENT, &write_row(2)).await;
    assert!(ok, "a write through -rw: {output}");
    assert_written_on_a_primary(&output, "0");

    // The hung instance was deleted (fenced) and comes back as a replica with both rows.
    replicated(&env, "orders").await;
    assert_follows_with_rows(&env, "orders-0", 2).await;
    assert_primary(&env, &promoted).await;
}

#[tokio::test]
async fn a_controller_killed_in_the_middle_of_a_mysql_failover_finishes_it_when_it_is_back() {
    let mut env = start().await;
    controller_killed_mid_failover_finishes_it(
        &mut env,
        json!({"engine": "mysql", "version": "9.7", "storage": "1Gi", "replicas": 2,
               "replication": {"failoverAfterSeconds": 10}}),
    )
    .await;
}
