//! Names, labels and ownership shared by every owned object.

use std::collections::BTreeMap;

use database_api::Database;
use database_api::constants::labels;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

/// The labels that select a Database's Pods. Both are immutable for a Database (its
/// name, and its engine which validation keeps fixed), as a StatefulSet selector must be.
pub fn selector_labels(db: &Database) -> BTreeMap<String, String> {
    BTreeMap::from([
        (labels::INSTANCE.to_owned(), db.name_any()),
        (labels::NAME.to_owned(), db.spec.engine.as_str().to_owned()),
    ])
}

/// The recommended `app.kubernetes.io/*` labels for every owned object.
pub fn labels(db: &Database) -> BTreeMap<String, String> {
    let mut all = selector_labels(db);
    all.insert(labels::VERSION.to_owned(), label_value(&db.spec.version));
    all.insert(
        labels::COMPONENT.to_owned(),
        labels::COMPONENT_VALUE.to_owned(),
    );
    all.insert(
        labels::MANAGED_BY.to_owned(),
        labels::MANAGED_BY_VALUE.to_owned(),
    );
    all
}

/// The selector as a string, for `status.selector` (the scale subresource reads it).
pub fn selector_string(db: &Database) -> String {
    selector_labels(db)
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Metadata for an owned object named `name`: namespace, labels and a controller owner
/// reference, so garbage collection removes it with the Database.
pub fn object_meta(db: &Database, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: db.namespace(),
        labels: Some(labels(db)),
        owner_references: owner_reference(db).map(|r| vec![r]),
        ..ObjectMeta::default()
    }
}

/// The controller owner reference to `db` (absent only for an object never stored,
/// which has no uid).
pub fn owner_reference(db: &Database) -> Option<OwnerReference> {
    db.controller_owner_ref(&())
}

/// Name of the Secret holding the generated credentials.
pub fn credentials_secret_name(db: &Database) -> String {
    format!("{}-credentials", db.name_any())
}

/// The Pod label the controller sets to an instance's role: [`PRIMARY`] or [`REPLICA`].
/// The `-rw` and `-ro` Services select on it.
pub const ROLE_LABEL: &str = "mycompany.io/role";
pub const PRIMARY: &str = "primary";
pub const REPLICA: &str = "replica";

/// Name of the Service that selects the primary.
pub fn rw_service_name(db: &Database) -> String {
    format!("{}-rw", db.name_any())
}

/// Name of the Service that selects the replicas.
pub fn ro_service_name(db: &Database) -> String {
    format!("{}-ro", db.name_any())
}

/// Name of the ConfigMap that records which instance is the primary.
pub fn topology_configmap_name(db: &Database) -> String {
    format!("{}-topology", db.name_any())
}

/// The name of instance `ordinal`'s Pod.
pub fn pod_name(db: &Database, ordinal: i32) -> String {
    format!("{}-{ordinal}", db.name_any())
}

/// Name of the ConfigMap of initialisation scripts.
pub fn init_configmap_name(db: &Database) -> String {
    format!("{}-init", db.name_any())
}

/// Name of the ConfigMap of the engine's configuration file.
pub fn config_configmap_name(db: &Database) -> String {
    format!("{}-config", db.name_any())
}

/// Name of the Secret applications mount to connect.
pub fn connection_secret_name(db: &Database) -> String {
    format!("{}-connection", db.name_any())
}

/// A label value made from free text: at most 63 characters of `[A-Za-z0-9._-]`,
/// starting and ending with an alphanumeric character.
fn label_value(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::database;
    use database_api::Engine;

    #[test]
    fn owned_objects_carry_the_recommended_labels_and_a_controller_reference() {
        let db = database(Engine::Postgres, "16.4", 1);
        let meta = object_meta(&db, "orders".into());
        let labels = meta.labels.expect("labels");
        assert_eq!(labels["app.kubernetes.io/name"], "postgres");
        assert_eq!(labels["app.kubernetes.io/instance"], "orders");
        assert_eq!(labels["app.kubernetes.io/version"], "16.4");
        assert_eq!(labels["app.kubernetes.io/managed-by"], "database-operator");
        let owner = &meta.owner_references.expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Database", "orders")
        );
        assert_eq!(owner.controller, Some(true));
        assert_eq!(meta.namespace.as_deref(), Some("shop"));
    }

    #[test]
    fn selector_string_lists_the_selector_labels() {
        let db = database(Engine::Mysql, "8.4", 1);
        assert_eq!(
            selector_string(&db),
            "app.kubernetes.io/instance=orders,app.kubernetes.io/name=mysql"
        );
    }

    #[test]
    fn label_values_are_cleaned_of_characters_labels_refuse() {
        assert_eq!(label_value("16.4"), "16.4");
        assert_eq!(label_value("8.0+build/1"), "8.0_build_1");
        assert_eq!(label_value("-x-"), "x");
        assert_eq!(label_value(&"9".repeat(80)).len(), 63);
    }
}
