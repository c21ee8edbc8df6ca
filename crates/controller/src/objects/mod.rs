//! The thin layer that reads and writes objects for the domain: an owned object is
//! created when missing, then server-side applied under one field manager, and skipped
//! when it would change nothing; reads and deletes that treat "not found" as an answer.

pub mod drift;
pub mod ledger;
pub mod ownership;

use std::fmt::Debug;

use database_api::constants::FIELD_MANAGER;
use kube::api::{Api, GetParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use operator_runtime::errors::{is_already_exists, is_not_found};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use self::drift::{HASH_ANNOTATION, desired_hash, needs_apply};
use self::ownership::adoption_patch;
use crate::error::Error;

/// What an apply did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    Created,
    Updated,
    Unchanged,
    /// It differs from what is wanted and was left as it is (a paused Database).
    Held,
}

/// `desired` as the body an apply sends, its hash, and whether applying it would change
/// `observed` (a missing object always would): the one comparison both a writing and a
/// holding pass make.
fn compare<K: Serialize>(
    desired: &K,
    observed: Option<&K>,
) -> Result<(Value, String, bool), Error> {
    let serialize =
        |o: &K| serde_json::to_value(o).map_err(|e| Error::Serialize("owned object", e));
    let body = serialize(desired)?;
    let hash = desired_hash(&body);
    let observed_json = observed.map(serialize).transpose()?;
    let changes = needs_apply(&body, &hash, observed_json.as_ref());
    Ok((body, hash, changes))
}

/// The hash an apply of `desired` records, as the ledger keeps it.
pub fn hash_of<K: Serialize>(desired: &K) -> Result<Option<u64>, Error> {
    let body = serde_json::to_value(desired).map_err(|e| Error::Serialize("owned object", e))?;
    Ok(ledger::parse_hash(&desired_hash(&body)))
}

/// Whether applying `desired` would change `observed`; a missing object always would.
pub fn would_change<K: Serialize>(desired: &K, observed: Option<&K>) -> Result<bool, Error> {
    compare(desired, observed).map(|(_, _, changes)| changes)
}

/// Applies `desired` unless `observed` already matches it; returns the object as the API
/// server now has it and what happened. A missing object is created (see [`ownership`]
/// for why, and how later applies take over its fields).
pub async fn apply<K>(
    api: &Api<K>,
    desired: &K,
    observed: Option<&K>,
) -> Result<(K, Applied), Error>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    let name = desired.name_any();
    let (mut body, hash, changes) = compare(desired, observed)?;
    if let (Some(current), false) = (observed, changes) {
        return Ok((current.clone(), Applied::Unchanged));
    }
    body["metadata"]["annotations"][HASH_ANNOTATION] = Value::String(hash.clone());
    let apply_error = apply_error::<K>(&name);
    let Some(current) = observed else {
        return create_or_apply(api, desired, hash, &body).await;
    };
    adopt_fields(api, current).await.map_err(&apply_error)?;
    let applied = server_side_apply(api, &name, &body)
        .await
        .map_err(&apply_error)?;
    Ok((applied, Applied::Updated))
}

/// Creates a missing object with `hash` recorded; one created since it was read is
/// applied instead, and only if it is this Database's.
async fn create_or_apply<K>(
    api: &Api<K>,
    desired: &K,
    hash: String,
    body: &Value,
) -> Result<(K, Applied), Error>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    let name = desired.name_any();
    let apply_error = apply_error::<K>(&name);
    let mut object = desired.clone();
    object
        .annotations_mut()
        .insert(HASH_ANNOTATION.to_owned(), hash);
    let params = PostParams {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.to_owned()),
    };
    match api.create(&params, &object).await {
        Ok(created) => return Ok((created, Applied::Created)),
        Err(error) if is_already_exists(&error) => {
            let existing = api.get(&name).await.map_err(&apply_error)?;
            if !same_controller(existing.meta(), desired.meta()) {
                return Err(Error::NotControlled {
                    kind: K::kind(&()).into_owned(),
                    name,
                });
            }
        }
        Err(source) => return Err(apply_error(source)),
    }
    let applied = server_side_apply(api, &name, body)
        .await
        .map_err(&apply_error)?;
    Ok((applied, Applied::Updated))
}

/// Hands the fields a plain create recorded under its own operation over to the apply
/// manager (see [`ownership`]), when there are any.
async fn adopt_fields<K>(api: &Api<K>, current: &K) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    let meta = current.meta();
    let Some(patch) = adoption_patch(
        meta.managed_fields.as_deref().unwrap_or_default(),
        meta.resource_version.as_deref().unwrap_or_default(),
    ) else {
        return Ok(());
    };
    let patch = serde_json::from_value(patch).map_err(kube::Error::SerdeError)?;
    api.patch(
        &current.name_any(),
        &PatchParams::default(),
        &Patch::<Value>::Json(patch),
    )
    .await?;
    Ok(())
}

/// The error of a failed write of the object of kind `K` named `name`.
fn apply_error<K: Resource<DynamicType = ()>>(
    name: &str,
) -> impl Fn(kube::Error) -> Error + use<K> {
    let name = name.to_owned();
    move |source| Error::Apply {
        kind: K::kind(&()).into_owned(),
        name: name.clone(),
        source,
    }
}

/// Whether `existing` has the controller `desired` names (the owning Database's uid).
fn same_controller(existing: &kube::api::ObjectMeta, desired: &kube::api::ObjectMeta) -> bool {
    let controller = |meta: &kube::api::ObjectMeta| {
        meta.owner_references
            .iter()
            .flatten()
            .find(|r| r.controller == Some(true))
            .map(|r| r.uid.clone())
    };
    controller(desired).is_some() && controller(existing) == controller(desired)
}

/// `force` takes ownership of fields another manager set (e.g. `kubectl edit` of a
/// StatefulSet's replicas): this controller is the authority on the fields it sets.
async fn server_side_apply<K>(api: &Api<K>, name: &str, body: &Value) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(name, &params, &Patch::Apply(body)).await
}

/// Reads an object that may not exist.
pub async fn get_opt<K>(api: &Api<K>, name: &str) -> Result<Option<K>, Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    api.get_opt(name).await.map_err(|source| Error::Observe {
        kind: K::kind(&()).into_owned(),
        name: name.to_owned(),
        source,
    })
}

/// Reads an object that may not exist from the API server's watch cache, without a
/// read from etcd. The answer is at least as new as every watch event the controller
/// has received of the object, as an informer's cache would be, and may miss a write
/// those events have not yet shown: good for finding an object unchanged (a change
/// it missed brings a pass of its own through its watch event), never the base of a
/// write or a delete, which read the object again.
pub async fn get_cached_opt<K>(api: &Api<K>, name: &str) -> Result<Option<K>, Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    match api.get_with(name, &GetParams::any()).await {
        Ok(object) => Ok(Some(object)),
        Err(error) if is_not_found(&error) => Ok(None),
        Err(source) => Err(Error::Observe {
            kind: K::kind(&()).into_owned(),
            name: name.to_owned(),
            source,
        }),
    }
}

/// Deletes an object if it exists: whether this call deleted it.
pub async fn delete_if_present<K>(api: &Api<K>, name: &str) -> Result<bool, Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    delete_with(api, name, &kube::api::DeleteParams::default()).await
}

/// [`delete_if_present`] with `params` (a propagation policy, a precondition).
pub async fn delete_with<K>(
    api: &Api<K>,
    name: &str,
    params: &kube::api::DeleteParams,
) -> Result<bool, Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    match api.delete(name, params).await {
        Ok(_) => Ok(true),
        Err(error) if is_not_found(&error) => Ok(false),
        Err(source) => Err(Error::Delete {
            kind: K::kind(&()).into_owned(),
            name: name.to_owned(),
            source,
        }),
    }
}

/// Creates `object` unless one of its name exists already (created by an earlier pass
/// whose answer was lost): whether this call created it.
pub async fn create_if_absent<K>(api: &Api<K>, object: &K) -> Result<bool, Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + serde::Serialize + Clone + Debug,
{
    match api.create(&kube::api::PostParams::default(), object).await {
        Ok(_) => Ok(true),
        Err(error) if is_already_exists(&error) => Ok(false),
        Err(source) => Err(Error::Apply {
            kind: K::kind(&()).into_owned(),
            name: object.meta().name.clone().unwrap_or_default(),
            source,
        }),
    }
}
