//! Objects this operator does not control are never written. Before anything is
//! applied, every object a Database would own is looked at: one that exists without
//! this Database as its controller is a conflict, and the Database changes nothing
//! until it is gone. The one exception is a credentials Secret kept from an earlier
//! Database of the same name and engine whose data was retained: it is recognised by
//! its labels and taken back, so the kept volumes and their passwords meet again.

use database_api::Database;
use database_api::constants::{RETAINED_VERSION_ANNOTATION, labels};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};

/// An object in the way: its kind and name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub kind: &'static str,
    pub name: String,
}

impl Conflict {
    /// The status message and event note.
    pub fn message(&self) -> String {
        format!(
            "{} {} already exists and is not controlled by this Database; the operator changes nothing until it is removed or the Database is given another name",
            self.kind, self.name
        )
    }
}

/// Whether `db` is the controller of the object with `meta`.
pub fn is_controlled_by(meta: &ObjectMeta, db: &Database) -> bool {
    let Some(uid) = db.meta().uid.as_deref() else {
        return false;
    };
    meta.owner_references
        .iter()
        .flatten()
        .any(|r| r.controller == Some(true) && r.uid == uid)
}

/// The first of `objects` (kind, metadata if it exists) not controlled by `db`.
pub fn first_conflict<'a>(
    db: &Database,
    objects: impl IntoIterator<Item = (&'static str, Option<&'a ObjectMeta>)>,
) -> Option<Conflict> {
    objects.into_iter().find_map(|(kind, meta)| {
        let meta = meta?;
        (!is_controlled_by(meta, db)).then(|| Conflict {
            kind,
            name: meta.name.clone().unwrap_or_default(),
        })
    })
}

/// Whether `meta` is a credentials Secret kept when an earlier Database named like `db`,
/// of the same engine, was deleted with its data retained: the operator's labels for
/// that name and engine, and no controller.
pub fn is_retained_credentials(meta: &ObjectMeta, db: &Database) -> bool {
    let labels = meta.labels.as_ref();
    let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
    label(labels::INSTANCE) == Some(db.name_any().as_str())
        && label(labels::NAME) == Some(db.spec.engine.as_str())
        && label(labels::MANAGED_BY) == Some(labels::MANAGED_BY_VALUE)
        && !meta
            .owner_references
            .iter()
            .flatten()
            .any(|r| r.controller == Some(true))
}

/// The version the retained data was written by, as recorded when it was kept.
pub fn retained_version(meta: &ObjectMeta) -> Option<&str> {
    meta.annotations
        .as_ref()?
        .get(RETAINED_VERSION_ANNOTATION)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::database;
    use crate::resources::meta::object_meta;
    use database_api::Engine;
    use std::collections::BTreeMap;

    #[test]
    fn an_object_this_database_controls_is_no_conflict_and_any_other_is() {
        let db = database(Engine::Postgres, "17", 1);
        let ours = object_meta(&db, "orders".into());
        let foreign = ObjectMeta {
            name: Some("orders".into()),
            ..ObjectMeta::default()
        };
        assert_eq!(
            first_conflict(&db, [("StatefulSet", Some(&ours)), ("Service", None)]),
            None
        );
        let conflict = first_conflict(
            &db,
            [("StatefulSet", Some(&ours)), ("Service", Some(&foreign))],
        )
        .expect("a conflict");
        assert_eq!(
            conflict,
            Conflict {
                kind: "Service",
                name: "orders".into()
            }
        );
        assert!(
            conflict.message().starts_with(
                "Service orders already exists and is not controlled by this Database"
            )
        );
        let mut other_database = database(Engine::Postgres, "17", 1);
        other_database.metadata.uid = Some("another-uid".into());
        assert!(!is_controlled_by(&ours, &other_database));
    }

    #[test]
    fn retained_credentials_are_recognised_by_name_engine_and_manager_without_a_controller() {
        let db = database(Engine::Postgres, "17", 1);
        let mut kept = object_meta(&db, "orders-credentials".into());
        kept.owner_references = None;
        assert!(is_retained_credentials(&kept, &db));
        let mysql = database(Engine::Mysql, "9.7", 1);
        assert!(
            !is_retained_credentials(&kept, &mysql),
            "another engine's data"
        );
        let someone_elses = ObjectMeta {
            name: Some("orders-credentials".into()),
            labels: Some(BTreeMap::from([(
                labels::INSTANCE.to_owned(),
                "orders".to_owned(),
            )])),
            ..ObjectMeta::default()
        };
        assert!(!is_retained_credentials(&someone_elses, &db));
        let controlled = object_meta(&db, "orders-credentials".into());
        assert!(
            !is_retained_credentials(&controlled, &db),
            "controlled, so not kept"
        );
    }
}
