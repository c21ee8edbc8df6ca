//! The initial credentials of a Database: generated once, stored in
//! `<name>-credentials`, read back on every reconcile, never rotated silently.
//!
//! `Debug` is implemented by hand so a password can never reach a log line.

use std::collections::BTreeMap;

use database_api::Engine;
use k8s_openapi::ByteString;

use crate::engine::profile;

/// Keys of the credentials Secret.
pub const USERNAME_KEY: &str = "username";
pub const PASSWORD_KEY: &str = "password";
pub const DATABASE_KEY: &str = "database";
pub const ROOT_PASSWORD_KEY: &str = "root-password";

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
    pub root_password: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("database", &self.database)
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
            root_password: match profile(engine).root_password_env {
                Some(_) => Some(random_password()?),
                None => None,
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
        Ok(Self {
            username: get(USERNAME_KEY)?,
            password: get(PASSWORD_KEY)?,
            database: get(DATABASE_KEY)?,
            root_password: get(ROOT_PASSWORD_KEY).ok(),
        })
    }

    /// The Secret data these credentials are stored as.
    pub fn to_data(&self) -> BTreeMap<String, ByteString> {
        let mut data = BTreeMap::from([
            (USERNAME_KEY.to_owned(), bytes(&self.username)),
            (PASSWORD_KEY.to_owned(), bytes(&self.password)),
            (DATABASE_KEY.to_owned(), bytes(&self.database)),
        ]);
        if let Some(root) = &self.root_password {
            data.insert(ROOT_PASSWORD_KEY.to_owned(), bytes(root));
        }
        data
    }
}

pub fn bytes(text: &str) -> ByteString {
    ByteString(text.as_bytes().to_vec())
}

fn random_password() -> Result<String, RandomUnavailable> {
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
        assert_eq!(a.root_password, None);
    }

    #[test]
    fn mysql_also_gets_a_separate_root_password() {
        let creds = Credentials::generate(Engine::Mysql).expect("random");
        let root = creds.root_password.clone().expect("root password");
        assert_ne!(root, creds.password);
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
        assert!(
            !shown.contains(creds.root_password.as_deref().unwrap_or("-")),
            "{shown}"
        );
    }
}
