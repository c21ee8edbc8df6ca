//! The reconcile's decision paths against a scripted API server (see
//! `testenv::scripted`): what one pass writes, and what it asks for next, for an invalid
//! spec, a paused Database, a first pass, an object in the way and broken credentials.
//! They run in milliseconds; what the API server itself decides is tested against a
//! real one in `tests/`.

use std::sync::Arc;
use std::time::Duration;

use database_api::Database;
use database_api::conditions::reason;
use database_api::constants::{FINALIZER, PAUSED_ANNOTATION, RETAINED_VERSION_ANNOTATION};
use http::Method;
use kube::ResourceExt as _;
use operator_runtime::Action;
use serde_json::{Value, json};
use testenv::scripted::{Recorded, ScriptedApiServer};
use testenv::toolkit::fixtures;

use super::{MAX_BACKOFF, error_policy, reconcile};
use crate::context::{Context, Settings};
use crate::error::Error;
use crate::metrics::Metrics;

const DATABASES: &str = "/apis/mycompany.io/v1/namespaces/shop/databases/orders";
const STATEFULSETS: &str = "/apis/apps/v1/namespaces/shop/statefulsets";
const SECRETS: &str = "/api/v1/namespaces/shop/secrets";
const SERVICES: &str = "/api/v1/namespaces/shop/services";

/// The Database `shop/orders` with `spec`, already seen by the controller when `seen`
/// (it carries the finalizer and a uid).
fn orders(spec: &Value, seen: bool) -> Database {
    let mut db = fixtures::database("orders", spec);
    db.metadata.namespace = Some("shop".into());
    db.metadata.uid = Some("a1b2c3".into());
    if seen {
        db.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
    }
    db
}

fn postgres() -> Value {
    json!({"engine": "postgres", "version": "17", "storage": "1Gi"})
}

/// One reconcile of `db`, which the server holds as the API server would.
async fn pass(server: &ScriptedApiServer, db: Database) -> (Result<Action, Error>, Arc<Context>) {
    server.holds(
        DATABASES,
        serde_json::to_value(&db).expect("a Database as JSON"),
    );
    let ctx = Arc::new(Context::new(
        server.client(),
        Settings::default(),
        Arc::new(Metrics::default()),
        None,
    ));
    (reconcile(Arc::new(db), ctx.clone()).await, ctx)
}

/// The status a pass wrote: the body of its one patch of `/status`.
fn written_status(server: &ScriptedApiServer) -> Value {
    let patches: Vec<Recorded> = server.writes_to(&format!("{DATABASES}/status"));
    assert_eq!(patches.len(), 1, "one status write: {patches:?}");
    patches[0].body["status"].clone()
}

fn condition<'a>(status: &'a Value, type_: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == type_))
        .unwrap_or_else(|| panic!("no {type_} condition in {status}"))
}

/// Whether a pass wrote the Database itself (its finalizer), not only its status.
fn finalizer_written(server: &ScriptedApiServer) -> bool {
    server
        .writes_to(DATABASES)
        .iter()
        .any(|w| !w.path.ends_with("/status"))
}

/// The status says `Degraded` for an ownership conflict over `object` ("Service orders").
fn conflict_reported(server: &ScriptedApiServer, object: &str) {
    let status = written_status(server);
    let degraded = condition(&status, "Degraded");
    assert_eq!(degraded["reason"], reason::OWNERSHIP_CONFLICT);
    assert!(
        degraded["message"]
            .as_str()
            .is_some_and(|m| m.contains(object)),
        "{degraded}"
    );
}

fn owned_writes(server: &ScriptedApiServer) -> Vec<Recorded> {
    server
        .writes()
        .into_iter()
        .filter(|w| !w.path.starts_with(DATABASES) && !w.path.contains("/events"))
        .collect()
}

#[tokio::test]
async fn an_invalid_spec_writes_only_its_status_and_waits_for_a_change() {
    let server = ScriptedApiServer::new();
    let spec = json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 9});
    let (result, _) = pass(&server, orders(&spec, true)).await;
    assert_eq!(
        result.expect("a user error is not a failure"),
        Action::AwaitChange
    );
    assert!(owned_writes(&server).is_empty(), "{:?}", server.writes());
    let status = written_status(&server);
    assert_eq!(status["phase"], "Failed");
    let ready = condition(&status, "Ready");
    assert_eq!(ready["status"], "False");
    assert!(
        ready["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.replicas")),
        "{ready}"
    );
    assert_eq!(
        server.writes_to("/events").len(),
        1,
        "one InvalidSpec event"
    );
}

#[tokio::test]
async fn a_paused_database_writes_nothing_it_owns_and_says_what_resuming_would_change() {
    let server = ScriptedApiServer::new();
    let mut db = orders(&postgres(), true);
    db.annotations_mut()
        .insert(PAUSED_ANNOTATION.to_owned(), "true".to_owned());
    // A budget it no longer wants (one instance) stays too.
    let budget = "/apis/policy/v1/namespaces/shop/poddisruptionbudgets/orders";
    server.holds(
        budget,
        controlled("policy/v1", "PodDisruptionBudget", "orders"),
    );
    let (result, _) = pass(&server, db).await;
    assert_eq!(result.expect("paused"), Action::AwaitChange);
    assert!(owned_writes(&server).is_empty(), "{:?}", server.writes());
    let status = written_status(&server);
    let paused = condition(&status, "Paused");
    assert_eq!(paused["status"], "True");
    let message = paused["message"].as_str().unwrap_or_default();
    for held in [
        "StatefulSet orders",
        "Service orders-rw",
        "Secret orders-credentials",
        "PodDisruptionBudget orders (to be deleted)",
    ] {
        assert!(message.contains(held), "{held} missing from: {message}");
    }
}

#[tokio::test]
async fn a_new_databases_first_pass_reads_nothing_and_claims_every_name_before_the_statefulset() {
    let server = ScriptedApiServer::new();
    let (result, ctx) = pass(&server, orders(&postgres(), false)).await;
    assert!(matches!(result, Ok(Action::RequeueAfter(_))), "{result:?}");
    // (The controller reads DatabaseBackups from its watch's cache; here it lists them.)
    let owned_reads: Vec<Recorded> = server
        .requests()
        .into_iter()
        .filter(|r| {
            r.method == Method::GET
                && !r.path.starts_with(DATABASES)
                && !r.path.ends_with("/databasebackups")
        })
        .collect();
    assert!(owned_reads.is_empty(), "{owned_reads:?}");
    let writes = owned_writes(&server);
    assert!(
        writes.iter().all(|w| w.method == Method::POST),
        "{writes:?}"
    );
    let set = writes
        .iter()
        .position(|w| w.path == STATEFULSETS)
        .expect("the StatefulSet is created");
    let credentials = writes
        .iter()
        .position(|w| w.body["metadata"]["name"] == "orders-credentials")
        .expect("the credentials Secret is created");
    let services = writes.iter().filter(|w| w.path == SERVICES).count();
    assert_eq!(services, 3, "{writes:?}");
    assert!(
        credentials < set
            && writes
                .iter()
                .take(set)
                .filter(|w| w.path == SERVICES)
                .count()
                == services,
        "every other name is claimed before the StatefulSet: {writes:?}"
    );
    let finalizer = server
        .writes_to(DATABASES)
        .into_iter()
        .find(|w| !w.path.ends_with("/status"))
        .expect("the finalizer is added in the same pass");
    assert!(
        finalizer.body.to_string().contains(FINALIZER),
        "{:?}",
        finalizer.body
    );
    let owner = &writes[set].body["metadata"]["ownerReferences"][0];
    assert_eq!(owner["uid"], "a1b2c3");
    assert_eq!(owner["controller"], true);
    let metrics = ctx.metrics.encode();
    assert!(
        metrics.contains("database_controller_writes_total{action=\"apply\"}"),
        "{metrics}"
    );
}

/// Someone else's object of a name the Database `orders` writes, as JSON.
fn someone_elses(kind: &str, name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": "shop"},
           "data": {"password": "dGhlaXJz"}})
}

#[tokio::test]
async fn an_object_an_instance_would_read_stops_the_pass_before_the_statefulset() {
    for (path, kind, name) in [
        (
            format!("{SECRETS}/orders-credentials"),
            "Secret",
            "orders-credentials",
        ),
        (
            "/api/v1/namespaces/shop/configmaps/orders-topology".to_owned(),
            "ConfigMap",
            "orders-topology",
        ),
    ] {
        for seen in [false, true] {
            let server = ScriptedApiServer::new();
            server.holds(&path, someone_elses(kind, name));
            let (result, _) = pass(&server, orders(&postgres(), seen)).await;
            let Ok(Action::RequeueAfter(after)) = result else {
                panic!("a conflict looks again later: {result:?}");
            };
            assert!(after >= Duration::from_secs(30), "{after:?}");
            let writes = owned_writes(&server);
            assert!(
                !writes.iter().any(|w| w.path.starts_with(STATEFULSETS)
                    || w.path == path
                    || w.method != Method::POST),
                "nothing of someone else's is written, and no StatefulSet: {writes:?}"
            );
            if seen {
                assert!(
                    writes.is_empty(),
                    "a pass that reads writes nothing: {writes:?}"
                );
            }
            assert!(
                !finalizer_written(&server),
                "no finalizer while no StatefulSet is owned"
            );
            conflict_reported(&server, &format!("{kind} {name}"));
        }
    }
}

#[tokio::test]
async fn a_service_in_the_way_is_never_written_and_is_reported() {
    for seen in [false, true] {
        let server = ScriptedApiServer::new();
        let path = format!("{SERVICES}/orders");
        server.holds(&path, someone_elses("Service", "orders"));
        let (result, _) = pass(&server, orders(&postgres(), seen)).await;
        assert!(matches!(result, Ok(Action::RequeueAfter(_))), "{result:?}");
        let writes = owned_writes(&server);
        assert!(
            !writes
                .iter()
                .any(|w| w.path == path || w.method != Method::POST),
            "{writes:?}"
        );
        // A first pass that read nothing may have created the StatefulSet before the
        // Service's name was found taken; then the finalizer looks after its data.
        let set = writes.iter().any(|w| w.path == STATEFULSETS);
        assert_eq!(set, finalizer_written(&server), "{writes:?}");
        assert_eq!(set, !seen, "{writes:?}");
        conflict_reported(&server, "Service orders");
    }
}

/// Credentials kept from an earlier Database `orders` (postgres 17), with their data.
fn kept_credentials() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "orders-credentials", "namespace": "shop",
                     "labels": {
                         "app.kubernetes.io/managed-by": "database-operator",
                         "app.kubernetes.io/instance": "orders",
                         "app.kubernetes.io/name": "postgres"},
                     "annotations": {RETAINED_VERSION_ANNOTATION: "17"}},
        "data": {"username": "YXBw", "password": "c2VjcmV0", "database": "YXBw"},
    })
}

#[tokio::test]
async fn credentials_kept_from_an_earlier_database_are_taken_back_before_the_statefulset() {
    let server = ScriptedApiServer::new();
    let kept = format!("{SECRETS}/orders-credentials");
    server.holds(&kept, kept_credentials());
    let (result, _) = pass(&server, orders(&postgres(), false)).await;
    assert!(result.is_ok(), "{result:?}");
    let writes = owned_writes(&server);
    let taken_back = writes
        .iter()
        .position(|w| w.method == Method::PATCH && w.path == kept)
        .expect("the kept credentials are taken back");
    let sets: Vec<usize> = writes
        .iter()
        .enumerate()
        .filter(|(_, w)| w.path.starts_with(STATEFULSETS))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(sets.len(), 1, "{writes:?}");
    assert!(taken_back < sets[0], "{writes:?}");
    let stored = server.object(&kept).expect("the kept Secret");
    assert_eq!(stored["data"]["password"], "c2VjcmV0", "never rewritten");
}

#[tokio::test]
async fn kept_credentials_are_not_claimed_for_a_database_already_deleted() {
    let server = ScriptedApiServer::new();
    let kept = format!("{SECRETS}/orders-credentials");
    server.holds(&kept, kept_credentials());
    // The pass is given `orders` as a cache a moment behind has it; the API server
    // holds a newer Database of that name (another uid).
    let stale = orders(&postgres(), false);
    let mut newer = stale.clone();
    newer.metadata.uid = Some("d4e5f6".into());
    let ctx = Arc::new(Context::new(
        server.client(),
        Settings::default(),
        Arc::new(Metrics::default()),
        None,
    ));
    server.holds(DATABASES, serde_json::to_value(&newer).expect("JSON"));
    let result = reconcile(Arc::new(stale), ctx).await;
    assert_eq!(result.expect("nothing failed"), Action::AwaitChange);
    let writes: Vec<Recorded> = owned_writes(&server)
        .into_iter()
        .filter(|w| w.method != Method::POST || w.path.starts_with(STATEFULSETS))
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
    let stored = server.object(&kept).expect("the kept Secret");
    assert!(
        stored["metadata"]["ownerReferences"].is_null(),
        "still kept for the data: {stored}"
    );
}

#[tokio::test]
async fn broken_credentials_fail_the_pass_and_wait_the_longest_for_a_person() {
    let server = ScriptedApiServer::new();
    let db = orders(&postgres(), true);
    server.holds(
        &format!("{SECRETS}/orders-credentials"),
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "orders-credentials", "namespace": "shop", "ownerReferences": [{
                "apiVersion": "mycompany.io/v1", "kind": "Database", "name": "orders",
                "uid": "a1b2c3", "controller": true,
            }]},
            "data": {},
        }),
    );
    let (result, ctx) = pass(&server, db.clone()).await;
    let error = result.expect_err("a Secret without its keys cannot be used");
    assert!(matches!(error, Error::BrokenCredentials(_)), "{error}");
    assert!(
        error
            .to_string()
            .contains("restore the Secret or delete it"),
        "{error}"
    );
    assert_eq!(
        error_policy(Arc::new(db), &error, ctx),
        Action::RequeueAfter(MAX_BACKOFF)
    );
    assert!(
        server.writes_to(SECRETS).is_empty(),
        "the user's Secret is never overwritten"
    );
}

/// An object `kind` named `name` that the Database `orders` controls, as JSON.
fn controlled(api_version: &str, kind: &str, name: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "namespace": "shop", "ownerReferences": [{
            "apiVersion": "mycompany.io/v1", "kind": "Database", "name": "orders",
            "uid": "a1b2c3", "controller": true,
        }]},
    })
}

#[tokio::test]
async fn a_budget_and_a_configuration_file_no_longer_wanted_are_deleted_after_the_writes() {
    let server = ScriptedApiServer::new();
    let budget = "/apis/policy/v1/namespaces/shop/poddisruptionbudgets/orders";
    let config = "/api/v1/namespaces/shop/configmaps/orders-config";
    server.holds(
        budget,
        controlled("policy/v1", "PodDisruptionBudget", "orders"),
    );
    server.holds(config, controlled("v1", "ConfigMap", "orders-config"));
    // One instance and no settings: neither is wanted any more.
    let (result, _) = pass(&server, orders(&postgres(), true)).await;
    assert!(result.is_ok(), "{result:?}");
    let writes = owned_writes(&server);
    let deleted: Vec<&str> = writes
        .iter()
        .filter(|w| w.method == Method::DELETE)
        .map(|w| w.path.as_str())
        .collect();
    assert_eq!(deleted.len(), 2, "{deleted:?}");
    assert!(
        deleted.contains(&budget) && deleted.contains(&config),
        "{deleted:?}"
    );
    let first_delete = writes.iter().position(|w| w.method == Method::DELETE);
    let set_write = writes.iter().position(|w| w.path.starts_with(STATEFULSETS));
    assert!(
        set_write < first_delete,
        "the StatefulSet stops mounting the file first"
    );
}

#[tokio::test]
async fn a_connection_secret_of_the_old_type_is_replaced_by_a_service_binding_secret() {
    let server = ScriptedApiServer::new();
    let connection = format!("{SECRETS}/orders-connection");
    let mut old = controlled("v1", "Secret", "orders-connection");
    old["type"] = json!("Opaque");
    old["metadata"]["uid"] = json!("d4e5f6");
    server.holds(&connection, old);
    let (result, _) = pass(&server, orders(&postgres(), true)).await;
    assert!(result.is_ok(), "{result:?}");
    let writes = server.writes_to("orders-connection");
    let deleted = server
        .writes()
        .iter()
        .position(|w| w.method == Method::DELETE && w.path == connection)
        .expect("the old Secret is deleted: its type cannot change in place");
    let created = server
        .writes()
        .iter()
        .position(|w| w.method == Method::POST && w.body["metadata"]["name"] == "orders-connection")
        .expect("and created again");
    assert!(deleted < created, "{writes:?}");
    let stored = server.object(&connection).expect("the new Secret");
    assert_eq!(stored["type"], "servicebinding.io/postgresql");
    assert_eq!(
        stored["data"]["type"], "cG9zdGdyZXNxbA==",
        "base64 of postgresql"
    );
}

#[tokio::test]
async fn a_connection_secret_of_another_owner_is_never_replaced() {
    let server = ScriptedApiServer::new();
    let connection = format!("{SECRETS}/orders-connection");
    server.holds(
        &connection,
        json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
               "metadata": {"name": "orders-connection", "namespace": "shop"}}),
    );
    let (result, _) = pass(&server, orders(&postgres(), true)).await;
    assert!(
        matches!(result, Ok(Action::RequeueAfter(_))),
        "a conflict looks again later: {result:?}"
    );
    assert!(
        server.writes_to("orders-connection").is_empty(),
        "{:?}",
        server.writes()
    );
}
