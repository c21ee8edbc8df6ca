//! Database and DatabaseBackup objects as a user writes them: a name and a spec in JSON,
//! typed where the spec must be valid, untyped where the API server is to judge it.

use database_api::Database;
use database_api::backup::DatabaseBackup;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::{Value, json};

/// The Database object named `name` with `spec`, as `kubectl apply` would send it.
fn manifest(name: &str, spec: &Value) -> Value {
    json!({
        "apiVersion": "mycompany.io/v1", "kind": "Database",
        "metadata": {"name": name}, "spec": spec,
    })
}

/// A Database named `name` with `spec` (JSON, as a user writes it: absent fields take
/// their defaults); fails the test when `spec` does not fit the Database type.
pub fn database(name: &str, spec: &Value) -> Database {
    serde_json::from_value(manifest(name, spec)).expect("a Database")
}

/// A Database named `name` with `spec` as an untyped object, for specs the Database
/// type cannot hold: the invalid ones the API server or the webhook must refuse.
pub fn database_object(name: &str, spec: &Value) -> DynamicObject {
    serde_json::from_value(manifest(name, spec)).expect("a Database object")
}

/// The Databases of `namespace` as untyped objects (see [`database_object`]).
pub fn database_objects(client: &Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::erase::<Database>(&()),
    )
}

/// A DatabaseBackup named `name` of Database `database`, to `destination` (JSON), or to
/// the Database's own destination when `None`.
pub fn database_backup(name: &str, database: &str, destination: Option<&Value>) -> DatabaseBackup {
    serde_json::from_value(json!({
        "apiVersion": "mycompany.io/v1", "kind": "DatabaseBackup",
        "metadata": {"name": name},
        "spec": {"database": database, "destination": destination},
    }))
    .expect("a DatabaseBackup")
}
