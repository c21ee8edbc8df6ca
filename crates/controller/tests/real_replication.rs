//! postgres replication on real servers: one primary and streaming replicas behind the
//! `-rw` and `-ro` Services, failover, switchover and scaling.

mod common;

use common::Env;
use serde_json::json;
use testenv::Options;
use testenv::toolkit::failover::{
    assert_none_lost, assert_primary, assert_written_on_a_primary,
    controller_killed_mid_failover_finishes_it, create_replicated, hang_the_primary,
    kill_the_primary_under_writes, lose_the_primary, replicated, scale_and_wait_replicated,
    switchover_under_writes, three_with_a_short_bound, write_from,
};
use testenv::toolkit::real_tier::{
    client_answers, cordon, enforce_restricted, exec, run_client, wait_for_answer, wait_running,
};

const WRITE: &str = r#"psql "$URI" -v ON_ERROR_STOP=1 -c "CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, item text); INSERT INTO orders VALUES (1, 'tea')""#;
/// Reads the row through `-ro` (waiting for it to arrive) and says whether the server
/// answering is a replica. Each try gives up on connecting after 3 s: for a few seconds
/// after `-ro` changes between a virtual IP and an alias of `-rw`, a cached DNS answer
/// may still name the virtual IP that is gone.
const READ_REPLICA: &str = r#"export PGCONNECT_TIMEOUT=3; for i in $(seq 30); do item=$(psql "$RO_URI" -tAc "SELECT item FROM orders WHERE id = 1" 2>/dev/null) && [ -n "$item" ] && break; sleep 1; done; echo "$item"; psql "$RO_URI" -tAc "SELECT pg_is_in_recovery()""#;

async fn start() -> Env {
    let env = Env::start(Options::real(&["postgres-17"])).await;
    enforce_restricted(&env).await;
    env
}

/// A control plane with Database `orders` of two postgres 17 instances, replicating.
async fn two_replicated() -> Env {
    let env = start().await;
    create_replicated(
        &env,
        json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2}),
    )
    .await;
    env
}

#[tokio::test]
async fn a_lost_primary_is_replaced_by_a_replica_and_rejoins_as_one() {
    let env = start().await;
    three_with_a_short_bound(&env, "postgres", "17").await;
    let (ok, output) = run_client(&env, "orders", "postgres:17", WRITE).await;
    assert!(ok, "{output}");

    // The primary's Pod goes, and cannot come back while the node takes no new Pods.
    let promoted = lose_the_primary(&env).await;
    // No new Pod can start on the cordoned node: write through -rw from a replica's.
    // -rw follows the label once the Service's endpoints and kube-proxy have it.
    write_from(
        &env,
        "orders-2",
        &write_through_rw(
            "postgresql://$DATABASE_APP_USERNAME:$DATABASE_APP_PASSWORD@orders-rw:5432/app",
            20,
        ),
        "t",
    )
    .await;

    // The old primary comes back, as a replica with both rows.
    cordon(&env, false).await;
    replicated(&env, "orders").await;
    assert_follows_with_rows(&env, "orders-0", 2).await;
    assert_primary(&env, &promoted).await;
}

#[tokio::test]
async fn a_hung_primary_is_fenced_replaced_and_rejoins_as_a_replica() {
    let env = start().await;
    three_with_a_short_bound(&env, "postgres", "17").await;
    let (ok, output) = run_client(&env, "orders", "postgres:17", WRITE).await;
    assert!(ok, "{output}");

    // The server stops answering but its Pod stays: unready, not gone.
    let (_, promoted) = hang_the_primary(&env, "postgres").await;
    let (ok, output) =
        run_client(&env, "orders", "postgres:17", &write_through_rw("$URI", 30)).await;
    assert!(ok, "a write through -rw: {output}");
    assert_written_on_a_primary(&output, "t");

    // The hung instance was deleted (fenced) and comes back as a replica with both rows.
    let db = replicated(&env, "orders").await;
    assert_eq!(db.status.and_then(|s| s.primary), Some(promoted));
    assert_follows_with_rows(&env, "orders-0", 2).await;
}

/// A shell script that inserts row 2 through `uri`, retrying once a second up to
/// `attempts` times (the Service follows a new primary within seconds), and prints
/// `written on primary=<t|f>` for the attempt that succeeded (`t`: out of recovery).
fn write_through_rw(uri: &str, attempts: u32) -> String {
    format!(
        r#"export PGCONNECT_TIMEOUT=3; for i in $(seq {attempts}); do if answer=$(psql "{uri}" -qtA -v ON_ERROR_STOP=1 -c "INSERT INTO orders VALUES (2, 'coffee') RETURNING NOT pg_is_in_recovery()"); then echo "written on primary=$answer"; exit 0; fi; sleep 1; done; exit 1"#
    )
}

/// `sql` run by psql in an instance, as the superuser in the application's database,
/// its rows printed unaligned.
fn app_query(sql: &str) -> [&str; 7] {
    ["psql", "-U", "postgres", "-d", "app", "-tAc", sql]
}

/// Instance `pod` is a replica (in recovery) holding `rows` rows of `orders`.
async fn assert_follows_with_rows(env: &Env, pod: &str, rows: usize) {
    let answer = exec(
        env,
        pod,
        &app_query("SELECT pg_is_in_recovery(), count(*) FROM orders"),
    )
    .await
    .expect("psql on the instance");
    assert_eq!(
        answer.trim(),
        format!("t|{rows}"),
        "{pod} follows the primary with every row"
    );
}

/// The acknowledged ids a writer printed, and those of them missing from the table.
async fn lost_writes(env: &Env, name: &str, output: &str) -> (Vec<u32>, Vec<u32>) {
    let acknowledged = testenv::clients::acknowledged(output);
    let (ok, stored) =
        run_client(env, name, "postgres:17", testenv::clients::POSTGRES_WRITTEN).await;
    assert!(ok, "{stored}");
    let lost = testenv::clients::lost(&acknowledged, &stored);
    (acknowledged.iter().map(|a| a.id).collect(), lost)
}

#[tokio::test]
async fn a_switchover_under_writes_loses_no_acknowledged_write() {
    let env = two_replicated().await;
    let writer = testenv::clients::postgres_writer(40, 1);
    let (output, primary) = switchover_under_writes(&env, "postgres:17", &writer, "orders-1").await;
    assert_eq!(primary, "orders-1");
    assert_none_lost(
        &env,
        "postgres:17",
        testenv::clients::POSTGRES_WRITTEN,
        &output,
    )
    .await;
    replicated(&env, "orders").await;
}

/// Three instances are one primary and two streaming replicas behind `-rw` and `-ro`;
/// scaled to five and down to one, `orders-0` stays the primary with the row, and at
/// one instance reads through `-ro` reach it.
#[tokio::test]
async fn three_instances_stream_to_two_replicas_and_scale_never_losing_the_primary() {
    let env = start().await;
    env.create_database(
        "orders",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 3}),
    )
    .await;
    wait_running(&env, "orders").await;
    let db = replicated(&env, "orders").await;
    let status = db.status.expect("status");
    assert_eq!(status.primary.as_deref(), Some("orders-0"));
    assert_eq!(status.instances.len(), 3, "{:?}", status.instances);
    let (ok, output) = run_client(&env, "orders", "postgres:17", WRITE).await;
    assert!(ok, "{output}");
    read_on_a_replica(&env, "read on a replica").await;
    keeps_a_quarter_of_the_volume(&env).await;
    for replicas in [5, 2, 1] {
        let db = scale_and_wait_replicated(&env, "orders", replicas).await;
        let status = db.status.expect("status");
        assert_eq!(status.primary.as_deref(), Some("orders-0"), "at {replicas}");
        let (ok, output) = run_client(
            &env,
            "orders",
            "postgres:17",
            r#"psql "$URI" -v ON_ERROR_STOP=1 -tAc "SELECT item FROM orders WHERE id = 1""#,
        )
        .await;
        assert!(ok, "at {replicas}: {output}");
        assert_eq!(output.trim(), "tea", "the row at {replicas} instances");
        if replicas > 1 {
            read_on_a_replica(&env, &format!("read on a replica at {replicas} instances")).await;
        }
    }
    // One instance: `-ro` is an alias of `-rw`, so reads through it reach the primary.
    client_answers(
        &env,
        "orders",
        "postgres:17",
        READ_REPLICA,
        &["tea", "f"],
        "read through -ro on the primary at one instance",
    )
    .await;
}

/// Stops (SIGSTOP) the instance's WAL receiver and prints its process id: the replica
/// fetches nothing while its server still answers. The process title is matched from
/// its start, so the script's own shell (whose arguments hold the word) is never hit.
const FREEZE_RECEIVER: &str = r#"for f in /proc/[0-9]*/cmdline; do if tr '\0' ' ' <"$f" 2>/dev/null | grep -q '^postgres: walreceiver'; then p=${f#/proc/}; p=${p%/cmdline}; kill -STOP "$p" && echo "$p"; fi; done"#;

/// Writes rows 11 to 32, each in a WAL segment of its own (22 segments of 16 MiB, more
/// than the 256 MiB a primary on a 1 GiB volume keeps), then checkpoints, which removes
/// the segments beyond what it keeps.
const OUTGROW_THE_KEPT_LOG: &str = r#"for i in $(seq 11 32); do psql -U "$POSTGRES_USER" -d app -v ON_ERROR_STOP=1 -qAt -c "INSERT INTO orders VALUES ($i, 'log')" -c "SELECT pg_switch_wal()" >/dev/null || exit 1; done; psql -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 -qc CHECKPOINT && echo checkpointed"#;

#[tokio::test]
async fn a_replica_that_lost_the_log_it_lacks_is_cloned_anew_and_catches_up() {
    let env = two_replicated().await;
    let (ok, output) = run_client(&env, "orders", "postgres:17", WRITE).await;
    assert!(ok, "{output}");
    keeps_a_quarter_of_the_volume(&env).await;

    // The replica fetches nothing while the primary writes and recycles more log than
    // it keeps: the replica can never catch up by streaming.
    let receiver = exec(&env, "orders-1", &["sh", "-c", FREEZE_RECEIVER])
        .await
        .expect("the replica's WAL receiver stopped");
    assert!(!receiver.trim().is_empty(), "no WAL receiver on orders-1");
    let written = exec(&env, "orders-0", &["sh", "-c", OUTGROW_THE_KEPT_LOG])
        .await
        .expect("log written and checkpointed");
    assert_eq!(written.trim(), "checkpointed");
    exec(&env, "orders-1", &["kill", "-CONT", receiver.trim()])
        .await
        .expect("the WAL receiver resumed");
    let resumed = std::time::Instant::now();

    env.events_eventually("Database", "orders", "Reseeding for orders-1", |events| {
        events
            .iter()
            .any(|(_, reason, note)| reason == "Reseeding" && note.starts_with("orders-1 "))
    })
    .await;
    // The copy holds every row, and the replica streams again.
    wait_for_answer(
        &env,
        "orders-1",
        &app_query(
            "SELECT pg_is_in_recovery(), count(*), (SELECT status FROM pg_stat_wal_receiver) FROM orders",
        ),
        &["t|23|streaming"],
        "orders-1 cloned anew, with all 23 rows, streaming",
    )
    .await;
    eprintln!(
        "orders-1 cloned anew and streaming {:.1?} after its WAL receiver resumed",
        resumed.elapsed()
    );
    let db = replicated(&env, "orders").await;
    assert_eq!(
        db.status.and_then(|s| s.primary).as_deref(),
        Some("orders-0")
    );
}

/// Waits until the primary `orders-0` keeps a quarter of its 1 GiB volume of log for
/// replicas that fall behind: one starved of CPU while others clone still finds the log
/// it lacks.
async fn keeps_a_quarter_of_the_volume(env: &Env) {
    wait_for_answer(
        env,
        "orders-0",
        &[
            "sh",
            "-c",
            r#"psql -U "$POSTGRES_USER" -d postgres -tAc "SHOW wal_keep_size""#,
        ],
        &["256MB"],
        "the primary keeping log for its replicas",
    )
    .await;
}

/// The row written by [`WRITE`] read through `-ro`, from a server in recovery.
async fn read_on_a_replica(env: &Env, what: &str) {
    client_answers(
        env,
        "orders",
        "postgres:17",
        READ_REPLICA,
        &["tea", "t"],
        what,
    )
    .await;
}

/// One failover under writes: a writer runs through `-rw`; after a few seconds the
/// primary's Pod is killed (force-deleted, as a crashed node loses it) while the node
/// takes no new Pods; once another instance is primary the node takes Pods again and
/// the old primary comes back as a replica. Returns the time from the kill to the new
/// primary, and the acknowledged and lost writes.
async fn failover_under_writes(env: &Env, trial: u32) -> (std::time::Duration, usize, usize) {
    let old = env
        .databases()
        .get("orders")
        .await
        .ok()
        .and_then(|d| d.status?.primary)
        .expect("a primary");
    let writer = testenv::clients::postgres_writer(45, trial * 1_000_000);
    let (output, took) = kill_the_primary_under_writes(env, "postgres:17", &writer, &old).await;
    replicated(env, "orders").await;
    let (acknowledged, lost) = lost_writes(env, "orders", &output).await;
    eprintln!(
        "failover in {took:.1?}: {} writes acknowledged, {} lost {lost:?}",
        acknowledged.len(),
        lost.len()
    );
    (took, acknowledged.len(), lost.len())
}

/// Trials per failover test: 1 by default, `DATABASE_FAILOVER_TRIALS` for more.
fn trials() -> u32 {
    u32::try_from(testenv::count_from_env("DATABASE_FAILOVER_TRIALS", 1)).unwrap_or(1)
}

#[tokio::test]
async fn in_sync_mode_a_failover_loses_no_acknowledged_write() {
    let env = start().await;
    env.create_database(
        "orders",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 3,
               "replication": {"mode": "Sync", "failoverAfterSeconds": 10}}),
    )
    .await;
    wait_running(&env, "orders").await;
    replicated(&env, "orders").await;
    let setting = exec(
        &env,
        "orders-0",
        &[
            "psql",
            "-U",
            "postgres",
            "-tAc",
            "SHOW synchronous_standby_names",
        ],
    )
    .await
    .expect("psql");
    assert_eq!(setting.trim(), "ANY 1 (*)");
    let mut lost = 0;
    for trial in 1..=trials() {
        lost += failover_under_writes(&env, trial).await.2;
    }
    assert_eq!(lost, 0, "acknowledged writes lost in sync mode");
}

#[tokio::test]
async fn in_async_mode_failovers_are_measured_and_the_set_heals() {
    let env = start().await;
    three_with_a_short_bound(&env, "postgres", "17").await;
    let (mut acknowledged, mut lost) = (0, 0);
    for trial in 1..=trials() {
        let (took, acked, gone) = failover_under_writes(&env, trial).await;
        assert!(
            took < std::time::Duration::from_secs(90),
            "trial {trial}: {took:?}"
        );
        acknowledged += acked;
        lost += gone;
    }
    eprintln!(
        "async mode: {lost} of {acknowledged} acknowledged writes lost over {} failovers",
        trials()
    );
}

#[tokio::test]
async fn a_controller_killed_in_the_middle_of_a_failover_finishes_it_when_it_is_back() {
    let mut env = start().await;
    controller_killed_mid_failover_finishes_it(
        &mut env,
        json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2,
               "replication": {"failoverAfterSeconds": 10}}),
    )
    .await;
}
