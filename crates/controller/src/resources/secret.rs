//! The two Secrets: `<name>-credentials` (generated once, the source of truth for the
//! password) and `<name>-connection` (derived from it, for applications to mount).

use database_api::Database;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use super::credentials::{Credentials, bytes};
use super::meta::{
    connection_secret_name, credentials_secret_name, object_meta, ro_service_name, rw_service_name,
};
use crate::engine::profile;

/// The credentials Secret holding `credentials`. It is created once and never applied
/// again, so a password is never replaced behind the user's back.
pub fn build_credentials_secret(db: &Database, credentials: &Credentials) -> Secret {
    Secret {
        metadata: object_meta(db, credentials_secret_name(db)),
        type_: Some("Opaque".to_owned()),
        data: Some(credentials.to_data()),
        ..Secret::default()
    }
}

/// The in-cluster host name applications write through: the `-rw` Service, which
/// selects exactly the primary. (The headless Service's own name would resolve to every
/// instance, not-ready ones included.)
pub fn host(db: &Database, cluster_domain: &str) -> String {
    service_host(&rw_service_name(db), db, cluster_domain)
}

/// The host name that reaches the replicas, for reads that may lag.
pub fn ro_host(db: &Database, cluster_domain: &str) -> String {
    service_host(&ro_service_name(db), db, cluster_domain)
}

fn service_host(service: &str, db: &Database, cluster_domain: &str) -> String {
    format!(
        "{service}.{}.svc.{cluster_domain}",
        db.namespace().unwrap_or_default()
    )
}

/// `host:port`, as shown in `status.endpoint`.
pub fn endpoint(db: &Database, cluster_domain: &str) -> String {
    format!(
        "{}:{}",
        host(db, cluster_domain),
        profile(db.spec.engine).port
    )
}

/// The `provider` a Service Binding workload sees.
pub const BINDING_PROVIDER: &str = "mycompany.io";

/// The connection Secret: host, port, username, password, database and a URI, shaped as
/// the Service Binding specification's binding Secret (its type and the `type` and
/// `provider` keys), so binding controllers and frameworks that read
/// `$SERVICE_BINDING_ROOT` pick it up as it is.
pub fn build_connection_secret(
    db: &Database,
    credentials: &Credentials,
    cluster_domain: &str,
) -> Secret {
    let engine = profile(db.spec.engine);
    let uri = |host: &str| {
        format!(
            "{}://{}:{}@{}:{}/{}{}",
            engine.scheme,
            credentials.username,
            credentials.password,
            host,
            engine.port,
            credentials.database,
            engine.uri_query
        )
    };
    let (host, ro_host) = (host(db, cluster_domain), ro_host(db, cluster_domain));
    let data = [
        ("type", engine.binding_type.to_owned()),
        ("provider", BINDING_PROVIDER.to_owned()),
        ("host", host.clone()),
        ("port", engine.port.to_string()),
        ("username", credentials.username.clone()),
        ("password", credentials.password.clone()),
        ("database", credentials.database.clone()),
        ("uri", uri(&host)),
        ("ro-host", ro_host.clone()),
        (
            "ro-uri",
            format!("{}{}", uri(&ro_host), engine.ro_uri_extra),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), bytes(&v)))
    .collect();
    Secret {
        metadata: object_meta(db, connection_secret_name(db)),
        type_: Some(binding_secret_type(db)),
        data: Some(data),
        ..Secret::default()
    }
}

/// The connection Secret's type: `servicebinding.io/<engine type>`.
pub fn binding_secret_type(db: &Database) -> String {
    format!("servicebinding.io/{}", profile(db.spec.engine).binding_type)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::database;
    use database_api::Engine;

    fn text(secret: &Secret, key: &str) -> String {
        let data = secret.data.as_ref().expect("data");
        String::from_utf8(data[key].0.clone()).expect("utf-8")
    }

    fn credentials() -> Credentials {
        Credentials {
            username: "app".into(),
            password: "s3cret".into(),
            database: "app".into(),
            admin: None,
            replication_password: None,
            replica_set_key: None,
        }
    }

    #[test]
    fn connection_secret_has_everything_an_application_needs() {
        let db = database(Engine::Postgres, "16.4", 1);
        let secret = build_connection_secret(&db, &credentials(), "cluster.local");
        assert_eq!(secret.metadata.name.as_deref(), Some("orders-connection"));
        assert_eq!(text(&secret, "host"), "orders-rw.shop.svc.cluster.local");
        assert_eq!(text(&secret, "port"), "5432");
        assert_eq!(text(&secret, "username"), "app");
        assert_eq!(text(&secret, "password"), "s3cret");
        assert_eq!(text(&secret, "database"), "app");
        assert_eq!(
            text(&secret, "uri"),
            "postgresql://app:s3cret@orders-rw.shop.svc.cluster.local:5432/app"
        );
    }

    #[test]
    fn the_connection_secret_is_a_service_binding_secret_of_the_engines_type() {
        for (engine, version, kind) in [
            (Engine::Postgres, "17", "postgresql"),
            (Engine::Mysql, "8.4", "mysql"),
            (Engine::Mongodb, "7.0", "mongodb"),
        ] {
            let db = database(engine, version, 1);
            let secret = build_connection_secret(&db, &credentials(), "cluster.local");
            assert_eq!(
                secret.type_.as_deref(),
                Some(format!("servicebinding.io/{kind}").as_str())
            );
            assert_eq!(text(&secret, "type"), kind);
            assert_eq!(text(&secret, "provider"), "mycompany.io");
            // The specification's well-known keys, all present.
            for key in ["host", "port", "username", "password", "database", "uri"] {
                assert!(!text(&secret, key).is_empty(), "{kind}: {key} is empty");
            }
        }
    }

    #[test]
    fn mongodb_uri_authenticates_against_admin() {
        let db = database(Engine::Mongodb, "7.0", 1);
        let uri = text(
            &build_connection_secret(&db, &credentials(), "cluster.local"),
            "uri",
        );
        assert_eq!(
            uri,
            "mongodb://app:s3cret@orders-rw.shop.svc.cluster.local:27017/app?authSource=admin"
        );
    }

    #[test]
    fn credentials_secret_is_owned_and_named_after_the_database() {
        let db = database(Engine::Mysql, "8.4", 1);
        let secret = build_credentials_secret(&db, &credentials());
        assert_eq!(secret.metadata.name.as_deref(), Some("orders-credentials"));
        assert!(secret.metadata.owner_references.is_some());
        assert_eq!(text(&secret, "password"), "s3cret");
    }

    #[test]
    fn endpoint_is_the_primary_service_in_the_configured_domain_and_the_engine_port() {
        assert_eq!(
            endpoint(&database(Engine::Mysql, "8.4", 3), "cluster.local"),
            "orders-rw.shop.svc.cluster.local:3306"
        );
        assert_eq!(
            endpoint(&database(Engine::Mysql, "8.4", 1), "corp.example"),
            "orders-rw.shop.svc.corp.example:3306"
        );
    }

    #[test]
    fn the_connection_secret_names_the_application_user_never_the_administrator() {
        let db = database(Engine::Postgres, "17", 1);
        let credentials = Credentials {
            admin: Some(("postgres".into(), "admin-secret".into())),
            ..credentials()
        };
        let secret = build_connection_secret(&db, &credentials, "cluster.local");
        let all: String = secret
            .data
            .expect("data")
            .values()
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .collect();
        assert!(!all.contains("admin-secret"), "{all}");
        assert!(!all.contains("postgres:"), "{all}");
    }
}
