//! The finalizer and what deletion does: set Terminating, deal with the data as the
//! deletion policy says, then let the Database go. Nothing here waits on owned objects,
//! so a Database whose objects are already gone is never stuck.

use database_api::constants::{FIELD_MANAGER, FINALIZER};
use database_api::{Database, DeletionPolicy};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::error::Error;
use crate::resources::meta::selector_string;

/// Whether `db` carries the finalizer.
pub fn has_finalizer(db: &Database) -> bool {
    db.finalizers().iter().any(|f| f == FINALIZER)
}

/// Adds the finalizer. Server-side apply of just that list entry: finalizers are a set,
/// so other controllers' entries are untouched and no read-modify-write race exists.
pub async fn add(api: &Api<Database>, db: &Database) -> Result<(), Error> {
    let body = json!({
        "apiVersion": "mycompany.io/v1",
        "kind": "Database",
        "metadata": {"name": db.name_any(), "finalizers": [FINALIZER]},
    });
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
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(err) => Err(Error::RemoveFinalizer(err)),
    }
}

/// Deletes the volume claims when the policy says so. Claims of a `Retain` Database
/// carry no owner reference, so garbage collection leaves them (and the data) alone.
pub async fn clean_up_data(
    claims: &Api<PersistentVolumeClaim>,
    db: &Database,
) -> Result<usize, Error> {
    if db.spec.deletion_policy != DeletionPolicy::Delete {
        return Ok(0);
    }
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
    for claim in list.items {
        let name = claim.name_any();
        match claims.delete(&name, &DeleteParams::default()).await {
            Ok(_) => deleted += 1,
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(source) => {
                return Err(Error::Delete {
                    kind: "PersistentVolumeClaim".into(),
                    name,
                    source,
                });
            }
        }
    }
    Ok(deleted)
}
