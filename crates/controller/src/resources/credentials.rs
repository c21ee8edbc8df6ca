//! The initial credentials of a Database: generated once, stored in
//! `<name>-credentials`, read back on every reconcile, never rotated silently.
//!
//! Two users: the engine's administrator (its own password, kept in this Secret only)
//! and the application user, which owns its database and nothing more and is the one
//! the connection Secret names. Secrets made by earlier versions of the operator have
//! no administrator of their own (postgres and mongodb made the application user the
//! superuser; mysql kept only a `root-password`); [`Layout`] tells them apart so their
//! instances keep running exactly as they were set up.
//!
//! `Debug` is implemented by hand so a password can never reach a log line.

use std::collections::BTreeMap;

use database_api::Engine;
use k8s_openapi::ByteString;

use crate::engine::profile;

pub use crate::keys::{
    ADMIN_PASSWORD_KEY, ADMIN_USERNAME_KEY, DATABASE_KEY, PASSWORD_KEY, REPLICA_SET_KEY_KEY,
    REPLICATION_PASSWORD_KEY, ROOT_PASSWORD_KEY, USERNAME_KEY,
};

/// The user and database every engine is initialised with.
const DEFAULT_USER: &str = "app";
const DEFAULT_DATABASE: &str = "app";
const PASSWORD_LENGTH: usize = 32;
/// Letters and digits only, so a password needs no escaping in a URI or a shell.
const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
    pub database: String,
    /// The administrator's name and password; `None` in a Secret made before the
    /// administrator had its own (the application user was the superuser).
    pub admin: Option<(String, String)>,
    /// The password replicas log in to the primary with (their own user, with
    /// replication rights only); `None` in a Secret made before replication existed.
    pub replication_password: Option<String>,
    /// mongodb only: the replica set's internal key; `None` in a Secret made before the
    /// operator ran mongodb replica sets.
    pub replica_set_key: Option<String>,
}

/// How a credentials Secret is laid out, which decides how the instances get them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `admin-username`/`admin-password` beside the application user.
    SeparateAdmin,
    /// A mysql Secret with only `root-password` beside the application user.
    MysqlRootPassword,
    /// postgres or mongodb with the application user as the superuser.
    AppIsSuperuser,
    /// A mongodb Secret with an administrator but no replica-set key: made before the
    /// operator ran replica sets, so its instances stay independent.
    AdminWithoutReplicaSetKey,
}

impl Layout {
    /// The layout of a Secret's data; a Database without one gets [`Layout::SeparateAdmin`].
    pub fn of(engine: Engine, data: Option<&BTreeMap<String, ByteString>>) -> Self {
        match data {
            None => Self::SeparateAdmin,
            Some(data)
                if engine == Engine::Mongodb
                    && data.contains_key(ADMIN_PASSWORD_KEY)
                    && !data.contains_key(REPLICA_SET_KEY_KEY) =>
            {
                Self::AdminWithoutReplicaSetKey
            }
            Some(data) if data.contains_key(ADMIN_PASSWORD_KEY) => Self::SeparateAdmin,
            Some(data) if data.contains_key(ROOT_PASSWORD_KEY) => Self::MysqlRootPassword,
            Some(_) => Self::AppIsSuperuser,
        }
    }

    /// Whether the Secret has an administrator apart from the application user.
    pub fn has_admin(self) -> bool {
        matches!(self, Self::SeparateAdmin | Self::AdminWithoutReplicaSetKey)
    }

    /// Whether the operator runs replication for `engine` with credentials laid out so.
    pub fn replicates(self, engine: Engine) -> bool {
        self == Self::SeparateAdmin && profile(engine).replication_script.is_some()
    }
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("database", &self.database)
            .field("admin", &self.admin.as_ref().map(|(name, _)| name))
            .finish_non_exhaustive()
    }
}

/// The credentials Secret lacked a key or held bytes that are not UTF-8.
#[derive(Debug, thiserror::Error)]
#[error("credentials Secret has no valid `{0}` key")]
pub struct MissingKey(pub &'static str);

/// Why credentials could not be generated.
#[derive(Debug, thiserror::Error)]
#[error("the operating system's random generator failed: {0}")]
pub struct RandomUnavailable(String);

impl Credentials {
    /// Fresh credentials for `engine`, from the operating system's random generator.
    pub fn generate(engine: Engine) -> Result<Self, RandomUnavailable> {
        Ok(Self {
            username: DEFAULT_USER.to_owned(),
            password: random_password()?,
            database: DEFAULT_DATABASE.to_owned(),
            admin: Some((profile(engine).admin_user.to_owned(), random_password()?)),
            replication_password: Some(random_password()?),
            replica_set_key: if engine == Engine::Mongodb {
                Some(random_password()?)
            } else {
                None
            },
        })
    }

    /// Reads credentials back from a Secret's data.
    pub fn from_data(data: &BTreeMap<String, ByteString>) -> Result<Self, MissingKey> {
        let get = |key: &'static str| {
            data.get(key)
                .and_then(|v| String::from_utf8(v.0.clone()).ok())
                .filter(|v| !v.is_empty())
                .ok_or(MissingKey(key))
        };
        let admin = match (get(ADMIN_USERNAME_KEY), get(ADMIN_PASSWORD_KEY)) {
            (Ok(name), Ok(password)) => Some((name, password)),
            (Err(_), Err(_)) => get(ROOT_PASSWORD_KEY).ok().map(|p| ("root".to_owned(), p)),
            (Err(missing), Ok(_)) | (Ok(_), Err(missing)) => return Err(missing),
        };
        Ok(Self {
            username: get(USERNAME_KEY)?,
            password: get(PASSWORD_KEY)?,
            database: get(DATABASE_KEY)?,
            admin,
            replication_password: get(REPLICATION_PASSWORD_KEY).ok(),
            replica_set_key: get(REPLICA_SET_KEY_KEY).ok(),
        })
    }

    /// The Secret data these credentials are stored as.
    pub fn to_data(&self) -> BTreeMap<String, ByteString> {
        let mut data = BTreeMap::from([
            (USERNAME_KEY.to_owned(), bytes(&self.username)),
            (PASSWORD_KEY.to_owned(), bytes(&self.password)),
            (DATABASE_KEY.to_owned(), bytes(&self.database)),
        ]);
        if let Some((name, password)) = &self.admin {
            data.insert(ADMIN_USERNAME_KEY.to_owned(), bytes(name));
            data.insert(ADMIN_PASSWORD_KEY.to_owned(), bytes(password));
        }
        if let Some(password) = &self.replication_password {
            data.insert(REPLICATION_PASSWORD_KEY.to_owned(), bytes(password));
        }
        if let Some(key) = &self.replica_set_key {
            data.insert(REPLICA_SET_KEY_KEY.to_owned(), bytes(key));
        }
        data
    }
}

pub fn bytes(text: &str) -> ByteString {
    ByteString(text.as_bytes().to_vec())
}

pub fn random_password() -> Result<String, RandomUnavailable> {
    // Rejection sampling keeps every character equally likely (256 is not a multiple of 62).
    let limit = u8::try_from(256 - 256 % ALPHABET.len()).unwrap_or(u8::MAX);
    let mut password = String::with_capacity(PASSWORD_LENGTH);
    while password.len() < PASSWORD_LENGTH {
        let mut buf = [0u8; 64];
        getrandom::fill(&mut buf).map_err(|e| RandomUnavailable(e.to_string()))?;
        for byte in buf.into_iter().filter(|b| *b < limit) {
            if password.len() == PASSWORD_LENGTH {
                break;
            }
            password.push(char::from(ALPHABET[usize::from(byte) % ALPHABET.len()]));
        }
    }
    Ok(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_passwords_are_long_alphanumeric_and_distinct() {
        let a = Credentials::generate(Engine::Postgres).expect("random");
        let b = Credentials::generate(Engine::Postgres).expect("random");
        assert_eq!(a.password.len(), PASSWORD_LENGTH);
        assert!(a.password.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a.password, b.password);
    }

    #[test]
    fn every_engine_gets_an_administrator_of_its_own() {
        for (engine, admin) in [
            (Engine::Postgres, "postgres"),
            (Engine::Mysql, "root"),
            (Engine::Mongodb, "root"),
        ] {
            let creds = Credentials::generate(engine).expect("random");
            let (name, password) = creds.admin.clone().expect("administrator");
            assert_eq!(name, admin);
            assert_ne!(password, creds.password);
            assert_ne!(name, creds.username);
            assert_eq!(
                Layout::of(engine, Some(&creds.to_data())),
                Layout::SeparateAdmin
            );
        }
    }

    #[test]
    fn secrets_from_earlier_versions_keep_their_layout() {
        let mut legacy_mysql = BTreeMap::from([
            (USERNAME_KEY.to_owned(), bytes("app")),
            (PASSWORD_KEY.to_owned(), bytes("p")),
            (DATABASE_KEY.to_owned(), bytes("app")),
        ]);
        assert_eq!(
            Layout::of(Engine::Mysql, Some(&legacy_mysql)),
            Layout::AppIsSuperuser
        );
        legacy_mysql.insert(ROOT_PASSWORD_KEY.to_owned(), bytes("r"));
        assert_eq!(
            Layout::of(Engine::Mysql, Some(&legacy_mysql)),
            Layout::MysqlRootPassword
        );
        let creds = Credentials::from_data(&legacy_mysql).expect("complete");
        assert_eq!(creds.admin, Some(("root".to_owned(), "r".to_owned())));
        assert_eq!(Layout::of(Engine::Mongodb, None), Layout::SeparateAdmin);
    }

    #[test]
    fn a_mongodb_secret_without_a_replica_set_key_keeps_independent_instances() {
        let mut data = Credentials::generate(Engine::Mongodb)
            .expect("random")
            .to_data();
        assert!(Layout::of(Engine::Mongodb, Some(&data)).replicates(Engine::Mongodb));
        data.remove(REPLICA_SET_KEY_KEY);
        let layout = Layout::of(Engine::Mongodb, Some(&data));
        assert_eq!(layout, Layout::AdminWithoutReplicaSetKey);
        assert!(layout.has_admin() && !layout.replicates(Engine::Mongodb));
        let postgres = Credentials::generate(Engine::Postgres).expect("random");
        assert_eq!(postgres.replica_set_key, None);
        assert!(
            Layout::of(Engine::Postgres, Some(&postgres.to_data())).replicates(Engine::Postgres)
        );
    }

    #[test]
    fn credentials_round_trip_through_secret_data() {
        let creds = Credentials::generate(Engine::Mysql).expect("random");
        assert_eq!(
            Credentials::from_data(&creds.to_data()).expect("complete"),
            creds
        );
    }

    #[test]
    fn a_secret_missing_the_password_is_reported_by_key() {
        let mut data = Credentials::generate(Engine::Postgres)
            .expect("random")
            .to_data();
        data.remove(PASSWORD_KEY);
        assert_eq!(
            Credentials::from_data(&data)
                .expect_err("incomplete")
                .to_string(),
            "credentials Secret has no valid `password` key"
        );
    }

    #[test]
    fn debug_output_never_shows_the_password() {
        let creds = Credentials::generate(Engine::Mysql).expect("random");
        let shown = format!("{creds:?}");
        assert!(!shown.contains(&creds.password), "{shown}");
        let (_, admin_password) = creds.admin.clone().expect("administrator");
        assert!(!shown.contains(&admin_password), "{shown}");
    }
}
