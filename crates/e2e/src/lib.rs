//! Helpers for the install tests: render `deploy/default` and split it into objects.

use std::path::PathBuf;

use serde_json::Value;
use testenv::toolkit::kubectl::kustomize;

/// The namespace `deploy/default` installs into.
pub const OPERATOR_NAMESPACE: &str = "database-operator-system";

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.ancestors().nth(2).map_or(here.clone(), PathBuf::from)
}

/// `kubectl kustomize deploy/default` with the pinned kubectl, as separate objects.
pub fn render_default() -> Vec<Value> {
    let yaml = kustomize(&workspace_root().join("deploy/default"));
    serde_saphyr::from_multiple(&yaml).expect("YAML documents")
}

/// Objects of `kind` among `objects`.
pub fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}
