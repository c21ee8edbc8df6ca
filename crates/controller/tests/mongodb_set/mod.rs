//! What the mongodb replica-set tests share: a set of members on real servers, a write
//! through `-rw`, and what a member holds.

use serde_json::json;
use testenv::Options;
use testenv::toolkit::failover::create_replicated;
use testenv::toolkit::real_tier::{enforce_restricted, run_client, wait_for_answer};

use crate::common::Env;

pub const CLIENT: &str = "mongo:6.0";

pub async fn start() -> Env {
    let env = Env::start(Options::real(&["mongo-6.0"])).await;
    enforce_restricted(&env).await;
    env
}

/// Database `orders`: a replica set of `replicas` members, every secondary in step.
pub async fn replica_set(env: &Env, replicas: i32) {
    create_replicated(
        env,
        json!({"engine": "mongodb", "version": "6.0", "storage": "1Gi", "replicas": replicas}),
    )
    .await;
}

/// A set of three members, with document 1 written through `-rw`.
pub async fn three_members_with_document_1() -> Env {
    let env = start().await;
    replica_set(&env, 3).await;
    let (ok, output) = run_client(&env, "orders", CLIENT, &write_document("$URI", 1)).await;
    assert!(ok, "{output}");
    env
}

/// Inserts document `id` through `-rw`, retrying once a second for up to 40 attempts
/// (an election takes about ten seconds), and prints `written on primary=<true|false>`
/// with what the answering server says of itself.
pub fn write_document(uri: &str, id: u32) -> String {
    format!(
        r#"for i in $(seq 40); do if answer=$(mongosh "{uri}" --quiet --eval 'db.orders.insertOne({{ _id: {id}, item: "tea" }}); print(db.hello().isWritablePrimary)' 2>/dev/null); then echo "written on primary=$answer"; exit 0; fi; sleep 1; done; exit 1"#
    )
}

/// What member `pod` says of itself, as the administrator: its state and how many
/// documents `app.orders` holds on it.
pub const MEMBER: &str = r#"mongosh --quiet --eval '
db.getSiblingDB("admin").auth(process.env.MONGO_INITDB_ROOT_USERNAME, process.env.MONGO_INITDB_ROOT_PASSWORD);
db.getMongo().setReadPref("secondaryPreferred");
print(db.hello().secondary ? "SECONDARY" : db.hello().isWritablePrimary ? "PRIMARY" : "OTHER");
print(db.getSiblingDB("app").orders.countDocuments({}))'"#;

/// Member `pod` is a secondary holding `documents` documents.
pub async fn assert_secondary_with(env: &Env, pod: &str, documents: usize) {
    let what = format!("{pod} a secondary with {documents} documents");
    let expected = ["SECONDARY", &documents.to_string()];
    wait_for_answer(env, pod, &["sh", "-c", MEMBER], &expected, &what).await;
}
