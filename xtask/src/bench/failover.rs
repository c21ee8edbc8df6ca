//! Failover on real servers (the real tier), per engine: a Database of three instances
//! loses its primary's Pod, force-deleted on a cordoned node as when a node dies, while
//! a writer runs through `-rw`. Per trial: the time from the kill to the new primary in
//! status, and how long writes were unavailable (the longest gap between acknowledged
//! writes across the kill); over all trials, the writes acknowledged and those lost.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use database_api::{Database, Phase};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testenv::Options;
use testenv::clients::{self, ClientPod};

use super::cluster::{Bench, NAMESPACE, wait_until};
use super::stats::Summary;

const NAME: &str = "orders";
/// The failover bound the Database is created with (the smallest allowed). A mongodb
/// replica set elects its own primary after its election timeout, also 10 s.
const BOUND_SECONDS: u64 = 10;

/// What differs between engines here.
pub struct EngineCase {
    pub engine: &'static str,
    version: &'static str,
    /// The local image the real node needs.
    image: &'static str,
    /// The image the clients run: the engine's own, with its client.
    client: &'static str,
    writer: fn(u32, u32) -> String,
    written: fn() -> String,
    /// Whether `failoverAfterSeconds` applies (the operator decides the failover).
    operator_fails_over: bool,
}

pub const POSTGRES: EngineCase = EngineCase {
    engine: "postgres",
    version: "17",
    image: "postgres-17",
    client: "postgres:17",
    writer: clients::postgres_writer,
    written: || clients::POSTGRES_WRITTEN.to_owned(),
    operator_fails_over: true,
};
pub const MYSQL: EngineCase = EngineCase {
    engine: "mysql",
    version: "9.7",
    image: "mysql-9",
    client: "mysql:9.7",
    writer: clients::mysql_writer,
    written: clients::mysql_written,
    operator_fails_over: true,
};
pub const MONGODB: EngineCase = EngineCase {
    engine: "mongodb",
    version: "6.0",
    image: "mongo-6.0",
    client: "mongo:6.0",
    writer: clients::mongodb_writer,
    written: || clients::MONGODB_WRITTEN.to_owned(),
    operator_fails_over: false,
};

/// The case of an engine named on the command line.
pub fn case(engine: &str) -> anyhow::Result<&'static EngineCase> {
    match engine {
        "postgres" => Ok(&POSTGRES),
        "mysql" => Ok(&MYSQL),
        "mongodb" => Ok(&MONGODB),
        other => {
            bail!("--failover-engines: unknown engine {other}; use postgres, mysql or mongodb")
        }
    }
}
/// How long each trial's writer runs: the bound, the promotion, and writes after.
const WRITER_SECONDS: u32 = 40;

pub struct Failover {
    pub engine: &'static str,
    pub mode: &'static str,
    pub bound: Duration,
    /// Kill to the new primary in `status.primary`.
    pub to_primary: Summary,
    /// The longest gap between acknowledged writes across the kill.
    pub unavailable: Summary,
    pub acknowledged: usize,
    pub lost: usize,
}

impl Failover {
    pub fn to_json(&self) -> Value {
        json!({
            "engine": self.engine,
            "mode": self.mode,
            "bound_s": self.bound.as_secs(),
            "kill_to_new_primary": self.to_primary.to_json(),
            "writes_unavailable": self.unavailable.to_json(),
            "acknowledged_writes": self.acknowledged,
            "lost_writes": self.lost,
        })
    }
}

/// `trials` failovers of each engine in each mode (`true`: Sync), with the controller
/// binary from `bin_dir`, each on a real node of its own.
pub async fn measure(
    bin_dir: &std::path::Path,
    trials: usize,
    engines: &[&'static EngineCase],
    modes: &[bool],
) -> anyhow::Result<Vec<Failover>> {
    let mut results = Vec::new();
    for case in engines {
        for &sync in modes {
            let bench = Bench::start(Options::real(&[case.image])).await?;
            let _controller = bench.spawn_controller(bin_dir)?;
            results.push(trials_in_mode(&bench, case, trials, sync).await?);
        }
    }
    Ok(results)
}

/// The images the cases need.
pub fn images(engines: &[&EngineCase]) -> Vec<String> {
    engines.iter().map(|c| c.image.to_owned()).collect()
}

async fn trials_in_mode(
    bench: &Bench,
    case: &'static EngineCase,
    trials: usize,
    sync: bool,
) -> anyhow::Result<Failover> {
    let mode = if sync { "Sync" } else { "Async" };
    let mut replication = json!({"mode": mode});
    if case.operator_fails_over {
        replication["failoverAfterSeconds"] = json!(BOUND_SECONDS);
    }
    let db: Database = serde_json::from_value(json!({
        "apiVersion": "mycompany.io/v1", "kind": "Database", "metadata": {"name": NAME},
        "spec": {"engine": case.engine, "version": case.version, "storage": "1Gi",
                 "replicas": 3, "replication": replication},
    }))?;
    bench
        .databases()
        .create(&PostParams::default(), &db)
        .await
        .context("creating the Database")?;
    replicated(bench).await?;
    let (mut to_primary, mut unavailable) = (Vec::new(), Vec::new());
    let (mut acknowledged, mut lost) = (0, 0);
    for trial in 1..=trials {
        let figures = one_failover(bench, case, trial).await?;
        println!(
            "bench: {} failover {trial}/{trials} ({mode}): new primary after {:.1} s, writes unavailable for {:.1} s, {} of {} acknowledged writes lost",
            case.engine,
            figures.to_primary.as_secs_f64(),
            figures.unavailable.as_secs_f64(),
            figures.lost,
            figures.acknowledged
        );
        to_primary.push(figures.to_primary);
        unavailable.push(figures.unavailable);
        acknowledged += figures.acknowledged;
        lost += figures.lost;
    }
    Ok(Failover {
        engine: case.engine,
        mode,
        bound: Duration::from_secs(BOUND_SECONDS),
        to_primary: Summary::of(&to_primary),
        unavailable: Summary::of(&unavailable),
        acknowledged,
        lost,
    })
}

struct Trial {
    to_primary: Duration,
    unavailable: Duration,
    acknowledged: usize,
    lost: usize,
}

/// Each trial's writer writes ids from its own range.
const IDS_PER_TRIAL: u32 = 1_000_000;

async fn one_failover(bench: &Bench, case: &EngineCase, trial: usize) -> anyhow::Result<Trial> {
    let old = primary(bench)
        .await?
        .context("the Database names no primary")?;
    let first = u32::try_from(trial).unwrap_or(0) * IDS_PER_TRIAL;
    let writer = (case.writer)(WRITER_SECONDS, first);
    let write = ClientPod {
        namespace: NAMESPACE,
        db: NAME,
        image: case.client,
        script: &writer,
        more: &[],
        limit: Duration::from_secs(u64::from(WRITER_SECONDS) + 120),
    };
    let kill = kill_primary(bench, &old);
    let (written, killed) = tokio::join!(write.run(&bench.client), kill);
    let (killed_ms, to_primary) = killed?;
    let (ok, output) = written?;
    if !ok {
        bail!("the writer failed: {output}");
    }
    let acks = clients::acknowledged(&output);
    // The gap that spans the kill ends with an acknowledgement after it.
    let Some(gap_ms) = acks
        .windows(2)
        .filter(|pair| pair[1].at_ms > killed_ms)
        .map(|pair| pair[1].at_ms.saturating_sub(pair[0].at_ms))
        .max()
    else {
        bail!("no write was acknowledged both before and after the primary was killed");
    };
    replicated(bench).await?;
    let written = (case.written)();
    let read = ClientPod {
        script: &written,
        limit: Duration::from_secs(120),
        ..write
    };
    let (ok, stored) = read.run(&bench.client).await?;
    if !ok {
        bail!("reading the writes back failed: {stored}");
    }
    Ok(Trial {
        to_primary,
        unavailable: Duration::from_millis(gap_ms),
        acknowledged: acks.len(),
        lost: clients::lost(&acks, &stored).len(),
    })
}

/// While the writer runs, kills the primary `old` as a dead node would lose it and
/// waits for a new one; gives the kill's Unix time in ms and how long the new primary
/// took to appear in status.
async fn kill_primary(bench: &Bench, old: &str) -> anyhow::Result<(u64, Duration)> {
    // Let the writer start and write for a while first.
    tokio::time::sleep(Duration::from_secs(8)).await;
    cordon(bench, true).await?;
    let killed_ms = unix_ms();
    let killed = Instant::now();
    let pods: Api<Pod> = Api::namespaced(bench.client.clone(), NAMESPACE);
    pods.delete(old, &DeleteParams::default().grace_period(0))
        .await
        .context("killing the primary")?;
    wait_until(Duration::from_secs(180), "a new primary", || async {
        primary(bench)
            .await
            .ok()
            .flatten()
            .is_some_and(|p| p != old)
    })
    .await?;
    let to_primary = killed.elapsed();
    cordon(bench, false).await?;
    Ok((killed_ms, to_primary))
}

async fn primary(bench: &Bench) -> anyhow::Result<Option<String>> {
    Ok(bench
        .databases()
        .get(NAME)
        .await?
        .status
        .and_then(|s| s.primary))
}

/// Waits until the Database runs with every replica streaming.
async fn replicated(bench: &Bench) -> anyhow::Result<()> {
    wait_until(
        Duration::from_secs(300),
        "every replica streaming",
        || async {
            bench.databases().get(NAME).await.ok().is_some_and(|d| {
                d.status.is_some_and(|s| {
                    s.phase == Phase::Running
                        && s.conditions
                            .iter()
                            .any(|c| c.type_ == "Replicated" && c.status == "True")
                })
            })
        },
    )
    .await
}

/// Marks the node (un)schedulable, so a killed Pod stays gone as on a dead node.
async fn cordon(bench: &Bench, unschedulable: bool) -> anyhow::Result<()> {
    let nodes: Api<Node> = Api::all(bench.client.clone());
    nodes
        .patch(
            testenv::real::NODE_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": unschedulable}})),
        )
        .await
        .context("cordoning the node")?;
    Ok(())
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or_default()
}
