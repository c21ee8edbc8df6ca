//! Storage growth. A StatefulSet's volumeClaimTemplates are immutable, so growing
//! `spec.storage` means: resize each existing claim (where its StorageClass allows
//! expansion), then delete the StatefulSet with orphan propagation so its Pods and
//! claims stay, and let the next apply create it again with the larger template.

use database_api::Database;
use database_api::conditions::reason;
use database_api::storage::parse_gi;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PropagationPolicy};
use kube::{Client, ResourceExt};
use serde_json::json;

use crate::error::Error;
use crate::resources::meta::selector_string;
use crate::resources::statefulset::DATA_VOLUME;

/// What the StatefulSet's template should say and whether anything blocks the spec.
#[derive(Debug, PartialEq, Eq)]
pub enum StoragePlan {
    /// Template and spec agree (or there is no StatefulSet yet).
    AsSpecified,
    /// The spec asks for a size the volumes cannot take; keep the template as it is.
    Blocked {
        template: String,
        reason: &'static str,
        message: String,
    },
    /// The claims were resized and the StatefulSet orphan-deleted; wait for it to go.
    Recreating,
}

/// The size in the StatefulSet's data template, if it is a whole number of Gi.
pub fn template_gi(set: &StatefulSet) -> Option<(u64, String)> {
    let templates = set.spec.as_ref()?.volume_claim_templates.as_ref()?;
    let data = templates
        .iter()
        .find(|t| t.metadata.name.as_deref() == Some(DATA_VOLUME))?;
    let size = data
        .spec
        .as_ref()?
        .resources
        .as_ref()?
        .requests
        .as_ref()?
        .get("storage")?
        .0
        .clone();
    Some((parse_gi(&size)?, size))
}

/// Compares spec and template and, for growth, resizes the claims.
pub async fn plan(
    client: &Client,
    db: &Database,
    set: Option<&StatefulSet>,
) -> Result<StoragePlan, Error> {
    let (Some(set), Some(wanted)) = (set, parse_gi(&db.spec.storage)) else {
        return Ok(StoragePlan::AsSpecified);
    };
    let Some((current, template)) = template_gi(set) else {
        return Ok(StoragePlan::AsSpecified);
    };
    if wanted == current {
        return Ok(StoragePlan::AsSpecified);
    }
    if wanted < current {
        return Ok(shrink_refused(db, template));
    }
    let namespace = db.namespace().ok_or(Error::MissingNamespace)?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &namespace);
    let owned = data_claims(&claims, db).await?;
    if let Some(message) = expansion_refused(client, &owned).await? {
        return Ok(StoragePlan::Blocked {
            template,
            reason: reason::EXPANSION_NOT_SUPPORTED,
            message,
        });
    }
    resize(&claims, &owned, &db.spec.storage).await?;
    orphan_delete(client, &namespace, set).await?;
    Ok(StoragePlan::Recreating)
}

/// The plan for a spec asking for less than the volumes' `template` size.
fn shrink_refused(db: &Database, template: String) -> StoragePlan {
    let message = format!(
        "spec.storage {} is smaller than the volumes' {template}: volumes cannot shrink",
        db.spec.storage
    );
    StoragePlan::Blocked {
        template,
        reason: reason::STORAGE_SHRINK_REFUSED,
        message,
    }
}

/// The data volume claims of `db`'s instances: those the Database's selector matches
/// whose names come from the data template.
async fn data_claims(
    claims: &Api<PersistentVolumeClaim>,
    db: &Database,
) -> Result<Vec<PersistentVolumeClaim>, Error> {
    let prefix = format!("{DATA_VOLUME}-{}-", db.name_any());
    let list = claims
        .list(&ListParams::default().labels(&selector_string(db)))
        .await
        .map_err(|source| Error::Observe {
            kind: "PersistentVolumeClaim".into(),
            name: prefix.clone(),
            source,
        })?;
    Ok(list
        .items
        .into_iter()
        .filter(|c| c.name_any().starts_with(&prefix))
        .collect())
}

/// Asks for `storage` in each of `owned`, in turn.
async fn resize(
    claims: &Api<PersistentVolumeClaim>,
    owned: &[PersistentVolumeClaim],
    storage: &str,
) -> Result<(), Error> {
    let body = json!({"spec": {"resources": {"requests": {"storage": storage}}}});
    for claim in owned {
        let name = claim.name_any();
        claims
            .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .map_err(|source| Error::ResizeClaim { name, source })?;
    }
    Ok(())
}

/// Deletes `set` and leaves its Pods and claims in place; already gone counts as done.
async fn orphan_delete(client: &Client, namespace: &str, set: &StatefulSet) -> Result<(), Error> {
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), namespace);
    let orphan = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    match sets.delete(&set.name_any(), &orphan).await {
        Ok(_) => Ok(()),
        Err(error) if operator_runtime::errors::is_not_found(&error) => Ok(()),
        Err(source) => Err(Error::Delete {
            kind: "StatefulSet".into(),
            name: set.name_any(),
            source,
        }),
    }
}

/// Why the claims cannot grow, if their StorageClass does not allow expansion.
async fn expansion_refused(
    client: &Client,
    claims: &[PersistentVolumeClaim],
) -> Result<Option<String>, Error> {
    let classes: Api<StorageClass> = Api::all(client.clone());
    for claim in claims {
        let Some(class_name) = claim
            .spec
            .as_ref()
            .and_then(|s| s.storage_class_name.clone())
        else {
            return Ok(Some(format!(
                "claim {} has no StorageClass, so it cannot be expanded",
                claim.name_any()
            )));
        };
        let class = classes
            .get_opt(&class_name)
            .await
            .map_err(|source| Error::Observe {
                kind: "StorageClass".into(),
                name: class_name.clone(),
                source,
            })?;
        if !class
            .and_then(|c| c.allow_volume_expansion)
            .unwrap_or(false)
        {
            return Ok(Some(format!(
                "StorageClass {class_name} does not allow volume expansion; the volumes keep their size"
            )));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BuildConfig;
    use crate::resources::credentials::Layout;
    use crate::resources::fixtures::database;
    use crate::resources::statefulset::build_statefulset;
    use database_api::Engine;

    #[test]
    fn the_template_size_is_read_back_from_a_built_statefulset() {
        let set = build_statefulset(
            &database(Engine::Postgres, "16", 1),
            &BuildConfig::default(),
            "42Gi",
            Layout::SeparateAdmin,
        );
        assert_eq!(template_gi(&set), Some((42, "42Gi".to_owned())));
    }
}
