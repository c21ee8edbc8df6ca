//! The finalizer and what deletion does: set Terminating, deal with the data as the
//! deletion policy says, then let the Database go. Nothing here waits on owned objects,
//! so a Database whose objects are already gone is never stuck.

use database_api::constants::{FIELD_MANAGER, FINALIZER, RETAINED_VERSION_ANNOTATION, labels};
use database_api::upgrade::DATA_DIRECTORY_ANNOTATION;
use database_api::{Database, defaults};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use super::conflicts::is_controlled_by;
use crate::error::Error;
use crate::objects::delete_if_present;
use crate::resources::meta::{credentials_secret_name, selector_string};
use crate::resources::statefulset::DATA_VOLUME;

/// Whether `db` carries the finalizer.
pub fn has_finalizer(db: &Database) -> bool {
    db.finalizers().iter().any(|f| f == FINALIZER)
}

/// Adds the finalizer. Server-side apply of just that list entry: finalizers are a set,
/// so other controllers' entries are untouched and no read-modify-write race exists.
/// The same apply fills in the defaults the defaulting webhook would have added at
/// admission (the engine label), for clusters without the webhook.
pub async fn add(api: &Api<Database>, db: &Database) -> Result<(), Error> {
    let mut body = json!({
        "apiVersion": "mycompany.io/v1",
        "kind": "Database",
        "metadata": {"name": db.name_any(), "finalizers": [FINALIZER]},
    });
    let mut defaulted = db.clone();
    if defaults::apply(&mut defaulted).contains(&defaults::Defaulted::NameLabel) {
        body["metadata"]["labels"] = json!({labels::NAME: db.spec.engine.as_str()});
    }
    api.patch(
        &db.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(Error::AddFinalizer)?;
    Ok(())
}

/// Removes the finalizer by applying the object without it: the entry this manager
/// owned is dropped. A Database already gone counts as done.
pub async fn remove(api: &Api<Database>, db: &Database) -> Result<(), Error> {
    let body = json!({"apiVersion": "mycompany.io/v1", "kind": "Database", "metadata": {"name": db.name_any()}});
    match api
        .patch(
            &db.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(err) => Err(Error::RemoveFinalizer(err)),
    }
}

/// Deletes the Database's volume claims (`data-<name>-<ordinal>` with its labels), for
/// the `Delete` policy. Claims of a `Retain` Database carry no owner reference, so
/// garbage collection leaves them (and the data) alone.
pub async fn delete_claims(
    claims: &Api<PersistentVolumeClaim>,
    db: &Database,
) -> Result<usize, Error> {
    let selector = ListParams::default().labels(&selector_string(db));
    let list = claims
        .list(&selector)
        .await
        .map_err(|source| Error::Observe {
            kind: "PersistentVolumeClaim".into(),
            name: selector_string(db),
            source,
        })?;
    let mut deleted = 0;
    for claim in list
        .items
        .iter()
        .filter(|c| is_data_claim(&c.name_any(), db))
    {
        let name = claim.name_any();
        if delete_if_present(claims, &name).await? {
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// Whether `claim` is named as the StatefulSet names its instances' data claims.
fn is_data_claim(claim: &str, db: &Database) -> bool {
    claim
        .strip_prefix(&format!("{DATA_VOLUME}-{}-", db.name_any()))
        .is_some_and(|ordinal| !ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit()))
}

/// Keeps the credentials Secret with the retained data: it loses this Database as its
/// controller (so garbage collection leaves it) and records the version the data was
/// written by, so a Database created later under the same name can take it back.
/// Returns whether it wrote.
pub async fn keep_credentials(
    secrets: &Api<Secret>,
    db: &Database,
    version: &str,
) -> Result<bool, Error> {
    let name = credentials_secret_name(db);
    let Some(secret) = secrets
        .get_opt(&name)
        .await
        .map_err(|source| Error::Observe {
            kind: "Secret".into(),
            name: name.clone(),
            source,
        })?
    else {
        return Ok(false);
    };
    if !is_controlled_by(&secret.metadata, db) {
        return Ok(false);
    }
    let others: Vec<_> = secret
        .metadata
        .owner_references
        .iter()
        .flatten()
        .filter(|r| Some(r.uid.as_str()) != db.metadata.uid.as_deref())
        .cloned()
        .collect();
    let patch = json!({"metadata": {
        "ownerReferences": others,
        // An upgraded postgres keeps its data in a directory of its own: the Database
        // that takes the data back needs to know which.
        "annotations": {
            RETAINED_VERSION_ANNOTATION: version,
            DATA_DIRECTORY_ANNOTATION: db.annotations().get(DATA_DIRECTORY_ANNOTATION),
        },
        "resourceVersion": secret.metadata.resource_version,
    }});
    secrets
        .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| Error::Apply {
            kind: "Secret".into(),
            name,
            source,
        })?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::database;
    use database_api::Engine;

    #[test]
    fn only_claims_named_for_this_databases_instances_are_its_data() {
        let db = database(Engine::Postgres, "17", 1);
        assert!(is_data_claim("data-orders-0", &db));
        assert!(is_data_claim("data-orders-12", &db));
        for other in [
            "data-orders-archive-0",
            "data-orders-",
            "data-orders",
            "logs-orders-0",
            "data-orders-0x",
        ] {
            assert!(!is_data_claim(other, &db), "{other}");
        }
    }
}
