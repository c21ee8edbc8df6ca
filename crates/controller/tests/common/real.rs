//! Helpers for the real tier: real Pods, real database servers.

use std::time::Duration;

use database_api::{Database, Phase};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::{Env, NAMESPACE, eventually};

/// How long a Database may take to reach Running on the real tier: mysql's first
/// initialisation alone takes half a minute on 2 cores.
pub const REAL_WAIT: Duration = Duration::from_secs(240);

/// The restricted Pod Security level on the test namespace, as production namespaces have it.
pub async fn enforce_restricted(env: &Env) {
    let namespaces: Api<Namespace> = Api::all(env.client.clone());
    let patch =
        json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}});
    namespaces
        .patch(NAMESPACE, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("namespace labelled");
}

/// Waits until Database `name` is Running and returns it.
pub async fn wait_running(env: &Env, name: &str) -> Database {
    let what = format!("Database {name} Running");
    eventually(REAL_WAIT, &what, || async {
        env.databases()
            .get(name)
            .await
            .ok()
            .filter(|d| d.status.as_ref().is_some_and(|s| s.phase == Phase::Running))
    })
    .await
}

/// Runs `script` with `sh -c` in a one-off Pod of `image` (as uid 999, within the
/// restricted level) whose environment holds every key of the connection Secret of
/// Database `db` in upper case (`URI`, `HOST`, `PORT`, `USERNAME`, `PASSWORD`,
/// `DATABASE`, `RO_URI`). Returns whether it succeeded and its output.
pub async fn run_client(env: &Env, db: &str, image: &str, script: &str) -> (bool, String) {
    run_client_with(env, db, image, script, &[]).await
}

/// [`run_client`] with more variables, each `(NAME, secret, key)`.
pub async fn run_client_with(
    env: &Env,
    db: &str,
    image: &str,
    script: &str,
    more: &[(&str, &str, &str)],
) -> (bool, String) {
    testenv::clients::ClientPod {
        namespace: NAMESPACE,
        db,
        image,
        script,
        more,
        limit: Duration::from_secs(120),
    }
    .run(&env.client)
    .await
    .expect("the client Pod ran")
}

/// Runs `command` in the database container of Pod `pod` through the API server and
/// the kubelet, and returns its standard output, or its error output on failure.
pub async fn exec(env: &Env, pod: &str, command: &[&str]) -> Result<String, String> {
    let mut kubectl = tokio::process::Command::from(env.plane.kubectl().expect("kubectl"));
    kubectl
        .args(["exec", "-n", NAMESPACE, pod, "-c", "database", "--"])
        .args(command);
    let output = kubectl.output().await.expect("kubectl runs");
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// Deletes Pod `pod` and waits until its replacement is Ready (a new uid).
pub async fn restart_pod(env: &Env, pod: &str) {
    let pods: Api<Pod> = env.api();
    let old = pods.get(pod).await.expect("pod").uid();
    pods.delete(pod, &DeleteParams::default())
        .await
        .expect("pod deleted");
    let what = format!("Pod {pod} back and Ready");
    eventually(REAL_WAIT, &what, || async {
        pods.get(pod).await.ok().filter(|p| {
            p.uid() != old
                && p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
    })
    .await;
}

/// Stops (SIGSTOP, from the host) the main `process` of Pod `pod`, as a hung server: it
/// keeps its port and its open connections but accepts nothing new, so its readiness
/// probe fails while its liveness probe (a TCP connect, which the kernel still accepts)
/// passes. Returns the host's process id.
pub async fn hang_server(env: &Env, pod: &str, process: &str) -> u32 {
    let pods: Api<Pod> = env.api();
    let uid = pods.get(pod).await.expect("pod").uid().expect("uid");
    let in_pod = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .is_ok_and(|c| c.contains(&format!("pod{uid}")))
    };
    let comm = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|c| c.trim().to_owned())
            .unwrap_or_default()
    };
    let parent = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit(')')
                    .next()?
                    .split_whitespace()
                    .nth(1)
                    .map(str::to_owned)
            })
            .unwrap_or_default()
    };
    let main = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .find(|pid| in_pod(pid) && comm(pid) == process && comm(&parent(pid)) != process)
        .expect("the Pod's main process on this host");
    let status = std::process::Command::new("kill")
        .args(["-STOP", &main])
        .status()
        .expect("kill runs");
    assert!(status.success(), "SIGSTOP to {main}");
    main.parse().expect("a pid")
}

/// The mysql client takes no URI: see [`testenv::clients::MYSQL_FROM_URI`].
#[allow(unused_imports)]
pub use testenv::clients::MYSQL_FROM_URI;

/// Waits until the status shows every replica streaming.
#[allow(dead_code)]
pub async fn replicated(env: &Env, name: &str) -> Database {
    eventually(REAL_WAIT, "Replicated=True", || async {
        env.databases().get(name).await.ok().filter(|d| {
            d.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == "Replicated" && c.status == "True")
            })
        })
    })
    .await
}

/// Marks the test node (un)schedulable, as a node drain would.
#[allow(dead_code)]
pub async fn cordon(env: &Env, unschedulable: bool) {
    let nodes: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(env.client.clone());
    nodes
        .patch(
            testenv::real::NODE_NAME,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"unschedulable": unschedulable}})),
        )
        .await
        .expect("node patched");
}

/// The status' primary once it differs from `old`.
#[allow(dead_code)]
pub async fn new_primary(env: &Env, name: &str, old: &str) -> String {
    eventually(REAL_WAIT, "a new primary", || async {
        env.databases()
            .get(name)
            .await
            .ok()
            .and_then(|d| d.status?.primary)
            .filter(|p| p != old)
    })
    .await
}

/// Scales Database `name` to `replicas` and waits until that many instances are ready
/// and replicated (a single instance has nothing to replicate).
#[allow(dead_code)]
pub async fn scale_and_wait_replicated(env: &Env, name: &str, replicas: i32) -> Database {
    env.databases()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await
        .expect("scaled");
    let count = usize::try_from(replicas).unwrap_or(0);
    let done = |d: &Database| {
        d.status.as_ref().is_some_and(|s| {
            s.replicas == replicas
                && s.instances.len() == count
                && s.conditions.iter().any(|c| {
                    c.type_ == "Replicated"
                        && (c.status == "True" || (replicas == 1 && c.reason == "SingleInstance"))
                })
        })
    };
    // Each added instance copies the primary and starts in turn: allow for two.
    let limit = REAL_WAIT * 2;
    let deadline = tokio::time::Instant::now() + limit;
    let mut last = None;
    loop {
        if let Ok(db) = env.databases().get(name).await {
            if done(&db) {
                return db;
            }
            last = db.status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {replicas} instances, replicated; last status: {last:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Creates Database `orders` with `spec` and waits until it runs with every replica
/// streaming.
#[allow(dead_code)]
pub async fn create_replicated(env: &Env, spec: serde_json::Value) {
    env.create("orders", spec).await;
    wait_running(env, "orders").await;
    replicated(env, "orders").await;
}

/// Creates Database `orders` with `spec` (more than one instance), kills its primary's
/// Pod on a cordoned node, and kills the controller the moment a new primary is named
/// in the topology, before it does anything else. Once the controller is back, the
/// change must be finished: that instance the primary in status, the only one with the
/// primary role, and the only Pod behind `-rw`.
#[allow(dead_code)]
pub async fn controller_killed_mid_failover_finishes_it(env: &mut Env, spec: serde_json::Value) {
    create_replicated(env, spec).await;
    cordon(env, true).await;
    let pods: Api<Pod> = env.api();
    pods.delete("orders-0", &DeleteParams::default().grace_period(0))
        .await
        .expect("primary killed");
    let maps: Api<k8s_openapi::api::core::v1::ConfigMap> = env.api();
    let named = eventually(REAL_WAIT, "a new primary named", || async {
        maps.get("orders-topology")
            .await
            .ok()
            .and_then(|c| c.data?.get("primary").cloned())
            .filter(|p| p != "orders-0")
    })
    .await;
    env.kill_controller();
    tokio::time::sleep(Duration::from_secs(3)).await;
    env.start_controller().await;
    assert_eq!(new_primary(env, "orders", "orders-0").await, named);
    cordon(env, false).await;
    let db = replicated(env, "orders").await;
    let status = db.status.expect("status");
    assert_eq!(status.primary.as_deref(), Some(named.as_str()));
    let primaries = status
        .instances
        .iter()
        .filter(|i| i.role == database_api::replication::Role::Primary)
        .count();
    assert_eq!(primaries, 1, "{:?}", status.instances);
    let labelled = pods
        .list(&kube::api::ListParams::default().labels("mycompany.io/role=primary"))
        .await
        .expect("pods");
    let behind_rw: Vec<String> = labelled.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(behind_rw, [named], "one Pod behind -rw");
}

/// Runs `writer` in a client Pod of `client` against Database `orders` and, 8 s into
/// it, asks for a switchover to `target`. Returns the writer's output once it is done,
/// and the primary status named once it changed from `orders-0`.
#[allow(dead_code)]
pub async fn switchover_under_writes(
    env: &Env,
    client: &str,
    writer: &str,
    target: &str,
) -> (String, String) {
    let switch = async {
        tokio::time::sleep(Duration::from_secs(8)).await;
        env.databases()
            .patch(
                "orders",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {
                    database_api::replication::SWITCHOVER_ANNOTATION: target}}})),
            )
            .await
            .expect("switchover asked");
        let started = std::time::Instant::now();
        let primary = new_primary(env, "orders", "orders-0").await;
        eprintln!("switchover to {primary} in {:.1?}", started.elapsed());
        primary
    };
    let ((ok, output), primary) = tokio::join!(run_client(env, "orders", client, writer), switch);
    assert!(ok, "{output}");
    (output, primary)
}

/// Deletes the primary's Pod `orders-0` (gracefully) on a cordoned node, so it cannot
/// come back, and returns the new primary once status names it.
#[allow(dead_code)]
pub async fn lose_the_primary(env: &Env) -> String {
    cordon(env, true).await;
    let pods: Api<Pod> = env.api();
    pods.delete("orders-0", &DeleteParams::default())
        .await
        .expect("primary deleted");
    let started = std::time::Instant::now();
    let promoted = new_primary(env, "orders", "orders-0").await;
    eprintln!(
        "new primary {promoted} in {:.1?} after the primary's Pod went",
        started.elapsed()
    );
    promoted
}

/// Every write the writer's `output` acknowledged is among the ids the client script
/// `written` prints for Database `orders`, and the writer wrote a fair number.
#[allow(dead_code)]
pub async fn assert_none_lost(env: &Env, client: &str, written: &str, output: &str) {
    let acknowledged = testenv::clients::acknowledged(output);
    let (ok, stored) = run_client(env, "orders", client, written).await;
    assert!(ok, "{stored}");
    let lost = testenv::clients::lost(&acknowledged, &stored);
    eprintln!(
        "{} writes acknowledged, {} lost",
        acknowledged.len(),
        lost.len()
    );
    assert!(acknowledged.len() > 50, "the writer hardly wrote: {output}");
    assert_eq!(lost, Vec::<u32>::new(), "acknowledged writes lost");
}

/// Runs `writer` in a client Pod of `client` against Database `orders` and, 8 s into
/// it, kills the primary's Pod `old` (force-deleted, as a crashed node loses it) while
/// the node takes no new Pods; once status names another primary the node takes Pods
/// again. Returns the writer's output and the time from the kill to the new primary.
#[allow(dead_code)]
pub async fn kill_the_primary_under_writes(
    env: &Env,
    client: &str,
    writer: &str,
    old: &str,
) -> (String, Duration) {
    let kill = async {
        tokio::time::sleep(Duration::from_secs(8)).await;
        cordon(env, true).await;
        let pods: Api<Pod> = env.api();
        pods.delete(old, &DeleteParams::default().grace_period(0))
            .await
            .expect("primary killed");
        let started = std::time::Instant::now();
        let primary = new_primary(env, "orders", old).await;
        let took = started.elapsed();
        eprintln!("new primary {primary} in {took:.1?} after the kill");
        cordon(env, false).await;
        took
    };
    let ((ok, output), took) = tokio::join!(run_client(env, "orders", client, writer), kill);
    assert!(ok, "{output}");
    (output, took)
}
