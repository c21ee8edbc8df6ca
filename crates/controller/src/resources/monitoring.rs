//! The exporter sidecar of a Database with `spec.monitoring.enabled`, and the Secret
//! its own database user logs in with.
//!
//! The exporter talks to the server over the Pod's loopback as `monitor`, a user that
//! may read the server's statistics and nothing else (see `crate::monitoring`). Its
//! password lives in `<name>-monitor`, generated once like the credentials, and reaches
//! the database container too, so the controller can create the user without the
//! password ever being on a command line.

use std::collections::BTreeMap;

use database_api::monitoring::exporter;
use database_api::{Database, Engine};
use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, ResourceRequirements, Secret};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;

use super::credentials::bytes;
use super::env::{plain_env, secret_env};
use super::meta::object_meta;
use super::security::restricted;
use crate::keys::{PASSWORD_KEY, USERNAME_KEY};

/// The exporter container's name.
pub const EXPORTER_CONTAINER: &str = "exporter";
/// The name of the port the exporter serves metrics on; the PodMonitor selects it.
pub const METRICS_PORT_NAME: &str = "metrics";
/// The database user the exporter logs in as.
pub const MONITOR_USER: &str = "monitor";
/// The variable holding that user's password in the database container.
pub const MONITOR_PASSWORD_ENV: &str = "DATABASE_MONITOR_PASSWORD";

/// Whether the Database asks for an exporter.
pub fn enabled(db: &Database) -> bool {
    db.spec.monitoring.as_ref().is_some_and(|m| m.enabled)
}

/// Name of the Secret holding the monitoring user's password.
pub fn monitor_secret_name(db: &Database) -> String {
    format!("{}-monitor", db.name_any())
}

/// The monitoring user's Secret. Created once and never applied again, like the
/// credentials.
pub fn build_monitor_secret(db: &Database, password: &str) -> Secret {
    Secret {
        metadata: object_meta(db, monitor_secret_name(db)),
        type_: Some("kubernetes.io/basic-auth".to_owned()),
        data: Some(BTreeMap::from([
            (USERNAME_KEY.to_owned(), bytes(MONITOR_USER)),
            (PASSWORD_KEY.to_owned(), bytes(password)),
        ])),
        ..Secret::default()
    }
}

/// The variable that hands the monitoring password to the database container.
pub fn database_env(db: &Database) -> Option<EnvVar> {
    enabled(db).then(|| secret_env(&monitor_secret_name(db), MONITOR_PASSWORD_ENV, PASSWORD_KEY))
}

/// The exporter sidecar, when the Database asks for one.
pub fn exporter_container(db: &Database) -> Option<Container> {
    let monitoring = db.spec.monitoring.as_ref().filter(|m| m.enabled)?;
    let engine = db.spec.engine;
    let port = exporter(engine).port;
    let password = |name: &str| secret_env(&monitor_secret_name(db), name, PASSWORD_KEY);
    let (args, env) = match engine {
        Engine::Postgres => (
            Vec::new(),
            vec![
                plain_env(("DATA_SOURCE_URI", "127.0.0.1:5432/postgres?sslmode=disable")),
                plain_env(("DATA_SOURCE_USER", MONITOR_USER)),
                password("DATA_SOURCE_PASS"),
            ],
        ),
        Engine::Mysql => (
            vec![
                "--mysqld.address=127.0.0.1:3306".to_owned(),
                format!("--mysqld.username={MONITOR_USER}"),
            ],
            vec![password("MYSQLD_EXPORTER_PASSWORD")],
        ),
        Engine::Mongodb => (
            vec![
                "--mongodb.uri=mongodb://127.0.0.1:27017/admin?directConnection=true".to_owned(),
                "--collector.replicasetstatus".to_owned(),
                "--collector.dbstats".to_owned(),
                "--collector.diagnosticdata".to_owned(),
                "--compatible-mode".to_owned(),
            ],
            vec![
                plain_env(("MONGODB_USER", MONITOR_USER)),
                password("MONGODB_PASSWORD"),
            ],
        ),
    };
    Some(Container {
        name: EXPORTER_CONTAINER.to_owned(),
        image: Some(monitoring.image_for(engine)),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        args: (!args.is_empty()).then_some(args),
        env: Some(env),
        ports: Some(vec![ContainerPort {
            name: Some(METRICS_PORT_NAME.to_owned()),
            container_port: port,
            protocol: Some("TCP".to_owned()),
            ..ContainerPort::default()
        }]),
        resources: Some(exporter_resources()),
        security_context: Some(restricted()),
        ..Container::default()
    })
}

/// Enough for an exporter answering a scrape every few seconds; the limit keeps a
/// runaway one from taking the database's memory.
fn exporter_resources() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity("10m".to_owned())),
            ("memory".to_owned(), Quantity("32Mi".to_owned())),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_owned(),
            Quantity("128Mi".to_owned()),
        )])),
        ..ResourceRequirements::default()
    }
}

#[cfg(test)]
mod tests {
    use database_api::monitoring::Monitoring;

    use super::*;
    use crate::resources::fixtures::database;

    fn monitored(engine: Engine) -> Database {
        let mut db = database(engine, "17", 1);
        db.spec.monitoring = Some(Monitoring {
            enabled: true,
            image: None,
        });
        db
    }

    #[test]
    fn no_exporter_unless_asked_for() {
        let mut db = database(Engine::Postgres, "17", 1);
        assert!(exporter_container(&db).is_none());
        assert!(database_env(&db).is_none());
        db.spec.monitoring = Some(Monitoring::default());
        assert!(exporter_container(&db).is_none());
    }

    #[test]
    fn each_engine_serves_metrics_on_its_exporters_port_as_the_monitor_user() {
        for engine in Engine::ALL {
            let container = exporter_container(&monitored(engine)).expect("exporter");
            let port = &container.ports.expect("ports")[0];
            assert_eq!(port.name.as_deref(), Some(METRICS_PORT_NAME));
            assert_eq!(port.container_port, exporter(engine).port);
            let env = container.env.expect("env");
            let password = env
                .iter()
                .find(|e| e.value_from.is_some())
                .and_then(|e| e.value_from.as_ref())
                .and_then(|v| v.secret_key_ref.as_ref())
                .expect("password from a Secret");
            assert_eq!(password.name, "orders-monitor");
            assert_eq!(password.key, PASSWORD_KEY);
            let named_user = env.iter().any(|e| e.value.as_deref() == Some(MONITOR_USER))
                || container
                    .args
                    .iter()
                    .flatten()
                    .any(|a| a.ends_with(&format!("={MONITOR_USER}")));
            assert!(
                named_user,
                "{engine}: the exporter logs in as {MONITOR_USER}"
            );
            let security = container.security_context.expect("security context");
            assert_eq!(security.read_only_root_filesystem, Some(true));
            assert_eq!(security.allow_privilege_escalation, Some(false));
        }
    }

    #[test]
    fn the_monitor_secret_names_the_user_and_never_holds_the_administrator() {
        let secret = build_monitor_secret(&monitored(Engine::Mysql), "s3cret");
        let data = secret.data.expect("data");
        assert_eq!(data[USERNAME_KEY].0, b"monitor");
        assert_eq!(data[PASSWORD_KEY].0, b"s3cret");
        assert_eq!(data.len(), 2);
        assert_eq!(secret.metadata.name.as_deref(), Some("orders-monitor"));
    }
}
