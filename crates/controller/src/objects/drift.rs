//! Deciding whether an apply would change anything, so steady state makes no writes.
//!
//! An owned object needs an apply when it is missing, when what we want differs from
//! what we last applied (a hash kept in an annotation: this catches fields we stopped
//! setting), or when someone changed a field we set (the desired object is no longer a
//! subset of the observed one: this catches drift such as a hand-edited replica count).

use serde_json::Value;

/// Annotation holding the hash of the last applied desired object.
pub const HASH_ANNOTATION: &str = "mycompany.io/desired-hash";

/// A stable 64-bit FNV-1a hash of the desired object's JSON, as hex.
pub fn desired_hash(desired: &Value) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in desired.to_string().bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// Whether every field set in `desired` has the same value in `observed`. Objects may
/// have extra keys (server defaults); lists must match element by element. Nested
/// `apiVersion`/`kind` are ignored: the API server drops them from embedded templates.
pub fn is_subset(desired: &Value, observed: &Value) -> bool {
    subset_at(desired, observed, 0)
}

fn subset_at(desired: &Value, observed: &Value, depth: usize) -> bool {
    match (desired, observed) {
        (Value::Object(want), Value::Object(have)) => want.iter().all(|(key, value)| {
            if depth > 0 && (key == "apiVersion" || key == "kind") {
                return true;
            }
            match have.get(key) {
                Some(found) => subset_at(value, found, depth + 1),
                // An empty value we set is the same as one the server omits.
                None => is_empty(value),
            }
        }),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len()
                && want
                    .iter()
                    .zip(have)
                    .all(|(w, h)| subset_at(w, h, depth + 1))
        }
        (Value::Array(want), Value::Null) => want.is_empty(),
        (want, have) => want == have,
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(map) => map.values().all(is_empty),
        Value::Array(list) => list.is_empty(),
        _ => false,
    }
}

/// Whether the observed object (as JSON) must be applied again to match `desired`.
pub fn needs_apply(desired: &Value, hash: &str, observed: Option<&Value>) -> bool {
    let Some(observed) = observed else {
        return true;
    };
    let applied_hash = observed["metadata"]["annotations"][HASH_ANNOTATION].as_str();
    applied_hash != Some(hash) || !is_subset(desired, observed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_defaults_do_not_count_as_drift() {
        let desired = json!({"spec": {"replicas": 1, "template": {"ports": [{"port": 5432}]}}});
        let observed = json!({"spec": {"replicas": 1, "revisionHistoryLimit": 10, "template": {"ports": [{"port": 5432, "protocol": "TCP"}]}}});
        assert!(is_subset(&desired, &observed));
    }

    #[test]
    fn a_changed_value_is_drift() {
        let desired = json!({"spec": {"replicas": 1}});
        assert!(!is_subset(&desired, &json!({"spec": {"replicas": 3}})));
    }

    #[test]
    fn a_removed_or_added_list_element_is_drift() {
        let desired = json!({"env": [{"name": "A"}, {"name": "B"}]});
        assert!(!is_subset(&desired, &json!({"env": [{"name": "A"}]})));
        assert!(!is_subset(
            &desired,
            &json!({"env": [{"name": "A"}, {"name": "B"}, {"name": "C"}]})
        ));
    }

    #[test]
    fn a_missing_field_is_drift_unless_it_is_empty() {
        assert!(!is_subset(&json!({"a": {"b": 1}}), &json!({})));
        assert!(is_subset(&json!({"a": {}, "b": [], "c": null}), &json!({})));
    }

    #[test]
    fn nested_type_meta_is_ignored_but_top_level_kind_is_not() {
        let desired = json!({"kind": "StatefulSet", "spec": {"volumeClaimTemplates": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim"}]}});
        let observed = json!({"kind": "StatefulSet", "spec": {"volumeClaimTemplates": [{}]}});
        assert!(is_subset(&desired, &observed));
        assert!(!is_subset(
            &desired,
            &json!({"kind": "Deployment", "spec": {"volumeClaimTemplates": [{}]}})
        ));
    }

    #[test]
    fn a_new_desired_hash_forces_an_apply_even_when_fields_match() {
        let desired = json!({"spec": {"replicas": 1}});
        let observed = json!({"metadata": {"annotations": {HASH_ANNOTATION: "old"}}, "spec": {"replicas": 1, "affinity": {}}});
        assert!(needs_apply(&desired, "new", Some(&observed)));
        assert!(!needs_apply(&desired, "old", Some(&observed)));
        assert!(needs_apply(&desired, "old", None));
    }

    #[test]
    fn hashes_are_stable_and_sensitive_to_content() {
        let a = json!({"x": 1});
        assert_eq!(desired_hash(&a), desired_hash(&json!({"x": 1})));
        assert_ne!(desired_hash(&a), desired_hash(&json!({"x": 2})));
        assert_eq!(desired_hash(&a).len(), 16);
    }
}
