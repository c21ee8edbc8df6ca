//! Bad input, through the real API server with the webhook registered: a table of
//! invalid Databases, each refused (by the CRD schema or the webhook) with a message
//! that names the field, and none of them stored.

// The invalid objects are one table, read best as one list.
#![allow(clippy::too_many_lines)]

mod cluster;
mod common;

use cluster::{cluster_with_webhook, databases};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testenv::toolkit::fixtures::database_object;

fn spec(overrides: &Value) -> Value {
    let mut spec = json!({"engine": "postgres", "version": "16.4", "storage": "10Gi"});
    for (key, value) in overrides.as_object().into_iter().flatten() {
        if value.is_null() {
            spec.as_object_mut().map(|m| m.remove(key));
        } else {
            spec[key] = value.clone();
        }
    }
    spec
}

/// (object name, spec changes, field the message must name)
fn creates() -> Vec<(String, Value, &'static str)> {
    let mut all = basic_creates();
    all.extend(production_creates());
    all
}

/// Invalid values of the production fields: resources, scheduling, Pod metadata, the
/// client Service and engine parameters.
fn production_creates() -> Vec<(String, Value, &'static str)> {
    let case = |name: &str, overrides: Value, field| (name.to_owned(), spec(&overrides), field);
    vec![
        case(
            "parameters-owned",
            json!({"parameters": {"port": "6543"}}),
            "spec.parameters.port",
        ),
        case(
            "parameters-unknown",
            json!({"parameters": {"wrok_mem": "4MB"}}),
            "spec.parameters.wrok_mem",
        ),
        case(
            "parameters-two-lines",
            json!({"parameters": {"work_mem": "4MB\nfsync = off"}}),
            "spec.parameters.work_mem",
        ),
        case(
            "parameters-bad-value",
            json!({"parameters": {"work_mem": "16 megabytes"}}),
            "spec.parameters.work_mem",
        ),
        case(
            "resources-over-limit",
            json!({"resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}),
            "spec.resources.requests.cpu",
        ),
        case(
            "resources-tiny-memory",
            json!({"resources": {"limits": {"memory": "64Mi"}}}),
            "spec.resources.limits.memory",
        ),
        case(
            "storage-class-upper",
            json!({"storageClassName": "Fast"}),
            "spec.storageClassName",
        ),
        case(
            "toleration-operator",
            json!({"tolerations": [{"key": "a", "operator": "Near"}]}),
            "spec.tolerations[0].operator",
        ),
        case(
            "spread-skew",
            json!({"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
            "spec.topologySpreadConstraints[0].maxSkew",
        ),
        case(
            "pod-label-operator",
            json!({"podMetadata": {"labels": {"app.kubernetes.io/instance": "other"}}}),
            "spec.podMetadata.labels.app.kubernetes.io/instance",
        ),
        case(
            "service-type",
            json!({"service": {"type": "External"}}),
            "spec.service.type",
        ),
    ]
}

/// Invalid values of the basic fields.
fn basic_creates() -> Vec<(String, Value, &'static str)> {
    let case = |name: &str, overrides: Value, field| (name.to_owned(), spec(&overrides), field);
    vec![
        case("engine-oracle", json!({"engine": "oracle"}), "spec.engine"),
        case("engine-empty", json!({"engine": ""}), "spec.engine"),
        case("engine-number", json!({"engine": 5}), "spec.engine"),
        case("engine-upper", json!({"engine": "Postgres"}), "spec.engine"),
        case("engine-missing", json!({"engine": null}), "spec.engine"),
        case("version-missing", json!({"version": null}), "spec.version"),
        case("version-empty", json!({"version": ""}), "spec.version"),
        case(
            "version-words",
            json!({"version": "latest"}),
            "spec.version",
        ),
        case("version-pg-12", json!({"version": "12"}), "spec.version"),
        case("version-pg-19", json!({"version": "19.0"}), "spec.version"),
        case(
            "version-mysql-5",
            json!({"engine": "mysql", "version": "5.7"}),
            "spec.version",
        ),
        case(
            "version-mysql-8-1",
            json!({"engine": "mysql", "version": "8.1"}),
            "spec.version",
        ),
        case(
            "version-mongo-5",
            json!({"engine": "mongodb", "version": "5.0"}),
            "spec.version",
        ),
        case(
            "version-mongo-9",
            json!({"engine": "mongodb", "version": "9.0"}),
            "spec.version",
        ),
        case(
            "version-suffix",
            json!({"version": "16.4-alpine"}),
            "spec.version",
        ),
        case(
            "version-long",
            json!({"version": "1".repeat(40)}),
            "spec.version",
        ),
        case("version-number", json!({"version": 16}), "spec.version"),
        case("storage-mi", json!({"storage": "100Mi"}), "spec.storage"),
        case("storage-gb", json!({"storage": "10GB"}), "spec.storage"),
        case("storage-zero", json!({"storage": "0Gi"}), "spec.storage"),
        case(
            "storage-huge",
            json!({"storage": "20000Gi"}),
            "spec.storage",
        ),
        case(
            "storage-decimal",
            json!({"storage": "1.5Gi"}),
            "spec.storage",
        ),
        case(
            "storage-negative",
            json!({"storage": "-1Gi"}),
            "spec.storage",
        ),
        case("storage-missing", json!({"storage": null}), "spec.storage"),
        case("storage-number", json!({"storage": 10}), "spec.storage"),
        case("replicas-zero", json!({"replicas": 0}), "spec.replicas"),
        case("replicas-six", json!({"replicas": 6}), "spec.replicas"),
        case(
            "replicas-negative",
            json!({"replicas": -1}),
            "spec.replicas",
        ),
        case(
            "replicas-text",
            json!({"replicas": "three"}),
            "spec.replicas",
        ),
        case(
            "replicas-huge",
            json!({"replicas": 4_294_967_296_i64}),
            "spec.replicas",
        ),
        case(
            "policy-unknown",
            json!({"deletionPolicy": "Archive"}),
            "spec.deletionPolicy",
        ),
        case(
            "policy-lower",
            json!({"deletionPolicy": "delete"}),
            "spec.deletionPolicy",
        ),
        case(&"n".repeat(53), json!({}), "metadata.name"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_invalid_database_is_refused_with_a_message_naming_the_field() {
    let (_plane, client, _webhook) = cluster_with_webhook().await;
    let api = databases(&client);
    let cases = creates();
    assert!(cases.len() >= 30, "{} cases", cases.len());
    for (name, spec, field) in &cases {
        let err = api
            .create(&PostParams::default(), &database_object(name, spec))
            .await
            .expect_err(name);
        let message = err.to_string();
        assert!(
            message.contains(field),
            "{name}: the message does not name {field}: {message}"
        );
    }
    assert!(
        api.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty(),
        "an invalid object was stored"
    );

    // Updates that break the rules: the stored object keeps its spec.
    let created = api
        .create(
            &PostParams::default(),
            &database_object(
                "valid",
                &spec(&json!({"engine": "mysql", "version": "8.4", "storage": "10Gi"})),
            ),
        )
        .await
        .expect("a valid Database is accepted");
    let updates = [
        (json!({"engine": "postgres"}), "spec.engine"),
        (json!({"storage": "5Gi"}), "spec.storage"),
        (json!({"version": "8.0"}), "spec.version"),
        (json!({"replicas": 9}), "spec.replicas"),
    ];
    for (change, field) in updates {
        let err = api
            .patch(
                "valid",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": change})),
            )
            .await
            .expect_err(field);
        assert!(err.to_string().contains(field), "{field}: {err}");
    }
    // Compared with the spec as created (defaults included), so that a field the schema
    // defaults later does not break the comparison.
    let stored = api.get("valid").await.expect("get");
    assert_eq!(stored.data["spec"], created.data["spec"]);
    assert_eq!(stored.data["spec"]["version"], "8.4");
    assert_eq!(stored.data["spec"]["storage"], "10Gi");
    eprintln!(
        "{} invalid creates and 4 invalid updates refused",
        cases.len()
    );
}
