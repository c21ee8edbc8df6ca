//! Unit tests of the rules for resources, scheduling, Pod metadata, the client Service
//! and engine parameters.

use serde_json::{Value, json};

use super::*;

fn with(engine: &str, extra: &Value) -> Database {
    let mut spec = json!({"engine": engine, "version": "16", "storage": "10Gi"});
    if engine == "mysql" {
        spec["version"] = json!("8.4");
    } else if engine == "mongodb" {
        spec["version"] = json!("7.0");
    }
    for (key, value) in extra.as_object().expect("an object") {
        spec[key] = value.clone();
    }
    serde_json::from_value(json!({
        "apiVersion": "mycompany.io/v1", "kind": "Database",
        "metadata": {"name": "orders", "namespace": "shop"}, "spec": spec,
    }))
    .expect("a Database")
}

fn paths(db: &Database) -> Vec<String> {
    validate(db, &Limits::default())
        .errors
        .into_iter()
        .map(|e| e.path)
        .collect()
}

fn message(db: &Database) -> String {
    validate(db, &Limits::default()).message()
}

#[test]
fn every_new_field_is_accepted_when_well_formed() {
    let db = with(
        "postgres",
        &json!({
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
            "storageClassName": "fast-ssd",
            "nodeSelector": {"disktype": "ssd"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}}},
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}],
            "priorityClassName": "databases",
            "podMetadata": {"labels": {"team": "payments"}, "annotations": {"example.com/scrape": "true"}},
            "parameters": {"work_mem": "16MB", "shared_buffers": "512MB", "log_min_duration_statement": "250ms"},
            "service": {"type": "LoadBalancer", "annotations": {"service.beta.kubernetes.io/aws-load-balancer-internal": "true"}},
        }),
    );
    assert!(paths(&db).is_empty(), "{}", message(&db));
}

#[test]
fn resources_are_checked_by_name_quantity_and_request_against_limit() {
    let db = with(
        "mysql",
        &json!({"resources": {
            "requests": {"cpu": "2", "memory": "lots", "gpu": "1"},
            "limits": {"cpu": "1", "memory": "128Mi"},
        }}),
    );
    let mut found = paths(&db);
    found.sort();
    assert_eq!(
        found,
        [
            "spec.resources.limits.memory",
            "spec.resources.requests.cpu",
            "spec.resources.requests.gpu",
            "spec.resources.requests.memory",
        ]
    );
    let text = message(&db);
    assert!(
        text.contains("spec.resources.requests.cpu: 2 must not exceed the limit, 1"),
        "{text}"
    );
    assert!(
        text.contains("spec.resources.limits.memory: must be at least 256Mi"),
        "{text}"
    );
    assert!(
        text.contains(r#"spec.resources.requests.memory: "lots" is not a quantity"#),
        "{text}"
    );
}

#[test]
fn scheduling_rules_name_the_broken_field() {
    let db = with(
        "postgres",
        &json!({
            "storageClassName": "Fast_SSD",
            "nodeSelector": {"bad key!": "x"},
            "tolerations": [{"operator": "Exists", "value": "x"}, {"key": "a", "operator": "Near"}],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 0, "podAffinityTerm": {"topologyKey": ""}}]}},
            "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}],
        }),
    );
    let mut found = paths(&db);
    found.sort();
    assert_eq!(
        found,
        [
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.topologyKey",
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
            "spec.nodeSelector.bad key!",
            "spec.storageClassName",
            "spec.tolerations[0].value",
            "spec.tolerations[1].operator",
            "spec.topologySpreadConstraints[0].maxSkew",
            "spec.topologySpreadConstraints[0].whenUnsatisfiable",
        ]
    );
}

#[test]
fn pod_metadata_may_not_take_the_operators_labels_or_annotations() {
    let db = with(
        "mongodb",
        &json!({"podMetadata": {
            "labels": {"app.kubernetes.io/instance": "other", "mycompany.io/role": "primary", "team": "a"},
            "annotations": {"mycompany.io/restart": "x", "example.com/ok": "y"},
        }}),
    );
    let mut found = paths(&db);
    found.sort();
    assert_eq!(
        found,
        [
            "spec.podMetadata.annotations.mycompany.io/restart",
            "spec.podMetadata.labels.app.kubernetes.io/instance",
            "spec.podMetadata.labels.mycompany.io/role",
        ]
    );
}

#[test]
fn parameters_are_checked_against_the_engines_table() {
    let db = with(
        "postgres",
        &json!({"parameters": {"port": "6543", "wrok_mem": "4MB", "work_mem": "a\nb"}}),
    );
    let text = message(&db);
    assert!(
        text.contains(
            "spec.parameters.port: is set by the operator (the Services and probes use 5432)"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "spec.parameters.wrok_mem: is not among the postgres settings the operator accepts"
        ),
        "{text}"
    );
    assert!(
        text.contains("spec.parameters.work_mem: the value must be one line"),
        "{text}"
    );
    let twice = with(
        "mysql",
        &json!({"parameters": {"max-connections": "200", "max_connections": "300"}}),
    );
    assert!(
        message(&twice).contains("is the same setting as spec.parameters.max-connections"),
        "{}",
        message(&twice)
    );
    let mongodb = with(
        "mongodb",
        &json!({"parameters": {"security.authorization": "disabled", "setParameter.cursorTimeoutMillis": "60000"}}),
    );
    assert_eq!(paths(&mongodb), ["spec.parameters.security.authorization"]);
}

#[test]
fn the_storage_class_cannot_change_or_appear_after_creation() {
    let before = with("postgres", &json!({}));
    let after = with("postgres", &json!({"storageClassName": "fast"}));
    let outcome = validate_update(&before, &after, &Limits::default());
    assert_eq!(
        outcome.message(),
        "spec.storageClassName: is immutable: it was the cluster's default and cannot become \"fast\" (a StatefulSet's volumes keep the class they were created with)"
    );
    assert!(validate_update(&after, &after, &Limits::default()).is_allowed());
}

#[test]
fn lowering_a_setting_a_standby_needs_warns_only_with_replicas() {
    let before = with(
        "postgres",
        &json!({"replicas": 2, "parameters": {"max_connections": "200", "work_mem": "8MB"}}),
    );
    let after = with(
        "postgres",
        &json!({"replicas": 2, "parameters": {"max_connections": "100", "work_mem": "4MB"}}),
    );
    let outcome = validate_update(&before, &after, &Limits::default());
    assert!(outcome.is_allowed());
    assert_eq!(outcome.warnings.len(), 1, "{:?}", outcome.warnings);
    assert!(
        outcome.warnings[0]
            .starts_with("spec.parameters.max_connections goes down from 200 to 100"),
        "{:?}",
        outcome.warnings
    );
    let mut single = after.clone();
    single.spec.replicas = 1;
    assert!(
        validate_update(&before, &single, &Limits::default())
            .warnings
            .is_empty()
    );
}

#[test]
fn a_monitoring_image_must_be_a_reference() {
    let fine = with(
        "postgres",
        &json!({"monitoring": {"enabled": true, "image": "registry.example/postgres-exporter:v0.17.1"}}),
    );
    assert!(paths(&fine).is_empty());
    assert!(paths(&with("mysql", &json!({"monitoring": {"enabled": true}}))).is_empty());
    let spaced = with(
        "postgres",
        &json!({"monitoring": {"enabled": true, "image": "postgres exporter"}}),
    );
    assert_eq!(paths(&spaced), ["spec.monitoring.image"]);
    assert!(message(&spaced).contains("quay.io/prometheuscommunity/postgres-exporter:v0.17.1"));
    assert_eq!(
        paths(&with("mongodb", &json!({"monitoring": {"image": ""}}))),
        ["spec.monitoring.image"]
    );
}
