//! deploy/default as a user installs it, rendered by the pinned kubectl's kustomize.

use std::path::Path;

use serde_json::Value;
use testenv::toolkit::kubectl::kustomize;

/// Every object `kubectl kustomize deploy/default` renders.
pub fn render_default() -> Vec<Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/default");
    serde_saphyr::from_multiple(&kustomize(&dir)).expect("YAML documents")
}

/// The one rendered object of `kind` named `name`.
pub fn object<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found = objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name);
    assert!(found.is_some(), "no {kind} {name} rendered");
    found.expect("found")
}
