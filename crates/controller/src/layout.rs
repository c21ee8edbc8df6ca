//! Data that lives where an earlier version of the operator put it stays there: a mysql
//! Database whose StatefulSet runs mysqld without `--datadir` keeps its data at the
//! volume's root, and the Database is marked so, before anything rebuilds that
//! StatefulSet (a storage resize replaces it), so the mark outlives it.

use database_api::constants::{FIELD_MANAGER, MYSQL_DATADIR_ANNOTATION, MYSQL_DATADIR_VOLUME_ROOT};
use database_api::{Database, Engine};
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::error::Error;
use crate::keys::CONTAINER;

/// Whether `db` runs mysql with its data at the volume's root and is not marked yet.
pub fn needs_volume_root_mark(db: &Database, observed: Option<&StatefulSet>) -> bool {
    if db.spec.engine != Engine::Mysql || db.annotations().contains_key(MYSQL_DATADIR_ANNOTATION) {
        return false;
    }
    let Some(containers) = observed
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.template.spec.as_ref())
        .map(|p| &p.containers)
    else {
        return false;
    };
    containers
        .iter()
        .filter(|c| c.name == CONTAINER)
        .any(|c| !c.args.iter().flatten().any(|a| a.starts_with("--datadir")))
}

/// Marks `db` as keeping its mysql data at the volume's root.
pub async fn mark_volume_root(api: &Api<Database>, db: &Database) -> Result<(), Error> {
    mark(
        api,
        db,
        MYSQL_DATADIR_ANNOTATION,
        Some(MYSQL_DATADIR_VOLUME_ROOT),
    )
    .await
}

/// Sets (or with `None` removes) the annotation `key` on `db`, which records where its
/// data lives. A merge patch, not an apply: the finalizer's applies under the same
/// manager must not remove it.
pub async fn mark(
    api: &Api<Database>,
    db: &Database,
    key: &str,
    value: Option<&str>,
) -> Result<(), Error> {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    api.patch(
        &db.name_any(),
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        },
        &Patch::Merge(&patch),
    )
    .await
    .map_err(Error::MarkDataLayout)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BuildConfig;
    use crate::resources::credentials::Layout;
    use crate::resources::fixtures::database;
    use crate::resources::statefulset::build_statefulset;

    #[test]
    fn a_mysql_statefulset_without_datadir_is_marked_once() {
        let db = database(Engine::Mysql, "8.4", 1);
        let mut old =
            build_statefulset(&db, &BuildConfig::default(), "10Gi", Layout::SeparateAdmin);
        assert!(
            !needs_volume_root_mark(&db, Some(&old)),
            "the current layout needs no mark"
        );
        if let Some(pod) = old.spec.as_mut().and_then(|s| s.template.spec.as_mut()) {
            pod.containers[0].args = None;
        }
        assert!(needs_volume_root_mark(&db, Some(&old)));
        assert!(
            !needs_volume_root_mark(&db, None),
            "a new Database needs no mark"
        );
        let mut marked = db.clone();
        marked.annotations_mut().insert(
            MYSQL_DATADIR_ANNOTATION.to_owned(),
            MYSQL_DATADIR_VOLUME_ROOT.to_owned(),
        );
        assert!(!needs_volume_root_mark(&marked, Some(&old)));
        let postgres = database(Engine::Postgres, "17", 1);
        let set = build_statefulset(
            &postgres,
            &BuildConfig::default(),
            "10Gi",
            Layout::SeparateAdmin,
        );
        assert!(!needs_volume_root_mark(&postgres, Some(&set)));
    }
}
