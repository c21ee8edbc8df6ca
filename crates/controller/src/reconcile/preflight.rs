//! What is checked between reading the owned objects and writing any of them: a version
//! the data cannot move to, an object in the way, credentials kept from an earlier
//! Database of the same name, and where mysql's data lives. Each can end the pass.

use std::ops::ControlFlow;

use database_api::Database;
use database_api::constants::RETAINED_VERSION_ANNOTATION;
use database_api::upgrade::DATA_DIRECTORY_ANNOTATION;
use database_api::versions::{Change, Version, change};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::Observed;
use super::conflicts::{self, Conflict};
use crate::error::Error;
use crate::objects::get_opt;
use crate::resources::credentials::Layout;
use crate::resources::meta::owner_reference;
use crate::{layout, version};

/// Why this pass stops before writing anything.
#[derive(Debug, PartialEq, Eq)]
pub enum Stop {
    /// The spec asks for something the data cannot do (a message naming the field).
    Invalid(String),
    /// An object in the way.
    Conflict(Conflict),
    /// The Database was marked; its watch event brings it back.
    Marked,
    /// The Database this pass was given is no longer the one of its name (deleted, or
    /// deleted and made again): its watch event brings the current one.
    Stale,
}

/// Runs the checks and the one-time fixes; `Ok(None)` means go ahead.
pub(crate) async fn check(
    databases: &Api<Database>,
    secrets: &Api<Secret>,
    db: &Database,
    observed: &mut Observed,
) -> Result<Option<Stop>, Error> {
    if let Some(message) = version::refused_change(db, observed.statefulset.as_ref()) {
        return Ok(Some(Stop::Invalid(message)));
    }
    let kept = observed
        .credentials
        .as_ref()
        .filter(|s| conflicts::is_retained_credentials(&s.metadata, db));
    if let Some(conflict) = first_in_the_way(db, observed, kept.is_some()) {
        return Ok(Some(Stop::Conflict(conflict)));
    }
    if let Some(kept) = kept {
        // Credentials kept with their data are claimed only for a Database that exists:
        // claimed for one just deleted, garbage collection would take them.
        if !is_current(databases, db).await? {
            return Ok(Some(Stop::Stale));
        }
        match reclaim(databases, secrets, db, kept).await? {
            ControlFlow::Continue(credentials) => observed.credentials = Some(credentials),
            ControlFlow::Break(stop) => return Ok(Some(stop)),
        }
    }
    if layout::needs_volume_root_mark(db, observed.statefulset.as_ref()) {
        layout::mark_volume_root(databases, db).await?;
        return Ok(Some(Stop::Marked));
    }
    Ok(None)
}

/// The first observed object of a name this Database writes that it does not control,
/// in the order the objects are written. `kept` says the credentials Secret is one
/// kept from an earlier Database, which is taken back rather than in the way.
fn first_in_the_way(db: &Database, observed: &Observed, kept: bool) -> Option<Conflict> {
    let budget = (db.spec.replicas > 1)
        .then(|| observed.budget.read().map(|b| &b.metadata))
        .flatten();
    let layout = Layout::of(
        db.spec.engine,
        observed.credentials.as_ref().and_then(|s| s.data.as_ref()),
    );
    let init =
        super::init_scripts(db, layout).and_then(|_| observed.init.read().map(|c| &c.metadata));
    // A ConfigMap of the config's name is only in the way when there is a file to write.
    let config = crate::resources::engine_config::effective(db)
        .and(observed.config.read().map(|c| &c.metadata));
    conflicts::first_conflict(
        db,
        [
            (
                "StatefulSet",
                observed.statefulset.as_ref().map(|o| &o.metadata),
            ),
            ("Service", observed.service.read().map(|o| &o.metadata)),
            (
                "Secret",
                observed
                    .credentials
                    .as_ref()
                    .filter(|_| !kept)
                    .map(|o| &o.metadata),
            ),
            ("Secret", observed.connection.read().map(|o| &o.metadata)),
            ("PodDisruptionBudget", budget),
            ("ConfigMap", init),
            ("ConfigMap", observed.topology.as_ref().map(|o| &o.metadata)),
            ("ConfigMap", config),
            ("Service", observed.rw.read().map(|o| &o.metadata)),
            ("Service", observed.ro.read().map(|o| &o.metadata)),
        ],
    )
}

/// Whether the API server holds `db` (its uid) under its name now.
async fn is_current(databases: &Api<Database>, db: &Database) -> Result<bool, Error> {
    let current = get_opt(databases, &db.name_any()).await?;
    Ok(current.is_some_and(|c| c.metadata.uid == db.metadata.uid))
}

/// Takes back the credentials kept from an earlier Database and continues with them,
/// or stops: when their data cannot serve the spec's version, or after marking the
/// Database with where mysql's data lives (its watch event brings it back).
async fn reclaim(
    databases: &Api<Database>,
    secrets: &Api<Secret>,
    db: &Database,
    kept: &Secret,
) -> Result<ControlFlow<Stop, Secret>, Error> {
    if let Some(message) = retained_version_refused(db, kept) {
        return Ok(ControlFlow::Break(Stop::Invalid(message)));
    }
    if let Some(directory) = kept.annotations().get(DATA_DIRECTORY_ANNOTATION) {
        layout::mark(databases, db, DATA_DIRECTORY_ANNOTATION, Some(directory)).await?;
        take_back(secrets, db, kept).await?;
        return Ok(ControlFlow::Break(Stop::Marked));
    }
    Ok(ControlFlow::Continue(take_back(secrets, db, kept).await?))
}

/// Why the retained data cannot serve `db`'s version, naming `spec.version`.
fn retained_version_refused(db: &Database, kept: &Secret) -> Option<String> {
    let written_by = Version::parse(conflicts::retained_version(&kept.metadata)?)?;
    let wanted = Version::parse(&db.spec.version)?;
    match change(db.spec.engine, written_by, wanted) {
        Change::Refused(reason) => Some(format!(
            "spec.version: the data kept from the earlier Database {} was written by {} {written_by}, and {reason}",
            db.name_any(),
            db.spec.engine
        )),
        Change::DumpAndRestore => Some(format!(
            "spec.version: the data kept from the earlier Database {} was written by {} {written_by}, which a major upgrade needs running to take its backup; create the Database with version {written_by}, then change spec.version",
            db.name_any(),
            db.spec.engine
        )),
        Change::WithinSeries | Change::InPlaceUpgrade => None,
    }
}

/// Makes this Database the controller of the kept credentials Secret again.
async fn take_back(secrets: &Api<Secret>, db: &Database, kept: &Secret) -> Result<Secret, Error> {
    let patch = json!({"metadata": {
        "ownerReferences": owner_reference(db).map(|r| vec![r]),
        "annotations": {RETAINED_VERSION_ANNOTATION: null, DATA_DIRECTORY_ANNOTATION: null},
        "resourceVersion": kept.resource_version(),
    }});
    secrets
        .patch(
            &kept.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(|source| Error::Apply {
            kind: "Secret".into(),
            name: kept.name_any(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::database;
    use crate::resources::meta::object_meta;
    use database_api::Engine;

    fn kept(version: &str) -> Secret {
        let db = database(Engine::Postgres, version, 1);
        let mut meta = object_meta(&db, "orders-credentials".into());
        meta.owner_references = None;
        meta.annotations =
            Some([(RETAINED_VERSION_ANNOTATION.to_owned(), version.to_owned())].into());
        Secret {
            metadata: meta,
            ..Secret::default()
        }
    }

    #[test]
    fn kept_data_of_another_postgres_major_is_refused_naming_the_field() {
        let db = database(Engine::Postgres, "17", 1);
        let message = retained_version_refused(&db, &kept("16.4")).expect("refused");
        assert!(message.starts_with("spec.version: the data kept from the earlier Database orders was written by postgres 16.4"), "{message}");
        assert_eq!(retained_version_refused(&db, &kept("17.2")), None);
    }
}
