//! mongodb replica sets on real servers: the operator initiates the set and adds
//! members, `-ro` reaches a secondary, the compatibility version follows the series,
//! the set's own election replaces a lost primary and the operator follows it, a
//! switchover under writes loses no acknowledged write, and scaling adds and removes
//! members, never the primary. (A member too stale to catch up: its own target.)

mod common;
mod mongodb_set;

use common::Env;
use serde_json::json;
use testenv::toolkit::failover::{
    assert_none_lost, assert_primary, assert_written_on_a_primary,
    controller_killed_mid_failover_finishes_it, create_replicated, hang_the_primary,
    kill_the_primary_under_writes, lose_the_primary, replicated, scale_and_wait_replicated,
    switchover_under_writes, write_from,
};
use testenv::toolkit::real_tier::{
    assert_primary_and_lag, client_answers, cordon, exec, in_pod_eventually, run_client,
    wake_server,
};

use mongodb_set::{
    CLIENT, MEMBER, assert_secondary_with, replica_set, start, three_members_with_document_1,
    write_document,
};

/// One replica set goes through what needs no failure: reads through `-ro`, the
/// compatibility version raised to the series its members run, then scaling up and down
/// (one set for all three, as each set costs a minute of startup on two cores).
#[tokio::test]
async fn one_mongodb_replica_set_reads_through_ro_follows_its_series_and_scales() {
    let env = start().await;
    replica_set(&env, 3).await;
    reads_go_through_ro_to_a_secondary(&env).await;
    the_compatibility_version_follows_the_series(&env).await;
    scaling_adds_and_removes_members_never_the_primary(&env).await;
}

/// The set of three streams to its secondaries and `-ro` reads from one that refuses
/// writes; the members share the replica-set key, never the application's password.
async fn reads_go_through_ro_to_a_secondary(env: &Env) {
    assert_primary_and_lag(env, "orders", "orders-0", "seconds", |i| {
        i.lag_seconds.is_some() && i.lag_bytes.is_none()
    })
    .await;

    let (ok, output) = run_client(env, "orders", CLIENT, &write_document("$URI", 1)).await;
    assert!(ok, "{output}");
    assert_written_on_a_primary(&output, "true");
    // Read through -ro: the document arrives, on a secondary that refuses writes.
    let read = r#"for i in $(seq 30); do item=$(mongosh "$RO_URI" --quiet --eval 'const d = db.orders.findOne({ _id: 1 }); print(d ? d.item : "")' 2>/dev/null) && [ -n "$item" ] && break; sleep 1; done; echo "$item"
mongosh "$RO_URI" --quiet --eval 'print(db.hello().secondary)'
if mongosh "$RO_URI" --quiet --eval 'db.orders.insertOne({ _id: 9 })' >/dev/null 2>&1; then echo "a secondary took a write"; fi"#;
    client_answers(
        env,
        "orders",
        CLIENT,
        read,
        &["tea", "true"],
        "read on a secondary",
    )
    .await;
    for member in ["orders-1", "orders-2"] {
        assert_secondary_with(env, member, 1).await;
    }
    // The members authenticate each other with the replica-set key, never the
    // application's password.
    let members = exec(
        env,
        "orders-0",
        &[
            "sh",
            "-c",
            r#"mongosh --quiet --eval 'db.getSiblingDB("admin").auth(process.env.MONGO_INITDB_ROOT_USERNAME, process.env.MONGO_INITDB_ROOT_PASSWORD); print(rs.conf().members.length, rs.conf().settings.chainingAllowed)'; stat -c '%a' /etc/mongodb-keyfile/keyfile"#,
        ],
    )
    .await
    .expect("mongosh");
    assert_eq!(
        members.split_whitespace().collect::<Vec<_>>(),
        ["3", "false", "400"],
        "{members}"
    );
}

/// The feature compatibility version of member `pod`, as the administrator asks it.
const COMPATIBILITY: &str = r#"db.getSiblingDB("admin").auth(process.env.MONGO_INITDB_ROOT_USERNAME, process.env.MONGO_INITDB_ROOT_PASSWORD);
print(db.adminCommand({ getParameter: 1, featureCompatibilityVersion: 1 }).featureCompatibilityVersion.version)"#;

/// Lowered as an upgrade from 5.0 leaves it, the compatibility version is raised to
/// the 6.0 every member runs, with an event.
async fn the_compatibility_version_follows_the_series(env: &Env) {
    // As a set is left after an upgrade from 5.0: its members run 6.0, its data keeps
    // 5.0's formats until the version is raised.
    let lowered = exec(
        env,
        "orders-0",
        &[
            "mongosh",
            "--quiet",
            "--eval",
            r#"db.getSiblingDB("admin").auth(process.env.MONGO_INITDB_ROOT_USERNAME, process.env.MONGO_INITDB_ROOT_PASSWORD);
const r = db.adminCommand({ setFeatureCompatibilityVersion: "5.0" }); if (!r.ok) { throw new Error(r.errmsg); }"#,
        ],
    )
    .await;
    assert!(lowered.is_ok(), "{lowered:?}");
    in_pod_eventually("the compatibility version raised to 6.0", || async {
        let answer = exec(
            env,
            "orders-0",
            &["mongosh", "--quiet", "--eval", COMPATIBILITY],
        )
        .await
        .ok()?;
        (answer.trim() == "6.0").then_some(())
    })
    .await;
    env.events_eventually("Database", "orders", "CompatibilityRaised", |events| {
        events.iter().any(|(_, reason, note)| {
            reason == "CompatibilityRaised" && note.contains("from 5.0 to 6.0")
        })
    })
    .await;
}

/// Scaling to four members and down to one keeps `orders-0` the primary, and every
/// secondary holds the document written before.
async fn scaling_adds_and_removes_members_never_the_primary(env: &Env) {
    for replicas in [4, 2, 1] {
        let db = scale_and_wait_replicated(env, "orders", replicas).await;
        assert_eq!(
            db.status.and_then(|s| s.primary).as_deref(),
            Some("orders-0"),
            "at {replicas}"
        );
        for ordinal in 1..replicas {
            assert_secondary_with(env, &format!("orders-{ordinal}"), 1).await;
        }
        let members = exec(
            env,
            "orders-0",
            &[
                "sh",
                "-c",
                r#"mongosh --quiet --eval 'db.getSiblingDB("admin").auth(process.env.MONGO_INITDB_ROOT_USERNAME, process.env.MONGO_INITDB_ROOT_PASSWORD); print(rs.conf().members.length)'"#,
            ],
        )
        .await
        .expect("mongosh");
        assert_eq!(
            members.trim(),
            replicas.to_string(),
            "members at {replicas}"
        );
    }
    // One member left: the primary, still taking writes with the document.
    let (ok, output) = run_client(env, "orders", CLIENT, &write_document("$URI", 2)).await;
    assert!(ok, "{output}");
    assert_written_on_a_primary(&output, "true");
}

#[tokio::test]
async fn a_lost_mongodb_primary_is_replaced_by_election_and_rejoins_as_a_secondary() {
    let env = three_members_with_document_1().await;

    // The primary's Pod goes, and cannot come back while the node takes no new Pods.
    let elected = lose_the_primary(&env).await;
    // No new Pod can start on the cordoned node: write from a secondary's container.
    write_from(&env, "orders-1", &write_document(
                "mongodb://$DATABASE_APP_USERNAME:$DATABASE_APP_PASSWORD@orders-rw:27017/app?authSource=admin",
                2,
            ), "true").await;

    // The old primary comes back as a secondary with both documents.
    cordon(&env, false).await;
    replicated(&env, "orders").await;
    assert_secondary_with(&env, "orders-0", 2).await;
    assert_primary(&env, &elected).await;
}

#[tokio::test]
async fn a_mongodb_switchover_under_writes_loses_no_acknowledged_write() {
    let env = start().await;
    replica_set(&env, 3).await;
    let writer = testenv::clients::mongodb_writer(45, 1);
    let (output, primary) = switchover_under_writes(&env, CLIENT, &writer, "orders-2").await;
    assert_eq!(primary, "orders-2");

    assert_none_lost(&env, CLIENT, testenv::clients::MONGODB_WRITTEN, &output).await;

    replicated(&env, "orders").await;
    assert_primary(&env, "orders-2").await;
    let annotations = env
        .databases()
        .get("orders")
        .await
        .expect("database")
        .metadata
        .annotations
        .unwrap_or_default();
    assert!(
        !annotations.contains_key(database_api::replication::SWITCHOVER_ANNOTATION),
        "the switchover request is removed once done"
    );
}

#[tokio::test]
async fn a_hung_mongodb_primary_is_replaced_by_election_and_rejoins_once_it_wakes() {
    let env = three_members_with_document_1().await;

    // The server stops answering but its Pod stays: the others stop hearing from it.
    let (pid, elected) = hang_the_primary(&env, "mongod").await;
    let (ok, output) = run_client(&env, "orders", CLIENT, &write_document("$URI", 2)).await;
    assert!(ok, "a write through -rw: {output}");
    assert_written_on_a_primary(&output, "true");

    // Woken, the old primary learns of the new term, steps down and follows.
    wake_server(pid);
    assert_secondary_with(&env, "orders-0", 2).await;
    replicated(&env, "orders").await;
    assert_primary(&env, &elected).await;
}

#[tokio::test]
async fn in_sync_mode_a_killed_mongodb_primary_loses_no_acknowledged_write() {
    let env = start().await;
    create_replicated(
        &env,
        json!({"engine": "mongodb", "version": "6.0", "storage": "1Gi", "replicas": 3,
               "replication": {"mode": "Sync"}}),
    )
    .await;
    let concern = exec(
        &env,
        "orders-0",
        &[
            "sh",
            "-c",
            r#"mongosh --quiet --eval 'db.getSiblingDB("admin").auth(process.env.MONGO_INITDB_ROOT_USERNAME, process.env.MONGO_INITDB_ROOT_PASSWORD); print(db.adminCommand({ getDefaultRWConcern: 1 }).defaultWriteConcern.w)'"#,
        ],
    )
    .await
    .expect("mongosh");
    assert_eq!(concern.trim(), "majority", "writes wait for a majority");

    // The primary is killed with no grace on a cordoned node under a writer.
    let writer = testenv::clients::mongodb_writer(50, 1);
    let (output, _) = kill_the_primary_under_writes(&env, CLIENT, &writer, "orders-0").await;
    replicated(&env, "orders").await;
    assert_none_lost(&env, CLIENT, testenv::clients::MONGODB_WRITTEN, &output).await;
    in_pod_eventually("orders-0 a secondary again", || async {
        exec(&env, "orders-0", &["sh", "-c", MEMBER])
            .await
            .ok()
            .filter(|answer| answer.split_whitespace().next() == Some("SECONDARY"))
    })
    .await;
}

#[tokio::test]
async fn a_controller_killed_while_following_an_election_finishes_it_when_it_is_back() {
    let mut env = start().await;
    controller_killed_mid_failover_finishes_it(
        &mut env,
        json!({"engine": "mongodb", "version": "6.0", "storage": "1Gi", "replicas": 3}),
    )
    .await;
}
