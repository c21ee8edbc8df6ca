//! What the controller keeps of each Database it watches: the object without the parts
//! no pass reads. At 10,000 Databases the cache is most of the controller's memory.

use database_api::Database;
use kube::ResourceExt as _;

/// The annotation `kubectl apply` keeps the whole applied object in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what no pass reads: `managedFields`, kubectl's copy of the last applied
/// object, and the labels (the objects a Database owns carry labels of their own; a
/// Database's are never copied to them). An empty label or annotation map still holds
/// a node of several hundred bytes, so it goes too.
pub fn slim(db: &mut Database) {
    let metadata = &mut db.metadata;
    metadata.managed_fields = None;
    metadata.labels = None;
    if let Some(annotations) = metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
    if db.annotations().is_empty() {
        db.metadata.annotations = None;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use database_api::Engine;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;
    use crate::resources::fixtures::database;

    #[test]
    fn a_cached_database_keeps_what_passes_read_and_nothing_else() {
        let mut db = database(Engine::Postgres, "17", 1);
        db.metadata.finalizers = Some(vec!["databases.mycompany.io/finalizer".into()]);
        db.metadata.managed_fields = Some(vec![ManagedFieldsEntry::default()]);
        db.metadata.labels = Some(BTreeMap::from([("team".into(), "shop".into())]));
        db.metadata.annotations = Some(BTreeMap::from([
            (LAST_APPLIED.into(), "{}".into()),
            ("mycompany.io/switchover-to".into(), "orders-1".into()),
        ]));
        let spec = db.spec.clone();
        slim(&mut db);
        assert_eq!(db.metadata.managed_fields, None);
        assert_eq!(db.metadata.labels, None);
        assert_eq!(
            db.metadata.annotations,
            Some(BTreeMap::from([(
                "mycompany.io/switchover-to".into(),
                "orders-1".into()
            )]))
        );
        assert_eq!(db.name_any(), "orders");
        assert_eq!(db.finalizers(), ["databases.mycompany.io/finalizer"]);
        assert_eq!(db.spec, spec);

        db.metadata.annotations = Some(BTreeMap::from([(LAST_APPLIED.into(), "{}".into())]));
        slim(&mut db);
        assert_eq!(db.metadata.annotations, None, "no empty map is kept");
    }
}
