//! The safety rules on real database servers: the connection host reaches one instance,
//! retained data comes back with working credentials, a postgres major change never
//! reaches the data, and the administrator is a user of its own.

mod common;

use common::Env;
use database_api::Phase;
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;
use testenv::Options;
use testenv::toolkit::real_tier::{
    enforce_restricted, exec, run_client, run_client_with, wait_running,
};
use testenv::toolkit::wait::{WAIT, eventually, gone};

const WRITE: &str = r#"psql "$URI" -v ON_ERROR_STOP=1 -c "CREATE TABLE orders (id int PRIMARY KEY, item text); INSERT INTO orders VALUES (1, 'tea')""#;
const READ: &str = r#"psql "$URI" -v ON_ERROR_STOP=1 -tAc "SELECT item FROM orders WHERE id = 1""#;

async fn start(images: &[&str]) -> Env {
    let env = Env::start(Options::real(images)).await;
    enforce_restricted(&env).await;
    env
}

async fn read_tea(env: &Env, client_image: &str) {
    let (ok, output) = run_client(env, "orders", client_image, READ).await;
    assert!(ok, "{output}");
    assert_eq!(output.trim(), "tea");
}

#[tokio::test]
async fn the_connection_host_reaches_the_same_instance_every_time() {
    // Two independent instances: a host that resolved to both would find the row on
    // one of them only, about every other time.
    let env = start(&["postgres-17"]).await;
    env.create_database(
        "orders",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2}),
    )
    .await;
    wait_running(&env, "orders").await;
    let (ok, output) = run_client(&env, "orders", "postgres:17", WRITE).await;
    assert!(ok, "{output}");
    let (ok, output) = run_client(
        &env,
        "orders",
        "postgres:17",
        &format!("for i in 1 2 3 4 5 6; do {READ}; done"),
    )
    .await;
    assert!(ok, "{output}");
    assert_eq!(
        output.split_whitespace().collect::<Vec<_>>(),
        ["tea"; 6],
        "{output}"
    );
}

#[tokio::test]
async fn a_retained_database_comes_back_with_its_rows_and_working_credentials() {
    let env = start(&["postgres-17"]).await;
    let spec = json!({"engine": "postgres", "version": "17", "storage": "1Gi"});
    env.create_database("orders", spec.clone()).await;
    wait_running(&env, "orders").await;
    let (ok, output) = run_client(&env, "orders", "postgres:17", WRITE).await;
    assert!(ok, "{output}");

    env.databases()
        .delete("orders", &DeleteParams::default())
        .await
        .expect("delete accepted");
    gone(&env.databases(), "orders", WAIT).await;
    let sets: Api<StatefulSet> = env.api();
    gone(&sets, "orders", std::time::Duration::from_secs(120)).await;

    env.create_database("orders", spec).await;
    wait_running(&env, "orders").await;
    read_tea(&env, "postgres:17").await;
}

#[tokio::test]
async fn a_postgres_major_change_without_a_backup_destination_is_refused_and_the_data_keeps_its_server()
 {
    let env = start(&["postgres-15", "postgres-17"]).await;
    env.create_database(
        "orders",
        json!({"engine": "postgres", "version": "15", "storage": "1Gi"}),
    )
    .await;
    wait_running(&env, "orders").await;
    let (ok, output) = run_client(&env, "orders", "postgres:15", WRITE).await;
    assert!(ok, "{output}");

    // No webhook here: the controller alone must refuse it.
    env.patch_database("orders", json!({"spec": {"version": "17"}}))
        .await;
    let db = eventually(WAIT, "the change refused", || async {
        env.databases()
            .get("orders")
            .await
            .ok()
            .filter(|d| d.status.as_ref().is_some_and(|s| s.phase == Phase::Failed))
    })
    .await;
    let message = db.status.and_then(|s| s.message).unwrap_or_default();
    assert!(
        message.starts_with("spec.backup.destination: must be set to move postgres from 15 to 17"),
        "{message}"
    );
    let sets: Api<StatefulSet> = env.api();
    let set = sets.get("orders").await.expect("StatefulSet");
    let image = set
        .spec
        .and_then(|s| s.template.spec)
        .map(|p| p.containers[0].image.clone());
    assert_eq!(
        image,
        Some(Some("postgres:15".to_owned())),
        "the instances keep their version"
    );
    let version = exec(
        &env,
        "orders-0",
        &["psql", "-U", "postgres", "-tAc", "SHOW server_version"],
    )
    .await
    .expect("psql in the instance");
    assert!(version.trim().starts_with("15."), "{version}");
    read_tea(&env, "postgres:15").await;
}

#[tokio::test]
async fn the_administrator_has_a_password_of_its_own_and_applications_never_see_it() {
    let env = start(&["postgres-17"]).await;
    env.create_database(
        "orders",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi"}),
    )
    .await;
    wait_running(&env, "orders").await;
    let script = r#"set -e
[ "$ADMIN_PASSWORD" != "$PASSWORD" ]
PGPASSWORD="$ADMIN_PASSWORD" psql -h "$HOST" -U "$ADMIN_USERNAME" -d postgres -tAc "SELECT rolsuper FROM pg_roles WHERE rolname = current_user"
if PGPASSWORD="$PASSWORD" psql -h "$HOST" -U "$ADMIN_USERNAME" -d postgres -c "SELECT 1" 2>/dev/null; then echo "the application password opens the administrator"; exit 1; fi"#;
    let (ok, output) = run_client_with(
        &env,
        "orders",
        "postgres:17",
        script,
        &[
            ("ADMIN_USERNAME", "orders-credentials", "admin-username"),
            ("ADMIN_PASSWORD", "orders-credentials", "admin-password"),
        ],
    )
    .await;
    assert!(ok, "{output}");
    assert_eq!(output.trim(), "t", "the administrator is the superuser");
}
