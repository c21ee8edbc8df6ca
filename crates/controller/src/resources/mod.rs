//! Builders: pure functions from a Database to the objects it should own. Each returns
//! the complete desired object; the apply step sends it with server-side apply.

pub mod credentials;
pub mod meta;
pub mod pdb;
pub mod secret;
pub mod service;
pub mod statefulset;

/// Settings that shape the desired objects but are not part of a Database.
#[derive(Clone, Debug, Default)]
pub struct BuildConfig {
    /// Registry (and path) to pull engine images from instead of Docker Hub.
    pub image_registry: Option<String>,
}

#[cfg(test)]
pub(crate) mod fixtures {
    use database_api::{Database, DatabaseSpec, DeletionPolicy, Engine};

    /// A Database as the API server would hand it over.
    pub fn database(engine: Engine, version: &str, replicas: i32) -> Database {
        let mut db = Database::new(
            "orders",
            DatabaseSpec {
                engine,
                version: version.to_owned(),
                storage: "10Gi".to_owned(),
                replicas,
                deletion_policy: DeletionPolicy::Retain,
            },
        );
        db.metadata.namespace = Some("shop".to_owned());
        db.metadata.uid = Some("0d5b7a44-1111-2222-3333-444455556666".to_owned());
        db.metadata.generation = Some(1);
        db
    }
}
