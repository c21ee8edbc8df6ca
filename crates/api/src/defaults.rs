//! Defaults for what a user leaves out of a Database. Defaults only fill gaps: a value
//! the user wrote is never changed.
//!
//! - `spec.replicas`: [`DEFAULT_REPLICAS`] (1) when absent.
//! - `spec.deletionPolicy`: `Retain` when absent, so deleting a Database keeps its data
//!   unless the user asked otherwise.
//! - the label `app.kubernetes.io/name: <engine>` on the Database when absent, so
//!   `kubectl get db -l app.kubernetes.io/name=postgres` finds every postgres.
//!
//! The CRD schema defaults the two spec fields too; the webhook applies all three at
//! admission and the controller applies them again where no webhook is installed.

use serde_json::{Map, Value};

use crate::constants::labels;
use crate::{DEFAULT_REPLICAS, Database, DeletionPolicy, Engine};

/// The deletion policy when the user gives none.
pub const DEFAULT_DELETION_POLICY: DeletionPolicy = DeletionPolicy::Retain;

/// One default that was filled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defaulted {
    Replicas,
    DeletionPolicy,
    NameLabel,
}

/// Fills the defaults into a Database object as admission sees it (JSON), where an
/// absent field can be told from one set to its default value. Returns what was filled
/// in. An object too malformed to hold a default (a `spec` that is not a map) is left
/// as it is for validation to refuse.
pub fn apply_to_object(object: &mut Value) -> Vec<Defaulted> {
    let mut filled = Vec::new();
    let engine = object
        .pointer("/spec/engine")
        .and_then(|engine| serde_json::from_value::<Engine>(engine.clone()).ok());
    if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
        if is_absent(spec.get("replicas")) {
            spec.insert("replicas".into(), Value::from(DEFAULT_REPLICAS));
            filled.push(Defaulted::Replicas);
        }
        if is_absent(spec.get("deletionPolicy")) {
            let policy = serde_json::to_value(DEFAULT_DELETION_POLICY).unwrap_or(Value::Null);
            spec.insert("deletionPolicy".into(), policy);
            filled.push(Defaulted::DeletionPolicy);
        }
    }
    // An unknown engine gets no label: validation refuses the object anyway.
    if let (Some(engine), Some(metadata)) = (
        engine,
        object.get_mut("metadata").and_then(Value::as_object_mut),
    ) {
        if is_absent(metadata.get("labels")) {
            metadata.insert("labels".into(), Value::Object(Map::new()));
        }
        if let Some(labels) = metadata.get_mut("labels").and_then(Value::as_object_mut)
            && !labels.contains_key(labels::NAME)
        {
            labels.insert(labels::NAME.into(), Value::from(engine.as_str()));
            filled.push(Defaulted::NameLabel);
        }
    }
    filled
}

/// Fills the defaults into a typed Database. Deserialization already filled
/// `spec.replicas` and `spec.deletionPolicy`, so only the label can be missing.
pub fn apply(db: &mut Database) -> Vec<Defaulted> {
    let labels = db.metadata.labels.get_or_insert_with(Default::default);
    if labels.contains_key(labels::NAME) {
        return Vec::new();
    }
    labels.insert(labels::NAME.into(), db.spec.engine.as_str().into());
    vec![Defaulted::NameLabel]
}

fn is_absent(value: Option<&Value>) -> bool {
    value.is_none_or(Value::is_null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DatabaseSpec;
    use serde_json::json;

    fn object(spec: &Value) -> Value {
        json!({"apiVersion": "mycompany.io/v1", "kind": "Database",
               "metadata": {"name": "orders-db"}, "spec": spec})
    }

    #[test]
    fn absent_fields_get_their_defaults_and_the_engine_label() {
        let mut db = object(&json!({"engine": "postgres", "version": "16", "storage": "1Gi"}));
        let filled = apply_to_object(&mut db);
        assert_eq!(
            filled,
            [
                Defaulted::Replicas,
                Defaulted::DeletionPolicy,
                Defaulted::NameLabel
            ]
        );
        assert_eq!(db["spec"]["replicas"], 1);
        assert_eq!(db["spec"]["deletionPolicy"], "Retain");
        assert_eq!(db["metadata"]["labels"][labels::NAME], "postgres");
    }

    #[test]
    fn values_the_user_wrote_are_never_changed() {
        let mut db = object(
            &json!({"engine": "mysql", "version": "8.4", "storage": "1Gi",
                                    "replicas": 3, "deletionPolicy": "Delete"}),
        );
        db["metadata"]["labels"] = json!({labels::NAME: "billing", "team": "a"});
        let before = db.clone();
        assert!(apply_to_object(&mut db).is_empty());
        assert_eq!(db, before);
    }

    #[test]
    fn the_label_joins_existing_labels() {
        let mut db = object(&json!({"engine": "mongodb", "version": "7.0", "storage": "1Gi"}));
        db["metadata"]["labels"] = json!({"team": "a"});
        apply_to_object(&mut db);
        assert_eq!(
            db["metadata"]["labels"],
            json!({"team": "a", labels::NAME: "mongodb"})
        );
    }

    #[test]
    fn an_unknown_engine_gets_no_label_and_a_malformed_spec_is_left_alone() {
        let mut db = object(&json!({"engine": "oracle", "version": "19", "storage": "1Gi"}));
        assert_eq!(
            apply_to_object(&mut db),
            [Defaulted::Replicas, Defaulted::DeletionPolicy]
        );
        assert!(db["metadata"].get("labels").is_none());

        let mut malformed = object(&json!("not a map"));
        let before = malformed.clone();
        assert!(apply_to_object(&mut malformed).is_empty());
        assert_eq!(malformed, before);
    }

    #[test]
    fn a_typed_database_gets_only_the_missing_label() {
        let mut db = Database::new(
            "orders-db",
            DatabaseSpec {
                engine: Engine::Postgres,
                version: "16".into(),
                storage: "1Gi".into(),
                replicas: 2,
                deletion_policy: DeletionPolicy::Delete,
                backup: None,
                restore_from: None,
                replication: crate::replication::Replication::default(),
                ..crate::DatabaseSpec::new(crate::Engine::Postgres, String::new(), String::new())
            },
        );
        assert_eq!(apply(&mut db), [Defaulted::NameLabel]);
        assert_eq!(
            db.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::NAME)),
            Some(&"postgres".to_owned())
        );
        assert!(apply(&mut db).is_empty());
        assert_eq!(db.spec.replicas, 2);
    }
}
