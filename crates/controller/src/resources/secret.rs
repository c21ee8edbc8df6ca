//! The two Secrets: `<name>-credentials` (generated once, the source of truth for the
//! password) and `<name>-connection` (derived from it, for applications to mount).

use database_api::Database;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;

use super::credentials::{Credentials, bytes};
use super::meta::{connection_secret_name, credentials_secret_name, object_meta};
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

/// The in-cluster host name of a Database's Service.
pub fn host(db: &Database) -> String {
    format!(
        "{}.{}.svc.cluster.local",
        db.name_any(),
        db.namespace().unwrap_or_default()
    )
}

/// `host:port`, as shown in `status.endpoint`.
pub fn endpoint(db: &Database) -> String {
    format!("{}:{}", host(db), profile(db.spec.engine).port)
}

/// The connection Secret: host, port, username, password, database and a URI.
pub fn build_connection_secret(db: &Database, credentials: &Credentials) -> Secret {
    let engine = profile(db.spec.engine);
    let host = host(db);
    let uri = format!(
        "{}://{}:{}@{}:{}/{}{}",
        engine.scheme,
        credentials.username,
        credentials.password,
        host,
        engine.port,
        credentials.database,
        engine.uri_query
    );
    let data = [
        ("host", host.clone()),
        ("port", engine.port.to_string()),
        ("username", credentials.username.clone()),
        ("password", credentials.password.clone()),
        ("database", credentials.database.clone()),
        ("uri", uri),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), bytes(&v)))
    .collect();
    Secret {
        metadata: object_meta(db, connection_secret_name(db)),
        type_: Some("Opaque".to_owned()),
        data: Some(data),
        ..Secret::default()
    }
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
            root_password: None,
        }
    }

    #[test]
    fn connection_secret_has_everything_an_application_needs() {
        let db = database(Engine::Postgres, "16.4", 1);
        let secret = build_connection_secret(&db, &credentials());
        assert_eq!(secret.metadata.name.as_deref(), Some("orders-connection"));
        assert_eq!(text(&secret, "host"), "orders.shop.svc.cluster.local");
        assert_eq!(text(&secret, "port"), "5432");
        assert_eq!(text(&secret, "username"), "app");
        assert_eq!(text(&secret, "password"), "s3cret");
        assert_eq!(text(&secret, "database"), "app");
        assert_eq!(
            text(&secret, "uri"),
            "postgresql://app:s3cret@orders.shop.svc.cluster.local:5432/app"
        );
    }

    #[test]
    fn mongodb_uri_authenticates_against_admin() {
        let db = database(Engine::Mongodb, "7.0", 1);
        let uri = text(&build_connection_secret(&db, &credentials()), "uri");
        assert_eq!(
            uri,
            "mongodb://app:s3cret@orders.shop.svc.cluster.local:27017/app?authSource=admin"
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
    fn endpoint_is_the_service_host_and_engine_port() {
        assert_eq!(
            endpoint(&database(Engine::Mysql, "8.4", 1)),
            "orders.shop.svc.cluster.local:3306"
        );
    }
}
