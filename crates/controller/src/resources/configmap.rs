//! The ConfigMap of initialisation scripts, mounted where the official images run them
//! once on an empty data directory: for postgres and mongodb it creates the application
//! user, which the images' own variables would make a superuser; for mysql the
//! replication user. It also holds the replication init container's script.

use database_api::Database;
use k8s_openapi::api::core::v1::ConfigMap;

use std::collections::BTreeMap;

use super::meta::{init_configmap_name, object_meta, topology_configmap_name};
use super::replication_init::{PRIMARY_KEY, SCRIPT_KEY};
use crate::engine::profile;

/// The scripts ConfigMap of `db`, or `None` for an engine that needs none: the
/// application-user script, and the replication script where the operator runs
/// replication.
pub fn build_init_configmap(db: &Database) -> Option<ConfigMap> {
    let engine = profile(db.spec.engine);
    let (file, script) = engine.init_script?;
    let mut data = BTreeMap::from([(file.to_owned(), script.to_owned())]);
    if let Some(replication) = engine.replication_script {
        data.insert(SCRIPT_KEY.to_owned(), replication.to_owned());
    }
    Some(ConfigMap {
        metadata: object_meta(db, init_configmap_name(db)),
        data: Some(data),
        ..ConfigMap::default()
    })
}

/// The topology ConfigMap: which instance is the primary. Instances read it when they
/// start (see `replication_init`); the controller changes it before it promotes.
pub fn build_topology_configmap(db: &Database, primary: &str) -> ConfigMap {
    ConfigMap {
        metadata: object_meta(db, topology_configmap_name(db)),
        data: Some(BTreeMap::from([(
            PRIMARY_KEY.to_owned(),
            primary.to_owned(),
        )])),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::database;
    use database_api::Engine;

    #[test]
    fn postgres_and_mongodb_get_the_application_user_script_and_mysql_the_replication_user() {
        let postgres =
            build_init_configmap(&database(Engine::Postgres, "17", 1)).expect("postgres");
        assert_eq!(postgres.metadata.name.as_deref(), Some("orders-init"));
        let script = &postgres.data.expect("data")["10-application-user.sh"];
        assert!(
            script.contains("ALTER DATABASE :\"app_database\" OWNER TO :\"app_user\""),
            "{script}"
        );
        assert!(
            !script.contains("SUPERUSER") || script.contains("no superuser"),
            "{script}"
        );
        let mongodb = build_init_configmap(&database(Engine::Mongodb, "7.0", 1)).expect("mongodb");
        assert!(mongodb.data.expect("data")["10-application-user.js"].contains("readWrite"));
        let mysql = build_init_configmap(&database(Engine::Mysql, "9.7", 1)).expect("mysql");
        let data = mysql.data.expect("data");
        assert!(data["10-replication-user.sh"].contains("GRANT REPLICATION SLAVE, BACKUP_ADMIN"));
        assert!(data["replication.sh"].contains("gtid-mode=ON"));
    }
}
