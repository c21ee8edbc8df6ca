//! Faults survived: a panicking reconcile, a controller SIGKILLed at random moments, an
//! API server restart with a compacted etcd (watches resume with 410 Gone).

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{CONTROLLER_USER, Env, NAMESPACE, Setup};
use database_api::{Database, Phase};
use database_controller::context::Settings;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Secret, Service};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use testenv::Options;
use testenv::process::Process;
use testenv::toolkit::fixtures;
use testenv::toolkit::operator::controller_args;
use testenv::toolkit::wait::{WAIT, Wait, eventually, statefulset_with_replicas};

#[tokio::test]
async fn a_panic_in_one_reconcile_does_not_stop_the_controller() {
    let settings = Settings {
        before_reconcile: Some(Arc::new(|db: &Database| {
            assert!(db.name_any() != "boom", "injected fault");
        })),
        ..Settings::default()
    };
    let env = Env::start(Setup {
        options: Options::default(),
        settings,
    })
    .await;
    env.create_database(
        "boom",
        json!({"engine": "postgres", "version": "16", "storage": "1Gi"}),
    )
    .await;
    env.create_database(
        "fine",
        json!({"engine": "postgres", "version": "16", "storage": "1Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    eventually(WAIT, "fine reconciled", || async {
        sets.get_opt("fine").await.ok().flatten()
    })
    .await;
    eventually(WAIT, "panics counted", || async {
        env.metrics
            .encode()
            .contains("kind=\"panic\"")
            .then_some(())
    })
    .await;
    // Still alive: a Database created after the panics is reconciled too.
    env.create_database(
        "later",
        json!({"engine": "mysql", "version": "8.4", "storage": "1Gi"}),
    )
    .await;
    eventually(WAIT, "later reconciled", || async {
        sets.get_opt("later").await.ok().flatten()
    })
    .await;
    assert!(sets.get_opt("boom").await.expect("get").is_none());
}

/// A tiny deterministic generator, so a failing run can be repeated from its seed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

/// The controller binary as a process, its log in `dir`.
fn spawn_controller(dir: &Path, kubeconfig: &Path) -> std::io::Result<Process> {
    Process::spawn(
        "controller",
        Path::new(env!("CARGO_BIN_EXE_controller")),
        &controller_args(kubeconfig),
        dir,
    )
}

/// Credentials passwords seen so far per Database uid, each with the Secret it was
/// seen in: one password each, or the fault is found.
type Passwords = Arc<Mutex<HashMap<String, BTreeSet<(String, String)>>>>;

async fn sample_passwords(secrets: Api<Secret>, seen: Passwords) {
    loop {
        if let Ok(list) = secrets
            .list(&ListParams::default().labels("app.kubernetes.io/managed-by=database-operator"))
            .await
        {
            // Credentials kept with retained data have no owner until a Database of
            // the same name takes them back.
            for secret in list
                .items
                .iter()
                .filter(|s| s.name_any().ends_with("-credentials"))
            {
                let Some(owner) = secret.owner_references().first().map(|o| o.uid.clone()) else {
                    continue;
                };
                let password = secret
                    .data
                    .as_ref()
                    .and_then(|d| d.get("password"))
                    .map(|p| String::from_utf8_lossy(&p.0).into_owned());
                // The Secret's uid and creation time beside it: whether a second password
                // came from a Secret made again or one rewritten in place.
                let made = format!(
                    "Secret {} created {}",
                    secret.uid().unwrap_or_default(),
                    secret
                        .creation_timestamp()
                        .map(|t| t.0.to_string())
                        .unwrap_or_default()
                );
                if let (Some(password), Ok(mut map)) = (password, seen.lock()) {
                    map.entry(owner).or_default().insert((password, made));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The fewest SIGKILLs a chaos run must inject.
const MIN_KILLS: u32 = 10;

// One scenario, read top to bottom: faults, operations, then every check.
#[allow(clippy::too_many_lines)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_converges_after_sigkills_during_a_hundred_operations() {
    let mut env = Env::start(Options::full()).await;
    env.stop_controller().await;
    let kubeconfig = env
        .plane
        .kubeconfig_for(CONTROLLER_USER, &["system:masters"])
        .expect("kubeconfig");
    // FAULT_SEED repeats a failing run; FAULT_OPERATIONS makes a longer one.
    let seed = testenv::count_from_env("FAULT_SEED", u64::from(std::process::id()) ^ 0x5eed);
    let operations = testenv::count_from_env("FAULT_OPERATIONS", 100);
    eprintln!("chaos seed {seed}, {operations} operations");
    let mut rng = Rng(seed);
    let first = spawn_controller(env.plane.dir(), &kubeconfig).expect("controller starts");
    let controller = Arc::new(Mutex::new(Some(first)));
    let passwords: Passwords = Arc::default();
    let sampler = tokio::spawn(sample_passwords(env.api::<Secret>(), passwords.clone()));

    // The killer: SIGKILL at a random moment every 0.3-2 s, restart at once.
    let kills = Arc::new(Mutex::new(0u32));
    let killer = {
        let (controller, kills) = (controller.clone(), kills.clone());
        let dir = env.plane.dir().to_path_buf();
        let kubeconfig = kubeconfig.clone();
        let mut rng = Rng(seed.rotate_left(17));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(300 + rng.below(1700))).await;
                if let Ok(mut slot) = controller.lock() {
                    drop(slot.take()); // Process::drop sends SIGKILL
                    *slot = spawn_controller(&dir, &kubeconfig).ok();
                }
                if let Ok(mut n) = kills.lock() {
                    *n += 1;
                }
            }
        })
    };

    let dbs = env.databases();
    let mut live: BTreeMap<String, i32> = BTreeMap::new();
    let mut deleted = Vec::new();
    let (mut created_count, mut updated_count, mut deleted_count) = (0, 0, 0);
    // At least MIN_KILLS faults land, however fast the operations go on a busy machine;
    // the bound keeps a killer that stopped from making the loop endless.
    let kills_so_far = || kills.lock().map_or(0, |n| *n);
    let mut i = 0;
    while (i < operations || kills_so_far() < MIN_KILLS) && i < operations * 3 {
        i += 1;
        let op = if live.is_empty() { 0 } else { rng.below(3) };
        let pick = |rng: &mut Rng, live: &BTreeMap<String, i32>| {
            let keys: Vec<&String> = live.keys().collect();
            keys[usize::try_from(rng.below(keys.len() as u64)).unwrap_or(0)].clone()
        };
        match op {
            0 => {
                let name = format!("chaos-{i}");
                env.create_database(
                    &name,
                    json!({"engine": "mysql", "version": "8.4", "storage": "1Gi"}),
                )
                .await;
                live.insert(name, 1);
                created_count += 1;
            }
            1 => {
                let name = pick(&mut rng, &live);
                let replicas = i32::try_from(1 + rng.below(3)).unwrap_or(1);
                env.patch_database(&name, json!({"spec": {"replicas": replicas}}))
                    .await;
                live.insert(name, replicas);
                updated_count += 1;
            }
            _ => {
                let name = pick(&mut rng, &live);
                dbs.delete(&name, &DeleteParams::default())
                    .await
                    .expect("deleted");
                live.remove(&name);
                deleted.push(name);
                deleted_count += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.below(250))).await;
    }
    killer.abort();
    let kill_count = kills.lock().map_or(0, |n| *n);
    eprintln!(
        "{created_count} creates, {updated_count} updates, {deleted_count} deletes, {kill_count} SIGKILLs"
    );
    assert!(
        kill_count >= MIN_KILLS,
        "too few faults injected: {kill_count}"
    );

    // Converge: every deleted Database gone, every live one Running at its replicas.
    let started = Instant::now();
    Wait::new("convergence", Duration::from_secs(180))
        .every(Duration::from_millis(500))
        .until_ok(|| async {
            let list = dbs.list(&ListParams::default()).await.expect("list");
            let names: BTreeSet<String> = list.items.iter().map(ResourceExt::name_any).collect();
            let done = deleted.iter().all(|n| !names.contains(n))
                && live.iter().all(|(name, replicas)| {
                    list.items.iter().any(|d| {
                        d.name_any() == *name
                            && d.status.as_ref().is_some_and(|s| {
                                s.phase == Phase::Running
                                    && s.replicas == *replicas
                                    && s.observed_generation == d.metadata.generation
                            })
                    })
                });
            if done {
                return Ok(());
            }
            let state: Vec<_> = list
                .items
                .iter()
                .map(|d| {
                    let status = d.status.as_ref().map(|s| (s.phase, s.replicas));
                    (d.name_any(), status, d.finalizers().to_vec())
                })
                .collect();
            Err(format!("not converged: {state:?}"))
        })
        .await;
    eprintln!(
        "converged {:.1?} after the last operation",
        started.elapsed()
    );

    // Nothing lost, nothing duplicated, nothing orphaned.
    let list = dbs.list(&ListParams::default()).await.expect("list");
    let uids: BTreeSet<String> = list.items.iter().filter_map(ResourceExt::uid).collect();
    let owned = ListParams::default().labels("app.kubernetes.io/managed-by=database-operator");
    for db in &list.items {
        let name = db.name_any();
        let sets: Api<StatefulSet> = env.api();
        assert_eq!(
            sets.get(&name)
                .await
                .expect("sts")
                .spec
                .and_then(|s| s.replicas),
            live.get(&name).copied()
        );
        let secrets: Api<Secret> = env.api();
        let credentials = secrets
            .get(&format!("{name}-credentials"))
            .await
            .expect("credentials kept");
        let connection = secrets
            .get(&format!("{name}-connection"))
            .await
            .expect("connection");
        let password = |s: &Secret| {
            s.data
                .as_ref()
                .and_then(|d| d.get("password"))
                .map(|p| p.0.clone())
        };
        assert_eq!(
            password(&credentials),
            password(&connection),
            "{name}: connection Secret out of step"
        );
    }
    let observed_passwords = passwords.lock().map(|m| m.clone()).unwrap_or_default();
    // Only the Databases still here: a pass on a Database just deleted (a watch a
    // moment behind, after a restart) may make its objects again, which garbage
    // collection removes, as the orphan check below sees.
    for (owner, seen) in &observed_passwords {
        if !uids.contains(owner) && seen.len() > 1 {
            let secrets: Vec<&String> = seen.iter().map(|(_, made)| made).collect();
            eprintln!("the deleted Database {owner} had its credentials made again: {secrets:?}");
        }
    }
    for (owner, seen) in observed_passwords.iter().filter(|(o, _)| uids.contains(*o)) {
        let passwords: BTreeSet<&String> = seen.iter().map(|(password, _)| password).collect();
        let secrets: Vec<&String> = seen.iter().map(|(_, made)| made).collect();
        assert_eq!(
            passwords.len(),
            1,
            "credentials of {owner} were regenerated: {} passwords, in {secrets:?}",
            passwords.len()
        );
    }
    sampler.abort();
    // Orphans: kube-controller-manager collects the objects of deleted Databases.
    eventually(
        Duration::from_secs(120),
        "no orphaned owned object",
        || async {
            let sets: Api<StatefulSet> = env.api();
            let services: Api<Service> = env.api();
            let secrets: Api<Secret> = env.api();
            let mut owners: Vec<String> = Vec::new();
            for list in [
                sets.list(&owned)
                    .await
                    .ok()?
                    .items
                    .iter()
                    .map(|o| o.owner_references().to_vec())
                    .collect::<Vec<_>>(),
                services
                    .list(&owned)
                    .await
                    .ok()?
                    .items
                    .iter()
                    .map(|o| o.owner_references().to_vec())
                    .collect(),
                secrets
                    .list(&owned)
                    .await
                    .ok()?
                    .items
                    .iter()
                    .filter(|s| {
                        !s.annotations()
                            .contains_key("mycompany.io/retained-version")
                    })
                    .map(|o| o.owner_references().to_vec())
                    .collect(),
            ] {
                for refs in list {
                    owners.push(refs.first().map(|r| r.uid.clone()).unwrap_or_default());
                }
            }
            owners.iter().all(|uid| uids.contains(uid)).then_some(())
        },
    )
    .await;
    let _ = NAMESPACE;
    drop(controller.lock().ok().and_then(|mut c| c.take()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_api_server_restart_and_compaction_the_controller_relists_and_misses_nothing() {
    let mut env = Env::start(Options::default()).await;
    env.create_database(
        "before",
        json!({"engine": "postgres", "version": "16", "storage": "1Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    eventually(WAIT, "before reconciled", || async {
        sets.get_opt("before").await.ok().flatten()
    })
    .await;

    // Change the cluster through a second API server while the controller's is down.
    let second = env
        .plane
        .start_second_apiserver()
        .await
        .expect("second API server");
    env.plane.stop_apiserver();
    let other = testenv::client_from(&second).await.expect("client");
    let other_dbs: Api<Database> = Api::namespaced(other.clone(), NAMESPACE);
    let db = fixtures::database(
        "during",
        &json!({"engine": "mysql", "version": "8.4", "storage": "1Gi"}),
    );
    other_dbs
        .create(&kube::api::PostParams::default(), &db)
        .await
        .expect("created while the first API server was down");
    other_dbs
        .patch(
            "before",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("updated");
    // Compact: the controller's watches cannot resume from their old resourceVersion.
    let revision = testenv::etcd::compact(env.plane.etcd_url())
        .await
        .expect("compacted");
    eprintln!("etcd compacted at revision {revision}");
    env.plane.start_apiserver().await.expect("API server back");
    env.plane.stop_component("kube-apiserver-2");

    eventually(Duration::from_secs(60), "during reconciled", || async {
        sets.get_opt("during").await.ok().flatten()
    })
    .await;
    statefulset_with_replicas(&sets, "before", 3, Duration::from_secs(60)).await;
}
