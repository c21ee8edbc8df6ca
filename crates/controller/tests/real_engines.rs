//! The operator against real database servers on the real tier (a real kubelet,
//! containerd, CNI, kube-proxy and CoreDNS, ext4 disks, and the engine images built by
//! `cargo xtask images build`): each engine reaches Running through its own readiness
//! probe, applications connect with the connection Secret through the Service name, and
//! data outlives the Pod.

mod common;

use std::time::Instant;

use common::Env;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;

use serde_json::json;
use testenv::Options;
use testenv::clients::MYSQL_FROM_URI;
use testenv::toolkit::real_tier::{
    REAL_WAIT, enforce_restricted, exec, restart_pod, run_client, wait_running,
};
use testenv::toolkit::wait::eventually;

/// One engine's image and how a client writes and reads a row with the connection URI.
struct Engine {
    spec: serde_json::Value,
    image: &'static str,
    client_image: &'static str,
    write: String,
    read: String,
    /// Proves the connection Secret's user owns its database and nothing more; prints
    /// `confined` last.
    confined: String,
}

const POSTGRES_WRITE: &str = r#"psql "$URI" -v ON_ERROR_STOP=1 -c "CREATE TABLE orders (id int PRIMARY KEY, item text); INSERT INTO orders VALUES (1, 'tea')""#;
const POSTGRES_CONFINED: &str = r#"set -e
[ "$(psql "$URI" -tAc "SELECT rolsuper OR rolcreaterole OR rolcreatedb FROM pg_roles WHERE rolname = current_user")" = f ] || { echo "a privileged role"; exit 1; }
if psql "$URI" -c "CREATE ROLE intruder" 2>/dev/null; then echo "could create a role"; exit 1; fi
[ "$(psql "$URI" -tAc "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = current_database()")" = "$USERNAME" ] || { echo "not the owner of its database"; exit 1; }
echo confined"#;
const MYSQL_CONFINED: &str = r#"grants=$(sql "SHOW GRANTS"); echo "$grants"
others=$(echo "$grants" | grep -v -e 'GRANT USAGE ON \*\.\*' -e "ON \`$database\`\.\*") && { echo "more rights: $others"; exit 1; }
if sql "CREATE DATABASE intruder" 2>/dev/null; then echo "could create a database"; exit 1; fi
echo confined"#;
const MONGODB_CONFINED: &str = r#"mongosh "$URI" --quiet --eval '
const roles = db.runCommand({ connectionStatus: 1 }).authInfo.authenticatedUserRoles;
if (JSON.stringify(roles) !== JSON.stringify([{ role: "readWrite", db: db.getName() }])) throw new Error("roles: " + JSON.stringify(roles));
let refused = false;
try { db.getSiblingDB("admin").createUser({ user: "intruder", pwd: "x", roles: [] }); } catch (e) { refused = true; }
if (!refused) throw new Error("could create a user");
print("confined")'"#;

/// The row read back by a workload that uses nothing but the Secret projected as the
/// Service Binding specification describes: one file per key under
/// `$SERVICE_BINDING_ROOT/<binding name>`; and through `ro-uri`, which with one
/// instance is an alias of `-rw`, itself an alias of the instance's name.
const POSTGRES_READ_THROUGH_BINDING: &str = r#"set -e
b="$SERVICE_BINDING_ROOT/orders"
[ "$(cat "$b/type")" = postgresql ] || { echo "binding type: $(cat "$b/type")"; exit 1; }
[ "$(cat "$b/provider")" = mycompany.io ] || { echo "binding provider: $(cat "$b/provider")"; exit 1; }
[ "$(psql "$RO_URI" -tAc "SELECT item FROM orders WHERE id = 1")" = tea ] || { echo "no row through ro-uri"; exit 1; }
PGPASSWORD="$(cat "$b/password")" psql -h "$(cat "$b/host")" -p "$(cat "$b/port")" -U "$(cat "$b/username")" -d "$(cat "$b/database")" -v ON_ERROR_STOP=1 -tAc "SELECT item FROM orders WHERE id = 1""#;

fn postgres() -> Engine {
    Engine {
        spec: json!({"engine": "postgres", "version": "17", "storage": "1Gi"}),
        image: "postgres-17",
        client_image: "postgres:17",
        write: POSTGRES_WRITE.to_owned(),
        read: POSTGRES_READ_THROUGH_BINDING.to_owned(),
        confined: POSTGRES_CONFINED.to_owned(),
    }
}

async fn start(engine: &Engine) -> Env {
    let env = Env::start(Options::real(&[engine.image])).await;
    enforce_restricted(&env).await;
    env
}

/// Creates Database `orders`, waits for Running, writes a row through the connection
/// URI from a client Pod, restarts the instance and reads the row back.
async fn keeps_a_row_across_a_restart(engine: Engine) -> Env {
    let env = start(&engine).await;
    let started = Instant::now();
    env.create_database("orders", engine.spec.clone()).await;
    let running = wait_running(&env, "orders").await;
    let binding = running.status.and_then(|s| s.binding).map(|b| b.name);
    assert_eq!(binding.as_deref(), Some("orders-connection"));
    eprintln!(
        "{}: create to Running on a real node in {:.1?}",
        engine.spec["engine"],
        started.elapsed()
    );
    let (ok, output) = run_client(&env, "orders", engine.client_image, &engine.write).await;
    assert!(ok, "writing through the connection URI failed: {output}");
    let (ok, output) = run_client(&env, "orders", engine.client_image, &engine.confined).await;
    assert!(
        ok && output.trim_end().ends_with("confined"),
        "the application user has more than its own database: {output}"
    );

    restart_pod(&env, "orders-0").await;
    wait_running(&env, "orders").await;
    let (ok, output) = run_client(&env, "orders", engine.client_image, &engine.read).await;
    assert!(ok, "reading through the connection URI failed: {output}");
    assert_eq!(output.trim(), "tea", "the row written before the restart");
    env
}

#[tokio::test]
async fn postgres_serves_the_connection_uri_and_keeps_rows_across_a_restart() {
    keeps_a_row_across_a_restart(postgres()).await;
}

#[tokio::test]
async fn mysql_starts_on_a_fresh_ext4_volume_and_keeps_rows_across_a_restart() {
    let write = format!(
        "{MYSQL_FROM_URI}; sql \"CREATE TABLE orders (id int PRIMARY KEY, item text); INSERT INTO orders VALUES (1, 'tea')\""
    );
    let read = format!("{MYSQL_FROM_URI}; sql \"SELECT item FROM orders WHERE id = 1\"");
    let confined = format!("{MYSQL_FROM_URI}\n{MYSQL_CONFINED}");
    let env = keeps_a_row_across_a_restart(Engine {
        spec: json!({"engine": "mysql", "version": "9.7", "storage": "1Gi"}),
        image: "mysql-9",
        client_image: "mysql:9.7",
        write,
        read,
        confined,
    })
    .await;
    if env.plane.is_attached() {
        // Another cluster's volumes need not be filesystems of their own.
        return;
    }
    // The volume's root is an ext4 filesystem's root, with the lost+found folder that
    // makes mysqld refuse to initialise there; the data lives beside it.
    let listing = exec(&env, "orders-0", &["ls", "-a", "/var/lib/mysql"])
        .await
        .expect("listing the volume");
    let entries: Vec<&str> = listing.lines().collect();
    assert!(entries.contains(&"lost+found"), "{listing}");
    assert!(entries.contains(&"data"), "{listing}");
}

#[tokio::test]
async fn mongodb_serves_the_connection_uri_and_keeps_documents_across_a_restart() {
    keeps_a_row_across_a_restart(Engine {
        spec: json!({"engine": "mongodb", "version": "6.0", "storage": "1Gi"}),
        image: "mongo-6.0",
        client_image: "mongo:6.0",
        write: r#"mongosh "$URI" --quiet --eval 'db.orders.insertOne({_id: 1, item: "tea"})'"#
            .to_owned(),
        read: r#"mongosh "$URI" --quiet --eval 'print(db.orders.findOne({_id: 1}).item)'"#
            .to_owned(),
        confined: MONGODB_CONFINED.to_owned(),
    })
    .await;
}

#[tokio::test]
async fn the_server_runs_as_uid_999_on_a_read_only_root_under_restricted_pod_security() {
    let engine = postgres();
    let env = start(&engine).await;
    env.create_database("orders", engine.spec.clone()).await;
    wait_running(&env, "orders").await;
    let uid = exec(&env, "orders-0", &["id", "-u"])
        .await
        .expect("id runs");
    assert_eq!(uid.trim(), "999");
    let server = exec(
        &env,
        "orders-0",
        &[
            "sh",
            "-c",
            "ps -o user= -p 1 2>/dev/null || stat -c %u /proc/1",
        ],
    )
    .await
    .expect("the server's user");
    assert!(
        ["postgres", "999"].contains(&server.trim()),
        "PID 1 runs as {server}"
    );
    let write = exec(&env, "orders-0", &["touch", "/probe"]).await;
    let error = write.expect_err("the root filesystem must refuse writes");
    assert!(error.contains("Read-only file system"), "{error}");
}

#[tokio::test]
async fn grown_storage_reaches_the_server_and_the_rows_stay() {
    let engine = postgres();
    let env = start(&engine).await;
    env.create_database("orders", engine.spec.clone()).await;
    wait_running(&env, "orders").await;
    let (ok, output) = run_client(&env, "orders", engine.client_image, &engine.write).await;
    assert!(ok, "{output}");
    let size = || async {
        let text = exec(
            &env,
            "orders-0",
            &["df", "-B1", "--output=size", "/var/lib/postgresql/data"],
        )
        .await
        .expect("df runs");
        text.lines()
            .last()
            .and_then(|l| l.trim().parse::<u64>().ok())
            .expect("a size")
    };
    let before = size().await;

    env.patch_database("orders", json!({"spec": {"storage": "2Gi"}}))
        .await;
    let claims: Api<PersistentVolumeClaim> = env.api();
    eventually(REAL_WAIT, "the claim asks for 2Gi", || async {
        let claim = claims.get("data-orders-0").await.ok()?;
        let requested = claim.spec?.resources?.requests?.get("storage")?.0.clone();
        (requested == "2Gi").then_some(())
    })
    .await;
    // These disks grow offline, like a CSI driver without online expansion: the new size
    // reaches the filesystem when the instance restarts.
    restart_pod(&env, "orders-0").await;
    wait_running(&env, "orders").await;
    let after = size().await;
    eprintln!("filesystem size seen by the server: {before} -> {after} bytes");
    assert!(after > before + (512 << 20), "{before} -> {after}");
    let (ok, output) = run_client(&env, "orders", engine.client_image, &engine.read).await;
    assert!(ok, "{output}");
    assert_eq!(output.trim(), "tea");
}
