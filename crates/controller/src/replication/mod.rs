//! Replication between a Database's instances: one primary, the others streaming from
//! it. For postgres and mysql the operator runs the replication and the failover; a
//! mongodb replica set elects its own primary, and the operator initiates it, changes
//! its members and follows its elections (see [`replica_set`]). Each pass reads
//! the instances (their Pods, and each engine's own answer through `exec`), plans the
//! next steps purely (see [`plan`]) and carries them out: role labels the `-rw` and `-ro`
//! Services select, failover, switchover, re-pointing, synchronous mode. The topology
//! ConfigMap names the primary; it is written before anything else changes, so a pass
//! cut short is finished by the next.

mod gtid;
pub(crate) mod mongodb;
mod mysql;
pub mod outage;
pub mod plan;
mod postgres;
mod replica_set;
mod report;
mod steps;

use std::time::Duration;

use database_api::conditions::reason;
use database_api::replication::{InstanceStatus, ReplicationMode, SWITCHOVER_ANNOTATION};
use database_api::{Database, Engine};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, ObjectList, Patch, PatchParams};
use serde_json::json;

use self::plan::{Instance, Wanted};
use crate::context::Context;
use crate::error::Error;
use crate::resources::meta::{PRIMARY, ROLE_LABEL, pod_name, selector_string};
use crate::resources::replication_init::{MEMBERS_SPAN_KEY, PRIMARY_KEY};
use operator_runtime::events::EventType;

/// How often a replicated Database is looked at again, for its replicas' lag and its
/// primary's health, when nothing else brings it back.
pub const REFRESH: Duration = Duration::from_secs(10);
/// How soon a pass that changed something is followed by the next.
const AFTER_CHANGES: Duration = Duration::from_secs(1);

/// What a pass found and did, for the status and the events.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    pub primary: Option<String>,
    pub instances: Vec<InstanceStatus>,
    /// The Replicated condition: status, reason, message.
    pub replicated: Option<(bool, &'static str, String)>,
    /// Significant changes, as (type, reason, note).
    pub events: Vec<(EventType, &'static str, String)>,
    /// When to look again at the latest.
    pub requeue: Option<Duration>,
    /// Role labels (Pod, role) the caller writes alongside the status, for a Database
    /// whose replication the operator does not run: the only steps of its pass, which
    /// nothing in the status waits for.
    pub labels: Vec<(String, Option<&'static str>)>,
}

/// The primary the topology names, or the first instance for a Database that has none.
pub fn named_primary(db: &Database, topology: Option<&ConfigMap>) -> String {
    topology
        .and_then(|c| c.data.as_ref())
        .and_then(|d| d.get(PRIMARY_KEY))
        .filter(|p| !p.is_empty())
        .cloned()
        .unwrap_or_else(|| pod_name(db, 0))
}

/// How many instances the replica set's members span, as the topology last recorded.
pub fn members_span(topology: Option<&ConfigMap>) -> Option<i32> {
    topology
        .and_then(|c| c.data.as_ref())
        .and_then(|d| d.get(MEMBERS_SPAN_KEY))
        .and_then(|span| span.parse().ok())
}

/// The ordinal in a Pod name `<db>-<n>`.
pub fn ordinal(pod: &str) -> Option<i32> {
    pod.rsplit_once('-')?.1.parse().ok()
}

/// The primary the topology names, and how many instances a mongodb replica set's
/// members span.
#[derive(Debug, Clone, Copy)]
pub struct Topology<'a> {
    pub named: &'a str,
    pub members_span: Option<i32>,
}

/// The Database's Pods as the pass knows them.
#[derive(Debug, Clone, Copy)]
pub enum Pods<'a> {
    /// Listed with the pass's other reads.
    Listed(&'a [Pod]),
    /// Not listed yet: the pass lists them.
    Unlisted,
    /// The StatefulSet reports none, so there are none to list.
    None,
}

/// One pass. `replicated` says whether the operator runs this Database's replication;
/// when it does not (another engine, or credentials from before replication existed),
/// only the named primary gets the primary label, so `-rw` reaches one instance.
pub async fn reconcile(
    ctx: &Context,
    db: &Database,
    namespace: &str,
    topology: Topology<'_>,
    replicated: bool,
    known: Pods<'_>,
) -> Result<Report, Error> {
    let Topology {
        named,
        members_span,
    } = topology;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let exec_pods: Api<Pod> = Api::namespaced(ctx.exec_client().clone(), namespace);
    let unlisted;
    let listed = match known {
        Pods::Listed(listed) => listed,
        Pods::Unlisted => {
            unlisted = database_pods(&pods, db).await?.items;
            &unlisted[..]
        }
        Pods::None => &[],
    };
    let mut instances: Vec<Instance> = listed.iter().filter_map(observe_pod).collect();
    instances.sort_by_key(|i| i.ordinal);
    if !replicated {
        let mut report = report::unasked(named, &instances);
        report.labels = primary_labels(named, &instances);
        return Ok(report);
    }
    if let Some(primary) = instances.iter_mut().find(|i| i.name == named) {
        let database = format!("{namespace}/{}", db.name_any());
        let observed = (!primary.ready).then_some(primary.unready_since).flatten();
        primary.unready_since = ctx.outages.note(&database, named, observed);
    }
    ask_engines(db.spec.engine, &exec_pods, &mut instances).await;
    let wanted = wanted_of(db);
    let now = Timestamp::now();
    let steps = match db.spec.engine {
        Engine::Mongodb => replica_set::plan(named, members_span, &instances, &wanted),
        Engine::Postgres | Engine::Mysql => plan::plan(named, &instances, &wanted, now),
    };
    let mut report = report::of(named, &instances, &wanted, now);
    if let Some(refusal) = switchover_refusal(&wanted, &instances) {
        report.events.push(refusal);
    }
    // Labels here may move `-rw` after an election or a failover: they go out at once,
    // not after the pass's other steps.
    steps::execute(ctx, db, &pods, &exec_pods, &steps, &mut report).await?;
    if !steps.is_empty() {
        // What this pass changed (a promotion, a re-pointed replica) shows in the
        // instances' answers at once: the next pass labels and reports it.
        report.requeue = Some(AFTER_CHANGES);
    }
    Ok(report)
}

/// Writes the role labels a pass left to its caller (see [`Report::labels`]), one
/// after the other as the plan ordered them.
pub async fn write_labels(
    ctx: &Context,
    namespace: &str,
    labels: &[(String, Option<&'static str>)],
) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    for (pod, role) in labels {
        steps::label(ctx, &pods, pod, *role).await?;
    }
    Ok(())
}

/// The Pods carrying `db`'s labels: its StatefulSet's instances, and also the Pods of
/// its backup and restore Jobs, which callers tell apart themselves.
///
/// Read from the API server's cache, which holds at least every Pod change the watch
/// that started this pass brought: a fresh read makes the server wait until its cache
/// catches up with etcd, which took up to 80 ms with the server idle. A change the cache
/// had not seen yet comes as a watch event, which brings another pass.
pub(crate) async fn database_pods(
    pods: &Api<Pod>,
    db: &Database,
) -> Result<ObjectList<Pod>, Error> {
    pods.list(
        &ListParams::default()
            .labels(&selector_string(db))
            .match_any(),
    )
    .await
    .map_err(|source| Error::Observe {
        kind: "Pod".into(),
        name: selector_string(db),
        source,
    })
}

/// The relabelling of a Database whose replication the operator does not run: the
/// named primary alone carries the primary label, on running instances.
fn primary_labels(named: &str, instances: &[Instance]) -> Vec<(String, Option<&'static str>)> {
    instances
        .iter()
        .filter_map(|i| {
            let wanted = (i.name == named).then_some(PRIMARY);
            (i.running() && i.label.as_deref() != wanted).then(|| (i.name.clone(), wanted))
        })
        .collect()
}

/// Asks every running instance's engine, all at once, for its state; an instance that
/// does not answer keeps no engine state. A mongodb set is asked as a whole: its
/// primary knows what the others are.
async fn ask_engines(engine: Engine, exec_pods: &Api<Pod>, instances: &mut [Instance]) {
    let running: Vec<String> = instances
        .iter()
        .filter(|i| i.running())
        .map(|i| i.name.clone())
        .collect();
    let answers = match engine {
        Engine::Mongodb => mongodb::states(exec_pods, &running).await,
        Engine::Postgres | Engine::Mysql => {
            let asked = running.iter().map(|pod| async move {
                match engine {
                    Engine::Mysql => mysql::state(exec_pods, pod).await.ok(),
                    _ => postgres::state(exec_pods, pod).await.ok(),
                }
            });
            futures::future::join_all(asked).await
        }
    };
    let mut answers = answers.into_iter();
    for instance in instances.iter_mut().filter(|i| i.running()) {
        instance.engine = answers.next().flatten();
    }
}

/// What the Database's spec and switchover annotation ask of its replication.
fn wanted_of(db: &Database) -> Wanted {
    Wanted {
        replicas: db.spec.replicas,
        synchronous: db.spec.replication.mode == ReplicationMode::Sync,
        failover_after: Duration::from_secs(
            u64::try_from(db.spec.replication.failover_after_seconds).unwrap_or(30),
        ),
        switchover_to: db.annotations().get(SWITCHOVER_ANNOTATION).cloned(),
        log_kept_mb: postgres::log_kept_mb(
            database_api::storage::parse_gi(&db.spec.storage).unwrap_or(1),
        ),
    }
}

/// The warning for a switchover to a Pod that is not one of the instances, if asked.
fn switchover_refusal(
    wanted: &Wanted,
    instances: &[Instance],
) -> Option<(EventType, &'static str, String)> {
    let target = wanted.switchover_to.as_ref()?;
    (!instances.iter().any(|i| i.name == *target)).then(|| {
        (
            EventType::Warning,
            reason::SWITCHOVER_REFUSED,
            format!(
                "{target} is not an instance of this Database; the switchover waits for one that is"
            ),
        )
    })
}

/// An instance as its Pod shows it (the engine is asked later).
fn observe_pod(pod: &Pod) -> Option<Instance> {
    let name = pod.name_any();
    let ordinal = ordinal(&name)?;
    let ready_condition = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"));
    // A Pod being deleted is going: it counts as not ready from the moment its deletion
    // began, not from when its server finally stops (which may take the whole grace
    // period) and a new Pod appears.
    let deletion_began = pod.metadata.deletion_timestamp.as_ref().map(|at| {
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        at.0.checked_sub(jiff::SignedDuration::from_secs(grace))
            .unwrap_or(at.0)
    });
    let condition_ready = ready_condition.is_some_and(|c| c.status == "True");
    let ready = condition_ready && deletion_began.is_none();
    let unready_since = if ready {
        None
    } else if condition_ready {
        deletion_began
    } else {
        let since = ready_condition
            .and_then(|c| c.last_transition_time.as_ref())
            .or(pod.metadata.creation_timestamp.as_ref())
            .map(|t| t.0);
        match (since, deletion_began) {
            (Some(since), Some(began)) => Some(since.min(began)),
            (since, began) => since.or(began),
        }
    };
    Some(Instance {
        name,
        ordinal,
        ready,
        unready_since,
        stopping_until: pod.metadata.deletion_timestamp.as_ref().map(|at| at.0),
        label: pod.labels().get(ROLE_LABEL).cloned(),
        engine: None,
    })
}

/// Removes the switchover annotation once the instance it names is the primary, so it
/// cannot pull the primary back after a later failover.
pub async fn forget_done_switchover(
    databases: &Api<Database>,
    db: &Database,
    primary: Option<&str>,
) -> Result<(), Error> {
    let asked = db
        .annotations()
        .get(SWITCHOVER_ANNOTATION)
        .map(String::as_str);
    if asked.is_none() || asked != primary {
        return Ok(());
    }
    let patch = json!({"metadata": {"annotations": {SWITCHOVER_ANNOTATION: null}}});
    databases
        .patch(
            &db.name_any(),
            &PatchParams {
                field_manager: Some(database_api::constants::FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            },
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|source| Error::Apply {
            kind: "Database".into(),
            name: db.name_any(),
            source,
        })?;
    Ok(())
}

/// The Replicated condition for a Database whose instances the operator does not
/// replicate.
pub fn not_replicated(db: &Database) -> (bool, &'static str, String) {
    if db.spec.replicas <= 1 {
        (
            false,
            reason::SINGLE_INSTANCE,
            "one instance: nothing to replicate".to_owned(),
        )
    } else {
        (
            false,
            reason::NOT_CONFIGURED,
            "instances beyond the first are independent: this Database's credentials were made before the operator ran its engine's replication".to_owned(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_pods_are_listed_from_the_api_servers_cache() {
        let server = testenv::scripted::ScriptedApiServer::new();
        server.on(
            http::Method::GET,
            "/api/v1/namespaces/shop/pods",
            200,
            json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []}),
        );
        let mut db = testenv::toolkit::fixtures::database(
            "orders",
            &json!({"engine": "postgres", "version": "17", "storage": "1Gi"}),
        );
        db.metadata.namespace = Some("shop".into());
        let pods: Api<Pod> = Api::namespaced(server.client(), "shop");
        database_pods(&pods, &db).await.expect("the Pods");
        let requests = server.requests();
        assert_eq!(requests.len(), 1, "{requests:?}");
        let query = &requests[0].query;
        assert!(query.contains("resourceVersion=0"), "{query}");
        assert!(
            query.contains("resourceVersionMatch=NotOlderThan"),
            "{query}"
        );
        assert!(query.contains("labelSelector="), "{query}");
    }

    fn pod(ready: &str, deleted: Option<&str>) -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": "orders-0",
                "creationTimestamp": "2026-01-01T00:00:00Z",
                "deletionTimestamp": deleted,
                "deletionGracePeriodSeconds": deleted.map(|_| 60),
            },
            "status": {"conditions": [{
                "type": "Ready", "status": ready,
                "lastTransitionTime": "2026-01-01T00:01:00Z",
            }]},
        }))
        .expect("a Pod")
    }

    #[test]
    fn the_recorded_span_of_the_members_is_read_from_the_topology() {
        let topology: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "orders-topology"},
            "data": {"primary": "orders-1", "members-span": "3"},
        }))
        .expect("a ConfigMap");
        assert_eq!(members_span(Some(&topology)), Some(3));
        assert_eq!(members_span(None), None);
    }

    #[test]
    fn a_ready_pod_is_ready_and_an_unready_one_since_its_condition_changed() {
        let ready = observe_pod(&pod("True", None)).expect("observed");
        assert!(ready.ready && ready.running());
        assert_eq!(ready.unready_since, None);
        let unready = observe_pod(&pod("False", None)).expect("observed");
        assert!(!unready.ready);
        assert_eq!(
            unready.unready_since.map(|t| t.to_string()),
            Some("2026-01-01T00:01:00Z".to_owned())
        );
    }

    #[test]
    fn a_pod_being_deleted_is_unready_from_when_its_deletion_began() {
        // Deleted at 00:10:00 with 60 s of grace: its deletionTimestamp is 00:11:00.
        let going = observe_pod(&pod("True", Some("2026-01-01T00:11:00Z"))).expect("observed");
        assert!(!going.ready && !going.running());
        assert_eq!(
            going.unready_since.map(|t| t.to_string()),
            Some("2026-01-01T00:10:00Z".to_owned())
        );
        // Its server may run until the grace period is over.
        assert_eq!(
            going.stopping_until.map(|t| t.to_string()),
            Some("2026-01-01T00:11:00Z".to_owned())
        );
        assert_eq!(
            observe_pod(&pod("True", None)).and_then(|i| i.stopping_until),
            None
        );
        let already_unready =
            observe_pod(&pod("False", Some("2026-01-01T00:11:00Z"))).expect("observed");
        assert_eq!(
            already_unready.unready_since.map(|t| t.to_string()),
            Some("2026-01-01T00:01:00Z".to_owned())
        );
    }

    #[test]
    fn only_the_named_primary_carries_the_primary_label_when_replication_is_not_run() {
        let instance = |name: &str, label: Option<&str>, running: bool| Instance {
            name: name.to_owned(),
            ordinal: ordinal(name).unwrap_or_default(),
            ready: running,
            unready_since: None,
            stopping_until: (!running).then_some(Timestamp::UNIX_EPOCH),
            label: label.map(str::to_owned),
            engine: None,
        };
        let instances = [
            instance("orders-0", Some(PRIMARY), true),
            instance("orders-1", None, true),
            instance("orders-2", Some(PRIMARY), false),
        ];
        assert_eq!(
            primary_labels("orders-1", &instances),
            [
                ("orders-0".to_owned(), None),
                ("orders-1".to_owned(), Some(PRIMARY))
            ],
            "an instance being deleted keeps its label"
        );
        assert_eq!(primary_labels("orders-0", &instances[..2]), []);
    }
}
