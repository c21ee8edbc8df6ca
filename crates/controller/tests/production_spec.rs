//! The production fields against a real API server: each reaches the StatefulSet, the
//! client Service or the configuration ConfigMap as documented, a hand edit of what
//! the operator set is reverted, and bad values are refused naming the field.

// Each spec change and what it must change are one scenario, told in one function.
#![allow(clippy::too_many_lines)]

mod common;

use common::Env;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use testenv::Options;
use testenv::toolkit::wait::{WAIT, eventually, gone, wait_for};

fn production_spec() -> serde_json::Value {
    json!({
        "engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2,
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
        "storageClassName": "fast-ssd",
        "nodeSelector": {"disktype": "ssd"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}],
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}],
        "priorityClassName": "system-cluster-critical",
        "podMetadata": {"labels": {"team": "payments"}, "annotations": {"example.com/scrape": "true"}},
        "parameters": {"work_mem": "16MB", "max_connections": "150"},
        "service": {"type": "NodePort", "annotations": {"example.com/exposed": "yes"}},
    })
}

#[tokio::test]
async fn every_field_reaches_its_object_and_a_hand_edit_is_reverted() {
    let env = Env::start(Options::default()).await;
    env.create_database("orders", production_spec()).await;
    let (text, restart_revision) = fields_reach_their_objects(&env).await;
    hand_edits_are_put_back(&env, &text).await;
    changes_land_where_they_should(&env, &restart_revision).await;
}

/// The file's text and the template's restart fingerprint, once every field is checked.
async fn fields_reach_their_objects(env: &Env) -> (String, String) {
    let sets: Api<StatefulSet> = env.api();
    let set = wait_for(&sets, "orders").await;
    let spec = set.spec.expect("spec");
    let claim = &spec.volume_claim_templates.expect("claims")[0];
    assert_eq!(
        claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.as_deref()),
        Some("fast-ssd")
    );
    let template = spec.template;
    let pod = template.spec.expect("pod");
    assert_eq!(pod.node_selector.expect("selector")["disktype"], "ssd");
    assert_eq!(
        pod.tolerations.expect("tolerations")[0].key.as_deref(),
        Some("dedicated")
    );
    assert_eq!(pod.topology_spread_constraints.expect("spread").len(), 1);
    assert_eq!(
        pod.priority_class_name.as_deref(),
        Some("system-cluster-critical")
    );
    let container = &pod.containers[0];
    let resources = container.resources.clone().expect("resources");
    assert_eq!(resources.requests.expect("requests")["cpu"].0, "500m");
    assert_eq!(resources.limits.expect("limits")["memory"].0, "2Gi");
    assert_eq!(
        container.args.clone().expect("args"),
        ["-c", "config_file=/etc/database/config/postgresql.conf"]
    );
    let metadata = template.metadata.expect("metadata");
    assert_eq!(metadata.labels.expect("labels")["team"], "payments");
    let annotations = metadata.annotations.expect("annotations");
    assert_eq!(annotations["example.com/scrape"], "true");
    let restart_revision = annotations["mycompany.io/restart-settings"].clone();

    let configmaps: Api<ConfigMap> = env.api();
    let config = wait_for(&configmaps, "orders-config").await;
    let text = config.data.expect("data")["postgresql.conf"].clone();
    for line in [
        "include_if_exists = '/var/lib/postgresql/data/pgdata/postgresql.conf'",
        "work_mem = '16MB'",
        "max_connections = '150'",
        "shared_buffers = '512MB'",
        "effective_cache_size = '1536MB'",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in {text}");
    }

    let services: Api<Service> = env.api();
    let rw = wait_for(&services, "orders-rw").await;
    assert_eq!(rw.spec.expect("spec").type_.as_deref(), Some("NodePort"));
    assert_eq!(
        rw.metadata.annotations.expect("annotations")["example.com/exposed"],
        "yes"
    );
    (text, restart_revision)
}

async fn hand_edits_are_put_back(env: &Env, text: &str) {
    let services: Api<Service> = env.api();
    let configmaps: Api<ConfigMap> = env.api();
    // Hand edits of what the operator set are put back.
    services
        .patch("orders-rw", &PatchParams::default(), &Patch::Merge(json!({"spec": {"type": "ClusterIP", "ports": [{"name": "postgres", "port": 5432, "nodePort": null}]}})))
        .await
        .expect("edited");
    configmaps
        .patch(
            "orders-config",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"postgresql.conf": "fsync = off\n"}})),
        )
        .await
        .expect("edited");
    eventually(WAIT, "the Service is a NodePort again", || async {
        let service = services.get("orders-rw").await.ok()?;
        (service.spec?.type_.as_deref() == Some("NodePort")).then_some(())
    })
    .await;
    eventually(WAIT, "the file is the operator's again", || async {
        let config = configmaps.get("orders-config").await.ok()?;
        (config.data?.get("postgresql.conf")? == text).then_some(())
    })
    .await;
}

async fn changes_land_where_they_should(env: &Env, restart_revision: &str) {
    let sets: Api<StatefulSet> = env.api();
    let services: Api<Service> = env.api();
    let configmaps: Api<ConfigMap> = env.api();
    // A setting applied in place changes the file, not the template; one that needs a
    // restart changes the template.
    env.patch_database(
        "orders",
        json!({"spec": {"parameters": {"work_mem": "32MB", "max_connections": "150"}}}),
    )
    .await;
    eventually(WAIT, "the new work_mem in the file", || async {
        let config = configmaps.get("orders-config").await.ok()?;
        config
            .data?
            .get("postgresql.conf")?
            .contains("work_mem = '32MB'")
            .then_some(())
    })
    .await;
    let set = sets.get("orders").await.expect("set");
    assert_eq!(
        set.spec
            .expect("spec")
            .template
            .metadata
            .expect("meta")
            .annotations
            .expect("annotations")["mycompany.io/restart-settings"],
        restart_revision,
        "work_mem needs no restart"
    );
    env.patch_database(
        "orders",
        json!({"spec": {"parameters": {"max_connections": "200"}, "service": null}}),
    )
    .await;
    eventually(WAIT, "a new restart revision in the template", || async {
        let set = sets.get("orders").await.ok()?;
        let annotations = set.spec?.template.metadata?.annotations?;
        (annotations.get("mycompany.io/restart-settings")? != restart_revision).then_some(())
    })
    .await;
    // Without spec.service the client Service is back to the default type.
    eventually(WAIT, "the Service is a ClusterIP again", || async {
        let service = services.get("orders-rw").await.ok()?;
        let spec = service.spec?;
        (spec.type_.as_deref() == Some("ClusterIP")
            && spec.ports?.iter().all(|p| p.node_port.is_none()))
        .then_some(())
    })
    .await;
    // Without parameters and memory limit the file goes, and so does its mount.
    env.patch_database(
        "orders",
        json!({"spec": {"parameters": null, "resources": null}}),
    )
    .await;
    gone(&configmaps, "orders-config", WAIT).await;
    let set = sets.get("orders").await.expect("set");
    assert_eq!(
        set.spec
            .expect("spec")
            .template
            .spec
            .expect("pod")
            .containers[0]
            .args,
        None
    );
}

#[tokio::test]
async fn bad_values_are_refused_naming_the_field_and_the_storage_class_cannot_change() {
    let env = Env::start(Options::default()).await;
    // Without the webhook installed the controller refuses with the same rules.
    let mut bad = production_spec();
    bad["parameters"] = json!({"port": "6543"});
    bad["resources"] = json!({"limits": {"memory": "64Mi"}});
    env.create_database("bad", bad).await;
    let status = eventually(WAIT, "Failed phase", || async {
        let db = env.databases().get("bad").await.ok()?;
        db.status.filter(|s| s.phase == database_api::Phase::Failed)
    })
    .await;
    let message = status.message.unwrap_or_default();
    assert!(
        message.contains("spec.parameters.port: is set by the operator"),
        "{message}"
    );
    assert!(
        message.contains("spec.resources.limits.memory: must be at least 256Mi"),
        "{message}"
    );

    // The API server keeps the storage class: CEL refuses a change, and setting one
    // after creation.
    env.create_database("orders", production_spec()).await;
    let databases = env.databases();
    for patch in [
        json!({"spec": {"storageClassName": "slow"}}),
        json!({"spec": {"storageClassName": null}}),
    ] {
        let error = databases
            .patch("orders", &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect_err("refused");
        assert!(
            error.to_string().contains("storageClassName is immutable"),
            "{error}"
        );
    }
    env.create_database(
        "plain",
        json!({"engine": "mysql", "version": "8.4", "storage": "1Gi"}),
    )
    .await;
    let error = databases
        .patch(
            "plain",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"storageClassName": "fast"}})),
        )
        .await
        .expect_err("refused");
    assert!(
        error.to_string().contains("storageClassName is immutable"),
        "{error}"
    );
    // The schema refuses a Service type it does not know, naming the field.
    let error = databases
        .patch(
            "plain",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"service": {"type": "External"}}})),
        )
        .await
        .expect_err("refused");
    assert!(error.to_string().contains("spec.service.type"), "{error}");
}

#[tokio::test]
async fn monitoring_adds_the_exporter_with_its_own_user_secret_made_once() {
    let env = Env::start(Options::default()).await;
    env.create_database(
        "orders",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi"}),
    )
    .await;
    let sets: Api<StatefulSet> = env.api();
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = env.api();
    let containers = |set: &StatefulSet| -> Vec<String> {
        set.spec
            .iter()
            .flat_map(|s| s.template.spec.iter())
            .flat_map(|p| &p.containers)
            .map(|c| c.name.clone())
            .collect()
    };
    assert_eq!(containers(&wait_for(&sets, "orders").await), ["database"]);
    assert!(
        secrets
            .get_opt("orders-monitor")
            .await
            .expect("read")
            .is_none()
    );

    env.patch_database("orders", json!({"spec": {"monitoring": {"enabled": true}}}))
        .await;
    let set = eventually(WAIT, "the exporter in the Pod template", || async {
        let set = sets.get("orders").await.ok()?;
        (containers(&set) == ["database", "exporter"]).then_some(set)
    })
    .await;
    let pod = set.spec.and_then(|s| s.template.spec).expect("pod spec");
    let exporter = &pod.containers[1];
    let port = &exporter.ports.as_ref().expect("ports")[0];
    assert_eq!(
        (port.name.as_deref(), port.container_port),
        (Some("metrics"), 9187)
    );
    assert_eq!(
        exporter.image.as_deref(),
        Some("quay.io/prometheuscommunity/postgres-exporter:v0.17.1")
    );
    let database_env = pod.containers[0].env.as_ref().expect("env");
    assert!(
        database_env
            .iter()
            .any(|e| e.name == "DATABASE_MONITOR_PASSWORD"),
        "the database container gets the password the controller creates the user with"
    );
    let secret = wait_for(&secrets, "orders-monitor").await;
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/basic-auth"));
    let owner = secret.metadata.owner_references.as_ref().expect("owned")[0].clone();
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("Database", Some(true))
    );
    // No instance is ready on this tier, so the user waits, and says why.
    let what = "MonitoringReady False while no primary is ready";
    let waiting = eventually(WAIT, what, || async {
        let status = env.databases().get("orders").await.ok()?.status?;
        database_api::conditions::find(&status.conditions, "MonitoringReady")
            .filter(|c| c.status == "False" && c.reason == "UserPending")
            .cloned()
    })
    .await;
    assert!(
        waiting.message.contains("ready primary"),
        "{}",
        waiting.message
    );

    // Turned off and on again, the exporter keeps the password it had.
    env.patch_database(
        "orders",
        json!({"spec": {"monitoring": {"enabled": false}}}),
    )
    .await;
    eventually(WAIT, "the exporter gone from the Pod template", || async {
        let set = sets.get("orders").await.ok()?;
        (containers(&set) == ["database"]).then_some(())
    })
    .await;
    env.patch_database("orders", json!({"spec": {"monitoring": {"enabled": true}}}))
        .await;
    eventually(WAIT, "the exporter back", || async {
        let set = sets.get("orders").await.ok()?;
        (containers(&set).len() == 2).then_some(())
    })
    .await;
    let again = secrets.get("orders-monitor").await.expect("Secret kept");
    assert_eq!(again.data, secret.data, "the password was never replaced");
    assert_eq!(again.metadata.uid, secret.metadata.uid);
}
