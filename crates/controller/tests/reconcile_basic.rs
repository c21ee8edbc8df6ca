//! The controller against a real API server (no kube-controller-manager): what it
//! creates, how it corrects drift, how it follows spec changes and how deletion ends.

// Each scenario, from the Database created to its last check, is told in one function.
#![allow(clippy::too_many_lines)]

mod common;

use common::Env;
use database_api::conditions;
use database_api::constants::FINALIZER;
use database_controller::resources::meta::ROLE_LABEL;
use database_controller::runner::Scope;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use serde_json::json;
use testenv::Options;
use testenv::toolkit::kubectl::kubectl;
use testenv::toolkit::wait::{WAIT, eventually, gone, statefulset_with_replicas, wait_for};

fn secret_text(secret: &Secret, key: &str) -> String {
    let data = secret.data.as_ref().expect("data");
    String::from_utf8(data.get(key).expect("key present").0.clone()).expect("utf-8")
}

#[tokio::test]
async fn create_makes_the_statefulset_service_and_both_secrets() {
    let env = Env::start(Options::default()).await;
    env.create_database(
        "orders",
        json!({"engine": "postgres", "version": "16.4", "storage": "10Gi"}),
    )
    .await;

    let set: StatefulSet = wait_for(&env.api(), "orders").await;
    let spec = set.spec.clone().expect("spec");
    assert_eq!(spec.replicas, Some(1));
    assert_eq!(spec.service_name.as_deref(), Some("orders"));
    let container = &spec.template.spec.as_ref().expect("pod").containers[0];
    assert_eq!(container.image.as_deref(), Some("postgres:16.4"));
    let template = &spec.volume_claim_templates.expect("templates")[0];
    let storage = template
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .expect("requests");
    assert_eq!(storage["storage"].0, "10Gi");
    let owner = &set.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.controller),
        ("Database", "orders", Some(true))
    );

    let service: Service = wait_for(&env.api(), "orders").await;
    let service_spec = service.spec.expect("spec");
    assert_eq!(service_spec.cluster_ip.as_deref(), Some("None"));
    assert_eq!(service_spec.ports.expect("ports")[0].port, 5432);

    let credentials: Secret = wait_for(&env.api(), "orders-credentials").await;
    let password = secret_text(&credentials, "password");
    assert_eq!(password.len(), 32);
    let connection: Secret = wait_for(&env.api(), "orders-connection").await;
    assert_eq!(secret_text(&connection, "password"), password);
    assert_eq!(
        secret_text(&connection, "host"),
        "orders-rw.shop.svc.cluster.local"
    );
    assert_eq!(
        secret_text(&connection, "uri"),
        format!("postgresql://app:{password}@orders-rw.shop.svc.cluster.local:5432/app")
    );

    let db = eventually(WAIT, "status", || async {
        env.databases()
            .get("orders")
            .await
            .ok()
            .filter(|d| d.status.as_ref().and_then(|s| s.observed_generation) == Some(1))
    })
    .await;
    assert!(db.finalizers().iter().any(|f| f == FINALIZER));
    let status = db.status.expect("status");
    assert_eq!(
        status.endpoint.as_deref(),
        Some("orders-rw.shop.svc.cluster.local:5432")
    );
    assert_eq!(
        status.selector.as_deref(),
        Some("app.kubernetes.io/instance=orders,app.kubernetes.io/name=postgres")
    );
    let text = serde_json::to_string(&status).expect("json");
    assert!(!text.contains(&password), "the password leaked into status");

    // The CRD's categories put Databases in `kubectl get all` and the group's listing.
    for category in ["all", "mycompany"] {
        let (ok, stdout, stderr) = kubectl(
            &env.plane,
            &["get", category, "-n", "shop", "-o", "name"],
            "",
        )
        .await;
        assert!(ok, "kubectl get {category}: {stderr}");
        assert!(
            stdout.lines().any(|l| l == "database.mycompany.io/orders"),
            "kubectl get {category} lists no Database: {stdout}"
        );
    }
}

#[tokio::test]
async fn without_the_webhook_the_controller_fills_in_the_engine_label() {
    // No webhook runs here: the defaulting webhook's label comes from the controller.
    let env = Env::start(Options::default()).await;
    let created = env
        .create_database(
            "orders",
            json!({"engine": "mysql", "version": "9.7", "storage": "1Gi"}),
        )
        .await;
    assert!(!created.labels().contains_key("app.kubernetes.io/name"));
    let labelled = eventually(WAIT, "the engine label", || async {
        env.databases().get("orders").await.ok().filter(|d| {
            d.labels().get("app.kubernetes.io/name").map(String::as_str) == Some("mysql")
        })
    })
    .await;
    assert!(labelled.finalizers().iter().any(|f| f == FINALIZER));
}

#[tokio::test]
async fn drift_in_owned_objects_is_corrected() {
    let env = Env::start(Options::default()).await;
    env.create_database(
        "drift",
        json!({"engine": "mysql", "version": "8.4", "storage": "5Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    wait_for(&sets, "drift").await;

    // Someone scales the StatefulSet by hand; the Database says 1.
    sets.patch(
        "drift",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .expect("edited");
    statefulset_with_replicas(&sets, "drift", 1, WAIT).await;

    // Someone deletes the Service; it comes back.
    let services: Api<Service> = env.api();
    let old_uid = wait_for(&services, "drift").await.uid();
    services
        .delete("drift", &DeleteParams::default())
        .await
        .expect("deleted");
    eventually(WAIT, "Service recreated", || async {
        services
            .get_opt("drift")
            .await
            .ok()
            .flatten()
            .filter(|s| s.uid() != old_uid)
    })
    .await;

    // Someone points the read Service (one instance: an alias of -rw) elsewhere, after
    // passes that found it as wanted and have since left it unread: the change is seen
    // and undone.
    services
        .patch(
            "drift-ro",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"externalName": "elsewhere.example.com"}})),
        )
        .await
        .expect("edited");
    eventually(WAIT, "drift-ro an alias of drift-rw again", || async {
        services
            .get_opt("drift-ro")
            .await
            .ok()
            .flatten()
            .filter(|s| {
                s.spec
                    .as_ref()
                    .and_then(|spec| spec.external_name.as_deref())
                    == Some("drift-rw.shop.svc.cluster.local")
            })
    })
    .await;
}

#[tokio::test]
async fn spec_changes_scale_and_update_the_statefulset() {
    let env = Env::start(Options::default()).await;
    env.create_database(
        "grow",
        json!({"engine": "mongodb", "version": "7.0", "storage": "5Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    wait_for(&sets, "grow").await;
    let alias: Service = wait_for(&env.api(), "grow-ro").await;
    assert_eq!(
        alias.spec.and_then(|s| s.type_).as_deref(),
        Some("ExternalName"),
        "one instance: -ro is an alias of -rw"
    );
    let alias: Service = wait_for(&env.api(), "grow-rw").await;
    let spec = alias.spec.expect("spec");
    assert_eq!(
        (spec.type_.as_deref(), spec.external_name.as_deref()),
        (
            Some("ExternalName"),
            Some("grow-0.grow.shop.svc.cluster.local")
        ),
        "one instance: -rw is an alias of the primary's name"
    );
    assert_eq!(spec.cluster_ip, None);
    let budgets: Api<PodDisruptionBudget> = env.api();
    assert!(
        budgets.get_opt("grow").await.expect("get").is_none(),
        "no budget for one instance"
    );

    // A release of the same series: a major step would take a backup first.
    env.patch_database(
        "grow",
        json!({"spec": {"replicas": 3, "version": "7.0.14"}}),
    )
    .await;
    let set = statefulset_with_replicas(&sets, "grow", 3, WAIT).await;
    // With replicas to read from, `-ro` is their virtual IP; with one instance, an
    // alias of `-rw` that takes none.
    let services: Api<Service> = env.api();
    let service_as = |name: &'static str, want: &'static str| {
        let services = services.clone();
        async move {
            eventually(WAIT, &format!("{name} as {want}"), || async {
                services
                    .get_opt(name)
                    .await
                    .ok()
                    .flatten()
                    .and_then(|s| s.spec)
                    .filter(|s| s.type_.as_deref() == Some(want))
            })
            .await
        }
    };
    let mut virtual_ips = Vec::new();
    for (name, role) in [("grow-ro", "replica"), ("grow-rw", "primary")] {
        let spec = service_as(name, "ClusterIP").await;
        assert!(
            spec.cluster_ip.as_ref().is_some_and(|ip| ip != "None"),
            "{name}: a virtual IP"
        );
        assert_eq!(spec.external_name, None);
        assert_eq!(spec.selector.expect("selector")[ROLE_LABEL], role);
        virtual_ips.push(spec.cluster_ip);
    }
    let image = set
        .spec
        .and_then(|s| s.template.spec)
        .map(|p| p.containers[0].image.clone());
    assert_eq!(image, Some(Some("mongo:7.0.14".to_owned())));
    wait_for(&budgets, "grow").await;

    // Back to one instance: the budget goes away again.
    env.patch_database("grow", json!({"spec": {"replicas": 1}}))
        .await;
    gone(&budgets, "grow", WAIT).await;
    let spec = service_as("grow-ro", "ExternalName").await;
    assert_eq!(
        spec.external_name.as_deref(),
        Some("grow-rw.shop.svc.cluster.local")
    );
    assert_eq!(spec.cluster_ip, None, "-ro's virtual IP is given back");
    assert_eq!(spec.selector.expect("selector")[ROLE_LABEL], "primary");
    // -rw keeps its virtual IP: a client that resolved it just before would otherwise
    // be left with an address nothing answers.
    // The pass that made -ro an alias wrote -rw beside it; a few looks over the next
    // seconds would see a change that came later.
    for _ in 0..6 {
        let rw = services.get("grow-rw").await.expect("grow-rw").spec;
        let rw = rw.expect("spec");
        assert_eq!(rw.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(rw.cluster_ip, virtual_ips[1], "the same virtual IP");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn deleting_a_database_releases_the_finalizer() {
    let env = Env::start(Options::default()).await;
    env.create_database(
        "gone",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi"}),
    )
    .await;
    eventually(WAIT, "finalizer", || async {
        env.databases()
            .get("gone")
            .await
            .ok()
            .filter(|d| d.finalizers().iter().any(|f| f == FINALIZER))
    })
    .await;
    env.databases()
        .delete("gone", &DeleteParams::default())
        .await
        .expect("delete accepted");
    gone(&env.databases(), "gone", WAIT).await;
}

/// The Database watch skips the controller's own status writes, but a finalizer change
/// still brings the Database back: one removed by hand is put back.
#[tokio::test]
async fn a_finalizer_removed_by_hand_is_put_back() {
    let env = Env::start(Options::default()).await;
    env.create_database(
        "kept",
        json!({"engine": "mysql", "version": "8.4", "storage": "1Gi"}),
    )
    .await;
    let has_finalizer =
        |db: &database_api::Database| db.finalizers().iter().any(|f| f == FINALIZER);
    eventually(WAIT, "finalizer and status", || async {
        env.databases()
            .get("kept")
            .await
            .ok()
            .filter(|d| has_finalizer(d) && d.status.is_some())
    })
    .await;
    let removed = env
        .patch_database("kept", json!({"metadata": {"finalizers": null}}))
        .await;
    assert!(!has_finalizer(&removed), "the patch removed the finalizer");
    eventually(WAIT, "finalizer back", || async {
        env.databases()
            .get("kept")
            .await
            .ok()
            .filter(|d| has_finalizer(d))
    })
    .await;
}

#[tokio::test]
async fn a_database_whose_owned_objects_are_gone_is_still_deleted() {
    let mut env = Env::start(Options::default()).await;
    env.create_database(
        "orphan",
        json!({"engine": "mysql", "version": "8.0", "storage": "1Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    wait_for(&sets, "orphan").await;
    env.stop_controller().await;
    sets.delete("orphan", &DeleteParams::default())
        .await
        .expect("sts deleted");
    let services: Api<Service> = env.api();
    services
        .delete("orphan", &DeleteParams::default())
        .await
        .expect("service deleted");
    env.databases()
        .delete("orphan", &DeleteParams::default())
        .await
        .expect("delete accepted");
    env.start_controller(Scope::AllNamespaces).await;
    gone(&env.databases(), "orphan", WAIT).await;
}

#[tokio::test]
async fn significant_changes_are_recorded_as_events() {
    let env = Env::start(Options::default()).await;
    env.create_database(
        "noisy",
        json!({"engine": "postgres", "version": "16", "storage": "1Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    wait_for(&sets, "noisy").await;
    env.patch_database("noisy", json!({"spec": {"replicas": 2}}))
        .await;
    let events: Api<k8s_openapi::api::events::v1::Event> = env.api();
    let reasons = eventually(WAIT, "Created and Scaled events", || async {
        let list = events.list(&kube::api::ListParams::default()).await.ok()?;
        let reasons: Vec<String> = list
            .items
            .iter()
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("noisy"))
            .filter_map(|e| e.reason.clone())
            .collect();
        (reasons.iter().any(|r| r == "Created") && reasons.iter().any(|r| r == "Scaled"))
            .then_some(reasons)
    })
    .await;
    assert!(
        !reasons.iter().any(|r| r == "ReconcileFailed"),
        "{reasons:?}"
    );
}

#[tokio::test]
async fn a_paused_database_is_left_alone_until_unpaused() {
    let env = Env::start(Options::default()).await;
    env.create_database(
        "held",
        json!({"engine": "mysql", "version": "8.4", "storage": "1Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    wait_for(&sets, "held").await;
    env.patch_database(
        "held",
        json!({"metadata": {"annotations": {"mycompany.io/paused": "true"}}}),
    )
    .await;
    let paused = env.condition_true("held", "Paused").await;
    assert!(
        paused
            .message
            .ends_with("every owned object matches the spec"),
        "no false difference on a real API server: {}",
        paused.message
    );

    sets.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 3}})),
    )
    .await
    .expect("edited");
    // The hand edit is compared, reported, and left in place.
    eventually(
        WAIT,
        "the Paused condition naming the StatefulSet",
        || async {
            let status = env.databases().get("held").await.ok()?.status?;
            conditions::find(&status.conditions, "Paused")
                .filter(|c| c.message.ends_with("resuming will change StatefulSet held"))
                .cloned()
        },
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let replicas = sets
        .get("held")
        .await
        .expect("get")
        .spec
        .and_then(|s| s.replicas);
    assert_eq!(
        replicas,
        Some(3),
        "a paused Database's objects are not touched"
    );

    env.patch_database(
        "held",
        json!({"metadata": {"annotations": {"mycompany.io/paused": null}}}),
    )
    .await;
    statefulset_with_replicas(&sets, "held", 1, WAIT).await;
}

#[tokio::test]
async fn a_spec_the_schema_accepts_but_validation_refuses_fails_with_the_field() {
    let env = Env::start(Options::default()).await;
    // Without the webhook installed, the controller applies the same rules itself.
    env.create_database(
        "old",
        json!({"engine": "postgres", "version": "9.6", "storage": "1Gi"}),
    )
    .await;
    let status = eventually(WAIT, "Failed phase", || async {
        let db = env.databases().get("old").await.ok()?;
        db.status.filter(|s| s.phase == database_api::Phase::Failed)
    })
    .await;
    let message = status.message.unwrap_or_default();
    assert!(message.contains("spec.version"), "{message}");
    let degraded =
        database_api::conditions::find(&status.conditions, "Degraded").expect("Degraded");
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "InvalidSpec")
    );
    let sets: Api<StatefulSet> = env.api();
    assert!(
        sets.get_opt("old").await.expect("get").is_none(),
        "nothing is created for an invalid spec"
    );
}

#[tokio::test]
async fn a_controller_scoped_to_other_namespaces_ignores_this_one() {
    let mut env = Env::start(Options::default()).await;
    env.start_controller(Scope::Namespaces(vec!["elsewhere".to_owned()]))
        .await;
    env.create_database(
        "ignored",
        json!({"engine": "postgres", "version": "16", "storage": "1Gi"}),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let sets: Api<StatefulSet> = env.api();
    assert!(sets.get_opt("ignored").await.expect("get").is_none());
    let db = env.databases().get("ignored").await.expect("get");
    assert!(
        db.finalizers().is_empty(),
        "not even the finalizer was added"
    );
}

#[tokio::test]
async fn shrinking_storage_is_reported_and_the_volumes_keep_their_size() {
    let env = Env::start(Options::default()).await;
    env.create_database(
        "shrink",
        json!({"engine": "postgres", "version": "16", "storage": "10Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    wait_for(&sets, "shrink").await;
    env.patch_database("shrink", json!({"spec": {"storage": "5Gi"}}))
        .await;
    let degraded = env.condition_true("shrink", "Degraded").await;
    assert_eq!(degraded.reason, "StorageShrinkRefused");
    assert!(
        degraded.message.contains("cannot shrink"),
        "{}",
        degraded.message
    );
    let set = sets.get("shrink").await.expect("get");
    let template = &set
        .spec
        .and_then(|s| s.volume_claim_templates)
        .expect("templates")[0];
    let size = template
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .map(|r| r["storage"].0.clone());
    assert_eq!(size.as_deref(), Some("10Gi"));
}

/// The controller's managedFields entries on `set` without a subresource, as
/// `(operation)` strings.
fn controller_operations(set: &StatefulSet) -> Vec<String> {
    set.managed_fields()
        .iter()
        .filter(|e| e.manager.as_deref() == Some(database_api::constants::FIELD_MANAGER))
        .filter(|e| e.subresource.as_deref().unwrap_or_default().is_empty())
        .filter_map(|e| e.operation.clone())
        .collect()
}

#[tokio::test]
async fn fields_of_a_created_object_pass_to_apply_ownership_and_are_removed_once_dropped() {
    let env = Env::start(Options::default()).await;
    env.create_database(
        "owned",
        json!({"engine": "postgres", "version": "16", "storage": "1Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    let created = wait_for(&sets, "owned").await;
    assert_eq!(
        controller_operations(&created),
        ["Update"],
        "created with POST"
    );

    // A field the controller once set and no longer sets (as after an upgrade that
    // stops setting it): a label written under the controller's own field manager.
    let leftover = Patch::Merge(json!({"metadata": {"labels": {"leftover": "yes"}}}));
    sets.patch(
        "owned",
        &PatchParams {
            field_manager: Some(database_api::constants::FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        },
        &leftover,
    )
    .await
    .expect("label added");

    // The next change the controller applies takes its fields into its Apply entry, so
    // the apply drops the label it does not set.
    env.patch_database("owned", json!({"spec": {"replicas": 2}}))
        .await;
    let applied = statefulset_with_replicas(&sets, "owned", 2, WAIT).await;
    assert_eq!(controller_operations(&applied), ["Apply"]);
    assert!(
        !applied.labels().contains_key("leftover"),
        "{:?}",
        applied.labels()
    );
}

#[tokio::test]
async fn a_refused_write_is_reported_as_a_sentence_with_the_api_servers_message() {
    let env = Env::start(Options::default()).await;
    // An admission policy of the cluster's own refuses the StatefulSet the controller
    // writes once the Database asks for more than three instances.
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "at-most-three"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["apps"], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["statefulsets"],
            }]},
            "validations": [{
                "expression": "object.spec.replicas <= 3",
                "message": "StatefulSets in this cluster run at most 3 replicas",
            }],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "at-most-three"},
        "spec": {"policyName": "at-most-three", "validationActions": ["Deny"]},
    });
    for (object, kind) in [
        (policy, "ValidatingAdmissionPolicy"),
        (binding, "ValidatingAdmissionPolicyBinding"),
    ] {
        let (ok, _, stderr) = kubectl(&env.plane, &["apply", "-f", "-"], &object.to_string()).await;
        assert!(ok, "{kind} applied: {stderr}");
    }
    env.create_database(
        "orders",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2}),
    )
    .await;
    statefulset_with_replicas(&env.api(), "orders", 2, WAIT).await;
    // The policy may take a moment to reach admission, and a StatefulSet written before
    // it did keeps what it was given: ask for 4 and 5 in turn, each a change to write,
    // until one is refused.
    let asked = std::sync::atomic::AtomicI32::new(4);
    let note = eventually(WAIT, "a ReconcileFailed event", || async {
        let replicas = asked.fetch_xor(4 ^ 5, std::sync::atomic::Ordering::SeqCst);
        let _ = env
            .databases()
            .patch(
                "orders",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await;
        let events: Api<k8s_openapi::api::events::v1::Event> = env.api();
        events
            .list(&kube::api::ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find_map(|e| {
                (e.reason.as_deref() == Some("ReconcileFailed")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("orders"))
                .then(|| e.note.unwrap_or_default())
            })
    })
    .await;
    assert!(
        note.starts_with("Applying StatefulSet orders failed: "),
        "{note}"
    );
    assert!(
        note.contains("StatefulSets in this cluster run at most 3 replicas"),
        "{note}"
    );
    for residue in ["Status {", "ApiError", "Some(", "code:"] {
        assert!(!note.contains(residue), "{note}");
    }
}
