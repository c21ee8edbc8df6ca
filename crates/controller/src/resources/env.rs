//! How an instance gets its credentials: the official image's variables, each read from
//! the credentials Secret, laid out as that Secret is (see [`Layout`]).

use database_api::Database;
use k8s_openapi::api::core::v1::{EnvVar, EnvVarSource, SecretKeySelector};

use super::credentials::{
    ADMIN_PASSWORD_KEY, ADMIN_USERNAME_KEY, DATABASE_KEY, Layout, PASSWORD_KEY, ROOT_PASSWORD_KEY,
    USERNAME_KEY,
};
use super::meta::credentials_secret_name;
use crate::engine::{APP_PASSWORD_ENV, APP_USERNAME_ENV, EngineProfile};

/// mysql's root account reachable only from inside the instance (over its socket).
const MYSQL_ROOT_HOST: (&str, &str) = ("MYSQL_ROOT_HOST", "localhost");

/// The credential variables of `engine` for a Secret laid out as `layout`.
pub fn credential_env(db: &Database, engine: &EngineProfile, layout: Layout) -> Vec<EnvVar> {
    let secret = credentials_secret_name(db);
    let from_secret = |name: &str, key: &str| secret_env(&secret, name, key);
    let database = from_secret(engine.database_env, DATABASE_KEY);
    let replication = layout.replicates(db.spec.engine).then(|| {
        from_secret(
            engine.replication_credential.0,
            engine.replication_credential.1,
        )
    });
    match (layout.has_admin(), engine.root_password_env) {
        // mysql: the image's user is a plain one; root gets its own password, local only.
        (true, Some(root)) => {
            let mut env = vec![
                from_secret(engine.user_env, USERNAME_KEY),
                from_secret(engine.password_env, PASSWORD_KEY),
                database,
                from_secret(root, ADMIN_PASSWORD_KEY),
                plain_env(MYSQL_ROOT_HOST),
            ];
            env.extend(replication);
            env
        }
        // postgres, mongodb: the image's user is the superuser, so it is the
        // administrator, and a script makes the application user (and, where the
        // operator runs replication, the replication user).
        (true, None) => {
            let mut env = vec![
                from_secret(engine.user_env, ADMIN_USERNAME_KEY),
                from_secret(engine.password_env, ADMIN_PASSWORD_KEY),
                database,
                from_secret(APP_USERNAME_ENV, USERNAME_KEY),
                from_secret(APP_PASSWORD_ENV, PASSWORD_KEY),
            ];
            if let Some(replication) = replication {
                env.push(replication);
                if db.spec.engine == database_api::Engine::Postgres {
                    // pg_rewind needs page checksums (18 has them by default).
                    env.push(plain_env(("POSTGRES_INITDB_ARGS", "--data-checksums")));
                }
            }
            env
        }
        // Secrets from earlier versions: exactly the variables those instances got.
        (false, root) => {
            let mut env = vec![
                from_secret(engine.user_env, USERNAME_KEY),
                from_secret(engine.password_env, PASSWORD_KEY),
                database,
            ];
            if let (Some(root), Layout::MysqlRootPassword) = (root, layout) {
                env.push(from_secret(root, ROOT_PASSWORD_KEY));
            }
            env
        }
    }
}

/// The variable `name`, read from `key` of the Secret `secret`, which must have it.
pub(super) fn secret_env(secret: &str, name: &str, key: &str) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_owned(),
                key: key.to_owned(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

/// A variable with its value written out.
pub(super) fn plain_env((name, value): (&str, &str)) -> EnvVar {
    EnvVar {
        name: name.to_owned(),
        value: Some(value.to_owned()),
        ..EnvVar::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::profile;
    use crate::resources::fixtures::database;
    use database_api::Engine;

    fn pairs(env: &[EnvVar]) -> Vec<(String, String)> {
        env.iter()
            .map(|e| {
                let source = e
                    .value_from
                    .as_ref()
                    .and_then(|v| v.secret_key_ref.as_ref())
                    .map_or_else(
                        || format!("={}", e.value.clone().unwrap_or_default()),
                        |s| s.key.clone(),
                    );
                (e.name.clone(), source)
            })
            .collect()
    }

    fn env(engine: Engine, layout: Layout) -> Vec<(String, String)> {
        pairs(&credential_env(
            &database(engine, "1", 1),
            profile(engine),
            layout,
        ))
    }

    fn pair(name: &str, key: &str) -> (String, String) {
        (name.to_owned(), key.to_owned())
    }

    #[test]
    fn postgres_and_mongodb_make_the_administrator_the_superuser_and_a_script_the_app_user() {
        assert_eq!(
            env(Engine::Postgres, Layout::SeparateAdmin),
            [
                pair("POSTGRES_USER", "admin-username"),
                pair("POSTGRES_PASSWORD", "admin-password"),
                pair("POSTGRES_DB", "database"),
                pair("DATABASE_APP_USERNAME", "username"),
                pair("DATABASE_APP_PASSWORD", "password"),
                pair("DATABASE_REPLICATION_PASSWORD", "replication-password"),
                pair("POSTGRES_INITDB_ARGS", "=--data-checksums"),
            ]
        );
        assert_eq!(
            env(Engine::Mongodb, Layout::SeparateAdmin)[0],
            pair("MONGO_INITDB_ROOT_USERNAME", "admin-username")
        );
    }

    #[test]
    fn mysql_root_gets_the_administrator_password_and_stays_local() {
        assert_eq!(
            env(Engine::Mysql, Layout::SeparateAdmin),
            [
                pair("MYSQL_USER", "username"),
                pair("MYSQL_PASSWORD", "password"),
                pair("MYSQL_DATABASE", "database"),
                pair("MYSQL_ROOT_PASSWORD", "admin-password"),
                pair("MYSQL_ROOT_HOST", "=localhost"),
                pair("DATABASE_REPLICATION_PASSWORD", "replication-password"),
            ]
        );
    }

    #[test]
    fn instances_set_up_by_earlier_versions_keep_their_variables() {
        assert_eq!(
            env(Engine::Postgres, Layout::AppIsSuperuser),
            [
                pair("POSTGRES_USER", "username"),
                pair("POSTGRES_PASSWORD", "password"),
                pair("POSTGRES_DB", "database")
            ]
        );
        assert_eq!(
            env(Engine::Mysql, Layout::MysqlRootPassword).last(),
            Some(&pair("MYSQL_ROOT_PASSWORD", "root-password"))
        );
    }
}
