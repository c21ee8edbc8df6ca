//! Backup and restore throughput on real servers (the real tier): a postgres Database is
//! filled with a generated table of a known size, backed up to a real S3-compatible
//! store (versitygw over TLS on the node's address), and restored into a new Database.
//! Per direction: the dump's size, the wall time from asking to done, and MiB/s.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use database_api::backup::{BackupPhase, DatabaseBackup};
use database_api::{Database, Phase};
use database_backup::s3::{Bucket, BucketConfig, Credentials};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use testenv::Options;
use testenv::clients::ClientPod;
use testenv::object_store::{NODE_ADDRESS, ObjectStore};

use super::cluster::{Bench, NAMESPACE};

/// The images the part needs.
pub const IMAGES: [&str; 2] = ["postgres-17", "operator"];
const BUCKET: &str = "bench";

pub struct Throughput {
    /// Bytes of the dump (uncompressed) and of the stored object.
    pub dump_bytes: u64,
    pub stored_bytes: u64,
    /// The table's size in the database.
    pub table_bytes: u64,
    pub backup: Duration,
    pub restore: Duration,
}

impl Throughput {
    pub fn to_json(&self) -> Value {
        json!({
            "table_bytes": self.table_bytes,
            "dump_bytes": self.dump_bytes,
            "stored_bytes": self.stored_bytes,
            "backup_s": self.backup.as_secs_f64(),
            "restore_s": self.restore.as_secs_f64(),
            "backup_mib_per_s": mib_per_s(self.dump_bytes, self.backup),
            "restore_mib_per_s": mib_per_s(self.dump_bytes, self.restore),
        })
    }
}

/// Bytes in MiB.
pub fn mib(bytes: u64) -> f64 {
    f64::from(u32::try_from(bytes >> 10).unwrap_or(u32::MAX)) / 1024.0
}

pub fn mib_per_s(bytes: u64, took: Duration) -> f64 {
    mib(bytes) / took.as_secs_f64().max(0.001)
}

/// Fills a Database with about `mib` MiB, backs it up and restores it.
pub async fn measure(bin_dir: &std::path::Path, mib: u64) -> anyhow::Result<Throughput> {
    let bench = Bench::start(Options::real(&IMAGES)).await?;
    let _controller = bench.spawn_controller(bin_dir)?;
    let store = ObjectStore::start(NODE_ADDRESS).await?;
    prepare_store(&bench, &store).await?;
    let storage = format!("{}Gi", (mib * 3).div_ceil(1024).max(1));
    create(
        &bench,
        "source",
        json!({"engine": "postgres", "version": "17", "storage": storage}),
    )
    .await?;
    running(&bench, "source").await?;
    // Rows of about 250 bytes: an id, a hash and filler, as a table of orders would be.
    let rows = mib * 1024 * 1024 / 250;
    let table_bytes = fill(&bench, rows, mib).await?;
    let backup = back_up(&bench, &store).await?;
    let restore_took = restore(&bench, &storage, rows).await?;
    Ok(Throughput {
        dump_bytes: backup.dump_bytes,
        stored_bytes: backup.stored_bytes,
        table_bytes,
        backup: backup.took,
        restore: restore_took,
    })
}

/// Writes `rows` rows into the source's `orders` table and gives the table's size in
/// bytes (0 when psql's answer does not parse).
async fn fill(bench: &Bench, rows: u64, mib: u64) -> anyhow::Result<u64> {
    let fill = format!(
        r#"psql "$URI" -v ON_ERROR_STOP=1 -qc "CREATE TABLE orders (id bigint PRIMARY KEY, hash text, filler text); INSERT INTO orders SELECT g, md5(g::text), repeat(md5((g * 7)::text), 6) FROM generate_series(1, {rows}) g" && psql "$URI" -tAc "SELECT pg_total_relation_size('orders')""#
    );
    println!("bench: backup: writing {rows} rows (about {mib} MiB)");
    let (ok, output) = client(bench, "source", &fill, Duration::from_secs(1800)).await?;
    if !ok {
        bail!("filling the table failed: {output}");
    }
    Ok(output
        .trim()
        .lines()
        .last()
        .and_then(|l| l.trim().parse().ok())
        .unwrap_or(0))
}

/// What a finished backup measured.
struct BackedUp {
    dump_bytes: u64,
    stored_bytes: u64,
    took: Duration,
}

/// Backs the source up into the store and times it from asking to done.
async fn back_up(bench: &Bench, store: &ObjectStore) -> anyhow::Result<BackedUp> {
    let started = Instant::now();
    let backup: DatabaseBackup = serde_json::from_value(json!({
        "apiVersion": "mycompany.io/v1", "kind": "DatabaseBackup",
        "metadata": {"name": "throughput"},
        "spec": {"database": "source", "destination": destination(store)},
    }))?;
    let backups: Api<DatabaseBackup> = Api::namespaced(bench.client.clone(), NAMESPACE);
    backups.create(&PostParams::default(), &backup).await?;
    let status = until(Duration::from_secs(3600), "the backup", || async {
        let status = backups.get("throughput").await.ok()?.status?;
        matches!(status.phase, BackupPhase::Succeeded | BackupPhase::Failed).then_some(status)
    })
    .await?;
    let took = started.elapsed();
    if status.phase != BackupPhase::Succeeded {
        bail!("the backup failed: {}", status.error.unwrap_or_default());
    }
    let dump_bytes = status
        .dump_bytes
        .and_then(|b| u64::try_from(b).ok())
        .unwrap_or(0);
    let stored_bytes = status
        .size_bytes
        .and_then(|b| u64::try_from(b).ok())
        .unwrap_or(0);
    println!("bench: backup: {dump_bytes} bytes of dump, {stored_bytes} stored, in {took:.1?}");
    Ok(BackedUp {
        dump_bytes,
        stored_bytes,
        took,
    })
}

/// Restores the backup into a new Database, checks it holds the `rows` rows and gives
/// how long the restore took.
async fn restore(bench: &Bench, storage: &str, rows: u64) -> anyhow::Result<Duration> {
    create(
        bench,
        "restored",
        json!({"engine": "postgres", "version": "17", "storage": storage,
               "restoreFrom": {"backup": "throughput"}}),
    )
    .await?;
    // The restore is timed from its Job's start: the new Database's own start is not
    // the restore's.
    let databases: Api<Database> = Api::namespaced(bench.client.clone(), NAMESPACE);
    until(Duration::from_secs(600), "the restore to start", || async {
        let db = databases.get("restored").await.ok()?;
        db.status?
            .conditions
            .iter()
            .any(|c| c.type_ == "Restored" && c.reason == "Restoring")
            .then_some(())
    })
    .await?;
    let restoring = Instant::now();
    running(bench, "restored").await?;
    let took = restoring.elapsed();
    let count = r#"psql "$URI" -tAc "SELECT count(*) FROM orders""#;
    let (ok, counted) = client(bench, "restored", count, Duration::from_secs(300)).await?;
    if !ok || counted.trim().lines().last().map(str::trim) != Some(rows.to_string().as_str()) {
        bail!("the restored table does not hold the {rows} rows: {counted}");
    }
    println!("bench: restore: {took:.1?}");
    Ok(took)
}

async fn prepare_store(bench: &Bench, store: &ObjectStore) -> anyhow::Result<()> {
    Bucket::new(BucketConfig {
        endpoint: store.endpoint.clone(),
        bucket: BUCKET.to_owned(),
        region: "us-east-1".to_owned(),
        credentials: Credentials {
            access_key_id: store.access_key_id.clone(),
            secret_access_key: store.secret_access_key.clone(),
        },
        ca_pem: Some(store.ca_pem.clone().into_bytes()),
    })?
    .create()
    .await?;
    let secrets: Api<Secret> = Api::namespaced(bench.client.clone(), NAMESPACE);
    for secret in store.secrets(NAMESPACE) {
        secrets.create(&PostParams::default(), &secret).await?;
    }
    Ok(())
}

fn destination(store: &ObjectStore) -> Value {
    store.destination(BUCKET, "")
}

async fn create(bench: &Bench, name: &str, spec: Value) -> anyhow::Result<()> {
    let db: Database = serde_json::from_value(json!({
        "apiVersion": "mycompany.io/v1", "kind": "Database", "metadata": {"name": name},
        "spec": spec,
    }))?;
    bench
        .databases()
        .create(&PostParams::default(), &db)
        .await
        .with_context(|| format!("creating Database {name}"))?;
    Ok(())
}

/// Polls `check` every 200 ms until it gives a value, or fails after `timeout`.
async fn until<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        if Instant::now() > deadline {
            bail!("{what} did not happen within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn running(bench: &Bench, name: &str) -> anyhow::Result<()> {
    until(
        Duration::from_secs(3600),
        &format!("Database {name} Running"),
        || async {
            let db = bench.databases().get(name).await.ok()?;
            (db.status?.phase == Phase::Running).then_some(())
        },
    )
    .await
}

async fn client(
    bench: &Bench,
    db: &str,
    script: &str,
    limit: Duration,
) -> anyhow::Result<(bool, String)> {
    ClientPod {
        namespace: NAMESPACE,
        db,
        image: "postgres:17",
        script,
        more: &[],
        limit,
    }
    .run(&bench.client)
    .await
    .map_err(anyhow::Error::from)
}
