//! deploy/default as a user installs it, rendered by the pinned kubectl's kustomize, and
//! its objects created one by one.

use std::path::Path;

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::Value;

/// Every object `kubectl kustomize deploy/default` renders.
pub fn render_default() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/default");
    let kubectl = testenv::assets::find("kubectl").expect("kubectl");
    let output = std::process::Command::new(kubectl)
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("kubectl kustomize");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_saphyr::from_multiple(&String::from_utf8_lossy(&output.stdout)).expect("YAML documents")
}

/// The one rendered object of `kind` named `name`.
pub fn object<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found = objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name);
    assert!(found.is_some(), "no {kind} {name} rendered");
    found.expect("found")
}

/// Creates `object` as it is (its namespace must exist).
pub async fn create(client: &kube::Client, object: &Value) {
    let (group, version) = match object["apiVersion"]
        .as_str()
        .expect("apiVersion")
        .split_once('/')
    {
        Some((group, version)) => (group, version),
        None => ("", object["apiVersion"].as_str().unwrap_or_default()),
    };
    let kind = object["kind"].as_str().expect("kind");
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
    let created = api.create(&PostParams::default(), &dynamic).await;
    assert!(created.is_ok(), "creating {kind}: {created:?}");
}
