//! Steps of the real tier's scenarios: Pods that really run, database servers that
//! really answer. A client Pod with a Database's connection Secret, a command in an
//! instance's container, an instance restarted or hung, the node cordoned.

use std::future::Future;
use std::time::Duration;

use database_api::Database;
use database_api::replication::InstanceStatus;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use super::cluster::Cluster;
use super::kubectl;
use super::wait::{Wait, eventually};
use crate::clients::ClientPod;

/// How long a Database may take to reach Running on the real tier: mysql's first
/// initialisation alone takes half a minute on 2 cores.
pub const REAL_WAIT: Duration = Duration::from_secs(240);

/// The restricted Pod Security level on the test's namespace, as production namespaces
/// have it.
pub async fn enforce_restricted(cluster: &Cluster) {
    let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
    let patch =
        json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}});
    namespaces
        .patch(
            &cluster.namespace,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .expect("namespace labelled");
}

/// Waits until Database `name` is Running and returns it.
pub async fn wait_running(cluster: &Cluster, name: &str) -> Database {
    cluster.wait_running(name, REAL_WAIT).await
}

/// Reads Database `name` and checks that its status names `primary` and that every
/// other instance reports its lag as the engine measures it (`lag`, in `unit`).
pub async fn assert_primary_and_lag(
    cluster: &Cluster,
    name: &str,
    primary: &str,
    unit: &str,
    lag: impl Fn(&InstanceStatus) -> bool,
) {
    let db = cluster.databases().get(name).await.expect("database");
    let status = db.status.expect("status");
    assert_eq!(status.primary.as_deref(), Some(primary));
    let others: Vec<&InstanceStatus> = status
        .instances
        .iter()
        .filter(|i| i.name != primary)
        .collect();
    assert!(
        !others.is_empty() && others.iter().all(|i| lag(i)),
        "lag in {unit}: {:?}",
        status.instances
    );
}

/// Runs `script` as [`run_client`] does and checks that it succeeds and prints the
/// words `expected`, in order (`what` says what they prove).
pub async fn client_answers(
    cluster: &Cluster,
    db: &str,
    image: &str,
    script: &str,
    expected: &[&str],
    what: &str,
) {
    let (ok, output) = run_client(cluster, db, image, script).await;
    assert!(ok, "{what}: {output}");
    assert_eq!(
        output.split_whitespace().collect::<Vec<_>>(),
        expected,
        "{what}: {output}"
    );
}

/// Runs `script` with `sh -c` in a one-off Pod of `image` (as uid 999, within the
/// restricted level) whose environment holds every key of the connection Secret of
/// Database `db` in upper case (`URI`, `HOST`, `PORT`, `USERNAME`, `PASSWORD`,
/// `DATABASE`, `RO_URI`). Returns whether it succeeded and its output.
pub async fn run_client(cluster: &Cluster, db: &str, image: &str, script: &str) -> (bool, String) {
    run_client_with(cluster, db, image, script, &[]).await
}

/// [`run_client`] with more variables, each `(NAME, secret, key)`.
pub async fn run_client_with(
    cluster: &Cluster,
    db: &str,
    image: &str,
    script: &str,
    more: &[(&str, &str, &str)],
) -> (bool, String) {
    ClientPod {
        namespace: &cluster.namespace,
        db,
        image,
        script,
        more,
        limit: Duration::from_secs(120),
    }
    .run(&cluster.client)
    .await
    .expect("the client Pod ran")
}

/// Runs `command` in the database container of Pod `pod` through the API server and
/// the kubelet, and returns its standard output, or its error output on failure.
pub async fn exec(cluster: &Cluster, pod: &str, command: &[&str]) -> Result<String, String> {
    kubectl::exec(&cluster.plane, &cluster.namespace, pod, "database", command).await
}

/// Waits up to [`REAL_WAIT`] until `command`, run in the database container of Pod
/// `pod`, prints `expected` word by word (white space aside): how a test waits for an
/// instance to reach a state its own server reports. `what` names that state.
pub async fn wait_for_answer(
    cluster: &Cluster,
    pod: &str,
    command: &[&str],
    expected: &[&str],
    what: &str,
) {
    in_pod_eventually(what, || async {
        exec(cluster, pod, command)
            .await
            .ok()
            .filter(|answer| answer.split_whitespace().eq(expected.iter().copied()))
    })
    .await;
}

/// Polls `check`, which runs a command in a database container, once a second for up
/// to [`REAL_WAIT`]: a database client starting costs up to a CPU second (mongosh), so
/// polling as often as an API read would take the CPU the servers under test need.
pub async fn in_pod_eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    Wait::new(what, REAL_WAIT)
        .every(Duration::from_secs(1))
        .until_some(check)
        .await
}

/// Deletes Pod `pod` and waits until its replacement is Ready (a new uid).
pub async fn restart_pod(cluster: &Cluster, pod: &str) {
    let pods: Api<Pod> = cluster.api();
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
pub async fn hang_server(cluster: &Cluster, pod: &str, process: &str) -> u32 {
    let pods: Api<Pod> = cluster.api();
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

/// Lets the process [`hang_server`] stopped run again (SIGCONT, from the host).
pub fn wake_server(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-CONT", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "SIGCONT to {pid}");
}

/// Marks the test node (un)schedulable, as a node drain would.
pub async fn cordon(cluster: &Cluster, unschedulable: bool) {
    let nodes: Api<Node> = Api::all(cluster.client.clone());
    nodes
        .patch(
            crate::real::NODE_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": unschedulable}})),
        )
        .await
        .expect("node patched");
}
