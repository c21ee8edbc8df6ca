//! Create to StatefulSet and create to Running, seen through watches, for Databases
//! created one at a time and all at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use database_api::{Database, Phase};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, watcher};
use kube::{Client, ResourceExt};

use super::cluster::{Bench, NAMESPACE, wait_until};
use super::stats::Summary;

type Seen = Arc<Mutex<HashMap<String, Instant>>>;

pub struct Latency {
    pub count: usize,
    pub create_call: Summary,
    pub to_statefulset: Summary,
    pub to_running: Summary,
    /// From the StatefulSet reporting every replica ready to the Database showing
    /// Running: the controller's share of create to Running (the rest is the StatefulSet
    /// controller, the scheduler, volume binding and kwok).
    pub ready_to_running: Summary,
    /// From the Database's Pod turning ready to the Database showing Running: the same
    /// share, measured from what the StatefulSet controller counts into its status.
    pub pod_ready_to_running: Summary,
    /// Databases per second from the first create to the last Running.
    pub throughput: f64,
    /// Seconds from the first create to the last Running.
    pub wall_seconds: f64,
}

/// Records when each StatefulSet is first seen and first has every replica ready, and
/// when each Database first shows Running.
pub struct Watches {
    statefulsets: Seen,
    sets_ready: Seen,
    pods_ready: Seen,
    running: Seen,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Watches {
    pub fn start(client: &Client) -> Self {
        let statefulsets: Seen = Arc::default();
        let sets_ready: Seen = Arc::default();
        let pods_ready: Seen = Arc::default();
        let running: Seen = Arc::default();
        let (seen, ready) = (statefulsets.clone(), sets_ready.clone());
        let sets_task = tokio::spawn(for_each_seen(client.clone(), move |set: StatefulSet| {
            first_seen(&seen, set.name_any());
            let wanted = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            if set.status.as_ref().and_then(|s| s.ready_replicas) >= Some(wanted) {
                first_seen(&ready, set.name_any());
            }
        }));
        // A Database's first instance, `<name>-0`: all of a one-instance Database.
        let pods_seen = pods_ready.clone();
        let pods_task = tokio::spawn(for_each_seen(client.clone(), move |pod: Pod| {
            let is_ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if let (true, Some(database)) = (is_ready, pod.name_any().strip_suffix("-0")) {
                first_seen(&pods_seen, database.to_owned());
            }
        }));
        let seen = running.clone();
        let dbs_task = tokio::spawn(for_each_seen(client.clone(), move |db: Database| {
            if db
                .status
                .as_ref()
                .is_some_and(|s| s.phase == Phase::Running)
            {
                first_seen(&seen, db.name_any());
            }
        }));
        Self {
            statefulsets,
            sets_ready,
            pods_ready,
            running,
            tasks: vec![sets_task, pods_task, dbs_task],
        }
    }

    /// How many of `names` were seen. Called every few milliseconds while thousands of
    /// Databases converge, so the name-by-name scan runs only once enough are seen.
    fn count(map: &Seen, names: &[String]) -> usize {
        map.lock().map_or(0, |m| {
            if m.len() < names.len() {
                return 0;
            }
            names.iter().filter(|n| m.contains_key(*n)).count()
        })
    }

    /// How many names starting with `prefix` were seen, for progress lines.
    fn count_prefixed(map: &Seen, prefix: &str) -> usize {
        map.lock()
            .map_or(0, |m| m.keys().filter(|k| k.starts_with(prefix)).count())
    }

    /// For each created name, from when it shows in `from` to when it shows in `to`.
    fn between(from: &Seen, to: &Seen, created: &[(String, Instant, Duration)]) -> Vec<Duration> {
        let (Ok(from), Ok(to)) = (from.lock(), to.lock()) else {
            return Vec::new();
        };
        created
            .iter()
            .filter_map(|(name, ..)| {
                Some(to.get(name)?.saturating_duration_since(*from.get(name)?))
            })
            .collect()
    }

    fn delays(map: &Seen, created: &[(String, Instant, Duration)]) -> Vec<Duration> {
        let Ok(map) = map.lock() else {
            return Vec::new();
        };
        created
            .iter()
            .filter_map(|(name, at, _)| {
                map.get(name)
                    .map(|seen| seen.saturating_duration_since(*at))
            })
            .collect()
    }
}

/// Hands every object the bench namespace's watch of `K` reports to `each`, until the
/// task is aborted. A watch error (e.g. 410 Gone under load) is retried by the backoff.
async fn for_each_seen<K>(client: Client, mut each: impl FnMut(K))
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + 'static,
{
    let api: Api<K> = Api::namespaced(client, NAMESPACE);
    let mut stream = std::pin::pin!(
        watcher(api, watcher::Config::default())
            .default_backoff()
            .applied_objects()
    );
    while let Some(item) = stream.next().await {
        if let Ok(object) = item {
            each(object);
        }
    }
}

/// Notes when `name` is first seen in `map`.
fn first_seen(map: &Seen, name: String) {
    if let Ok(mut map) = map.lock() {
        map.entry(name).or_insert_with(Instant::now);
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Creates `count` Databases (`parallel` requests at a time) and waits until all run.
pub async fn measure(
    bench: &Bench,
    watches: &Watches,
    prefix: &str,
    count: usize,
    parallel: usize,
    timeout: Duration,
) -> anyhow::Result<Latency> {
    let started = Instant::now();
    let progress = (count >= 100).then(|| {
        let (sets, ready, running) = (
            watches.statefulsets.clone(),
            watches.sets_ready.clone(),
            watches.running.clone(),
        );
        let prefix = format!("{prefix}-");
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(10)).await;
                println!(
                    "bench:   {:>4.0} s: {} StatefulSets, {} of them ready, {} Running of {count}",
                    started.elapsed().as_secs_f64(),
                    Watches::count_prefixed(&sets, &prefix),
                    Watches::count_prefixed(&ready, &prefix),
                    Watches::count_prefixed(&running, &prefix),
                );
            }
        })
    });
    let _stop_progress = progress.map(AbortOnDrop);
    let created = bench.create_many(prefix, count, parallel).await?;
    let names: Vec<String> = created.iter().map(|(n, ..)| n.clone()).collect();
    wait_until(timeout, &format!("{count} Databases Running"), || async {
        Watches::count(&watches.running, &names) == count
    })
    .await?;
    let wall = started.elapsed();
    let calls: Vec<Duration> = created.iter().map(|(_, _, latency)| *latency).collect();
    #[allow(clippy::cast_precision_loss)]
    let throughput = count as f64 / wall.as_secs_f64();
    Ok(Latency {
        count,
        create_call: Summary::of(&calls),
        to_statefulset: Summary::of(&Watches::delays(&watches.statefulsets, &created)),
        to_running: Summary::of(&Watches::delays(&watches.running, &created)),
        ready_to_running: Summary::of(&Watches::between(
            &watches.sets_ready,
            &watches.running,
            &created,
        )),
        pod_ready_to_running: Summary::of(&Watches::between(
            &watches.pods_ready,
            &watches.running,
            &created,
        )),
        throughput,
        wall_seconds: wall.as_secs_f64(),
    })
}

/// Stops a background task when the measurement it reports on ends, however it ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
