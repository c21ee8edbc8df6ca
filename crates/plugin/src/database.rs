//! Reading and annotating one Database, with a missing one reported by name and
//! namespace rather than as the API server's 404.

use database_api::Database;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::cluster::Target;
use crate::error::{Error, is_not_found};

/// The field manager of the plugin's writes, so `managedFields` tell them apart.
pub const FIELD_MANAGER: &str = "kubectl-database";

/// The Databases of the target's namespace.
pub fn api(target: &Target) -> Api<Database> {
    Api::namespaced(target.client.clone(), &target.namespace)
}

/// Database `name`, or [`Error::DatabaseNotFound`].
pub async fn get(target: &Target, name: &str) -> Result<Database, Error> {
    api(target)
        .get(name)
        .await
        .map_err(|source| read_error(target, name, source))
}

/// Sets annotation `key` of Database `name` to `value` (removes it for `None`) and
/// returns the Database as stored. A merge patch touches that one key and nothing the
/// operator or anyone else manages.
pub async fn annotate(
    target: &Target,
    name: &str,
    key: &str,
    value: Option<&str>,
) -> Result<Database, Error> {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    api(target)
        .patch(name, &params, &Patch::Merge(&patch))
        .await
        .map_err(|source| match read_error(target, name, source) {
            Error::ReadDatabase { name, source } => Error::Annotate { name, source },
            other => other,
        })
}

fn read_error(target: &Target, name: &str, source: kube::Error) -> Error {
    if is_not_found(&source) {
        Error::DatabaseNotFound {
            name: name.to_owned(),
            namespace: target.namespace.clone(),
        }
    } else {
        Error::ReadDatabase {
            name: name.to_owned(),
            source,
        }
    }
}
