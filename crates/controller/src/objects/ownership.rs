//! Field ownership of objects the controller created with a plain create.
//!
//! A missing owned object is created with POST rather than server-side apply: the API
//! server answers a create sooner than an apply (the benchmark's latency part measures
//! both on the controller's StatefulSet; the README has the figures), and the
//! StatefulSet's creation is what the rest of a new Database waits for. The price is how the API server records
//! it: the controller's fields are owned by an `Update` entry, which later applies do
//! not touch, so a field dropped from the desired object would stay. Before the first
//! apply to such an object, [`adoption_patch`] turns that entry into the controller's
//! `Apply` entry, after which applies own, change and remove those fields as usual.

use database_api::constants::FIELD_MANAGER;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
use serde_json::{Value, json};

const UPDATE: &str = "Update";
const APPLY: &str = "Apply";

fn is_ours(entry: &ManagedFieldsEntry, operation: &str) -> bool {
    entry.manager.as_deref() == Some(FIELD_MANAGER)
        && entry.operation.as_deref() == Some(operation)
        && entry.subresource.as_deref().unwrap_or_default().is_empty()
}

/// A JSON patch that moves the controller's `Update` ownership into its `Apply` entry,
/// guarded by `resource_version`; `None` when there is nothing to move.
pub fn adoption_patch(entries: &[ManagedFieldsEntry], resource_version: &str) -> Option<Value> {
    let update = entries.iter().find(|e| is_ours(e, UPDATE))?;
    let fields = update
        .fields_v1
        .as_ref()
        .map_or(Value::Null, |f| f.0.clone());
    let mut adopted: Vec<ManagedFieldsEntry> = Vec::with_capacity(entries.len());
    let mut merged = false;
    for entry in entries {
        if is_ours(entry, UPDATE) {
            continue;
        }
        let mut entry = entry.clone();
        if is_ours(&entry, APPLY) {
            let mut union = entry.fields_v1.take().map_or(Value::Null, |f| f.0);
            merge(&mut union, &fields);
            entry.fields_v1 = Some(FieldsV1(union));
            merged = true;
        }
        adopted.push(entry);
    }
    if !merged {
        let mut entry = update.clone();
        entry.operation = Some(APPLY.to_owned());
        adopted.push(entry);
    }
    Some(json!([
        {"op": "test", "path": "/metadata/resourceVersion", "value": resource_version},
        {"op": "replace", "path": "/metadata/managedFields", "value": adopted},
    ]))
}

/// Adds every field of `extra` to the field set `into` (both in FieldsV1 form: nested
/// objects whose leaves are `{}`).
fn merge(into: &mut Value, extra: &Value) {
    match (into, extra) {
        (Value::Object(into), Value::Object(extra)) => {
            for (key, value) in extra {
                match into.get_mut(key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        into.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (into @ Value::Null, extra) => *into = extra.clone(),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(
        manager: &str,
        operation: &str,
        subresource: Option<&str>,
        fields: Value,
    ) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            api_version: Some("apps/v1".to_owned()),
            fields_type: Some("FieldsV1".to_owned()),
            fields_v1: Some(FieldsV1(fields)),
            manager: Some(manager.to_owned()),
            operation: Some(operation.to_owned()),
            subresource: subresource.map(str::to_owned),
            time: None,
        }
    }

    fn entries_of(patch: &Value) -> Vec<ManagedFieldsEntry> {
        serde_json::from_value(patch[1]["value"].clone()).expect("entries")
    }

    #[test]
    fn a_created_object_has_its_update_entry_turned_into_an_apply_entry() {
        let fields = json!({"f:spec": {"f:replicas": {}}});
        let status = entry(
            "kube-controller-manager",
            "Update",
            Some("status"),
            json!({"f:status": {}}),
        );
        let entries = [
            entry(FIELD_MANAGER, "Update", None, fields.clone()),
            status.clone(),
        ];
        let patch = adoption_patch(&entries, "42").expect("a patch");
        assert_eq!(
            patch[0],
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "42"})
        );
        let adopted = entries_of(&patch);
        assert_eq!(adopted.len(), 2);
        assert_eq!(adopted[0], status, "other managers are kept as they are");
        assert_eq!(adopted[1].operation.as_deref(), Some("Apply"));
        assert_eq!(adopted[1].manager.as_deref(), Some(FIELD_MANAGER));
        assert_eq!(adopted[1].fields_v1, Some(FieldsV1(fields)));
    }

    #[test]
    fn an_existing_apply_entry_takes_the_union_of_both() {
        let entries = [
            entry(
                FIELD_MANAGER,
                "Apply",
                None,
                json!({"f:spec": {"f:replicas": {}}}),
            ),
            entry(
                FIELD_MANAGER,
                "Update",
                None,
                json!({"f:spec": {"f:template": {"f:spec": {}}}, "f:metadata": {}}),
            ),
        ];
        let adopted = entries_of(&adoption_patch(&entries, "7").expect("a patch"));
        assert_eq!(adopted.len(), 1);
        assert_eq!(
            adopted[0].fields_v1,
            Some(FieldsV1(json!({
                "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {}}},
                "f:metadata": {},
            })))
        );
    }

    #[test]
    fn nothing_to_adopt_without_an_update_entry_of_ours() {
        let entries = [
            entry(FIELD_MANAGER, "Apply", None, json!({})),
            entry(FIELD_MANAGER, "Update", Some("status"), json!({})),
            entry("kubectl-edit", "Update", None, json!({})),
        ];
        assert_eq!(adoption_patch(&entries, "1"), None);
    }
}
