//! Names the operator's objects share, kept at the bottom so the engine table, the
//! exec layer and the builders all read them from one place: the database container's
//! name and the keys of the credentials Secret.

/// Name of the database container in every instance's Pod.
pub const CONTAINER: &str = "database";

/// Keys of the credentials Secret.
pub const USERNAME_KEY: &str = "username";
pub const PASSWORD_KEY: &str = "password";
pub const DATABASE_KEY: &str = "database";
pub const ADMIN_USERNAME_KEY: &str = "admin-username";
pub const ADMIN_PASSWORD_KEY: &str = "admin-password";
pub const REPLICATION_PASSWORD_KEY: &str = "replication-password";
/// The key mongodb replica-set members authenticate each other with (a keyfile's
/// contents).
pub const REPLICA_SET_KEY_KEY: &str = "replica-set-key";
/// mysql's root password in Secrets made before the administrator keys existed.
pub const ROOT_PASSWORD_KEY: &str = "root-password";
