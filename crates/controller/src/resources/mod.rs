//! Builders: pure functions from a Database to the objects it should own. Each returns
//! the complete desired object; the apply step sends it with server-side apply.

pub mod configmap;
pub mod credentials;
pub mod engine_config;
pub mod env;
pub mod meta;
pub mod monitoring;
pub mod pdb;
pub mod replication_init;
pub mod secret;
pub mod security;
pub mod service;
pub mod statefulset;

/// Settings that shape the desired objects but are not part of a Database.
#[derive(Clone, Debug)]
pub struct BuildConfig {
    /// Registry (and path) to pull engine images from instead of Docker Hub.
    pub image_registry: Option<String>,
    /// The cluster's DNS domain, for the host names in connection Secrets and status.
    pub cluster_domain: String,
}

/// The DNS domain of a cluster unless it was set up otherwise.
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

impl Default for BuildConfig {
    fn default() -> Self {
        Self {
            image_registry: None,
            cluster_domain: DEFAULT_CLUSTER_DOMAIN.to_owned(),
        }
    }
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
                backup: None,
                restore_from: None,
                replication: database_api::replication::Replication::default(),
                ..database_api::DatabaseSpec::new(
                    database_api::Engine::Postgres,
                    String::new(),
                    String::new(),
                )
            },
        );
        db.metadata.namespace = Some("shop".to_owned());
        db.metadata.uid = Some("0d5b7a44-1111-2222-3333-444455556666".to_owned());
        db.metadata.generation = Some(1);
        db
    }
}
