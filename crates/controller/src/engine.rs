//! What differs between engines, in one table: image, port, data path, credential
//! variables, probes and the image's user. Builders read this; nothing else branches on
//! the engine.

use database_api::Engine;

use crate::keys::{REPLICA_SET_KEY_KEY, REPLICATION_PASSWORD_KEY};

/// How one engine's official image is run.
#[derive(Debug, PartialEq, Eq)]
pub struct EngineProfile {
    /// Image repository on Docker Hub (the tag is the spec's version).
    pub image: &'static str,
    /// The port clients connect to, and its name.
    pub port: i32,
    pub port_name: &'static str,
    /// URI scheme of the connection string.
    pub scheme: &'static str,
    /// The engine's type in the Service Binding specification (the connection Secret's
    /// `type` key and, prefixed with `servicebinding.io/`, its Secret type).
    pub binding_type: &'static str,
    /// Query appended to the connection URI.
    pub uri_query: &'static str,
    /// Parameters appended to it for the read-only URI.
    pub ro_uri_extra: &'static str,
    /// The image's non-root user and group.
    pub uid: i64,
    /// Writable folders the image needs besides its data volume, as emptyDirs, so the
    /// root filesystem can stay read-only.
    pub scratch_dirs: &'static [&'static str],
    /// The image's variables naming the user it creates at initialisation, its
    /// password and the database to create. postgres and mongodb make that user the
    /// superuser; mysql makes a plain user with rights on that database.
    pub user_env: &'static str,
    pub password_env: &'static str,
    pub database_env: &'static str,
    /// Variable for a separate superuser password, where the image has one (mysql).
    pub root_password_env: Option<&'static str>,
    /// The administrator's name: the superuser the image creates.
    pub admin_user: &'static str,
    /// The script (file name, contents) the image runs once on an empty data
    /// directory: where the image's own variables only make a superuser (postgres,
    /// mongodb), it creates the application user from [`APP_USERNAME_ENV`] and
    /// [`APP_PASSWORD_ENV`]; where the operator runs replication, the replication user.
    pub init_script: Option<(&'static str, &'static str)>,
    /// For engines whose replication the operator runs: the script an init container
    /// runs before the server, which makes every instance but the primary its replica.
    pub replication_script: Option<&'static str>,
    /// The variable and credentials-Secret key of what instances replicate with: the
    /// replication user's password, or mongodb's replica-set key.
    pub replication_credential: (&'static str, &'static str),
    /// Server arguments of a replicated instance.
    pub replication_args: &'static [&'static str],
    /// Readiness check run inside the container.
    pub readiness_command: &'static [&'static str],
}

/// Variables the application-user scripts read (set only where a script runs).
pub const APP_USERNAME_ENV: &str = "DATABASE_APP_USERNAME";
pub const APP_PASSWORD_ENV: &str = "DATABASE_APP_PASSWORD";
/// The variable the replication user's password is passed in.
pub const REPLICATION_PASSWORD_ENV: &str = "DATABASE_REPLICATION_PASSWORD";
/// The variable mongodb's replica-set key is passed in; the init container writes it
/// to [`MONGODB_KEYFILE`] with the owner-only mode mongod demands.
pub const REPLICA_SET_KEY_ENV: &str = "DATABASE_REPLICA_SET_KEY";
/// The replica set's name: every mongodb Database runs its own set, so one name serves.
pub const MONGODB_REPLICA_SET: &str = "rs0";
const MONGODB_KEYFILE_DIR: &str = "/etc/mongodb-keyfile";
pub const MONGODB_KEYFILE: &str = "/etc/mongodb-keyfile/keyfile";
/// Where the official images run initialisation scripts from.
pub const INIT_SCRIPTS_DIR: &str = "/docker-entrypoint-initdb.d";

/// Where the data volume is mounted for `engine` at `version`, and the variable or
/// server argument that keeps the data in a subfolder of it (if any).
#[derive(Debug, PartialEq, Eq)]
pub struct DataLayout {
    pub mount_path: &'static str,
    pub env: Option<(&'static str, &'static str)>,
    pub args: &'static [&'static str],
}

/// The mysql server argument that keeps the data in a subfolder of the volume.
pub const MYSQL_DATADIR_ARG: &str = "--datadir=/var/lib/mysql/data";

const POSTGRES: EngineProfile = EngineProfile {
    image: "postgres",
    port: 5432,
    port_name: "postgres",
    scheme: "postgresql",
    binding_type: "postgresql",
    uri_query: "",
    ro_uri_extra: "",
    uid: 999,
    scratch_dirs: &["/tmp", "/var/run/postgresql"],
    user_env: "POSTGRES_USER",
    password_env: "POSTGRES_PASSWORD",
    database_env: "POSTGRES_DB",
    root_password_env: None,
    admin_user: "postgres",
    init_script: Some((
        "10-application-user.sh",
        include_str!("resources/scripts/postgres-application-user.sh"),
    )),
    replication_script: Some(include_str!("resources/scripts/postgres-replication.sh")),
    replication_credential: (REPLICATION_PASSWORD_ENV, REPLICATION_PASSWORD_KEY),
    replication_args: &[],
    readiness_command: &[
        "sh",
        "-c",
        "exec pg_isready -h 127.0.0.1 -p 5432 -U \"$POSTGRES_USER\" -d \"$POSTGRES_DB\"",
    ],
};

const MYSQL: EngineProfile = EngineProfile {
    image: "mysql",
    port: 3306,
    port_name: "mysql",
    scheme: "mysql",
    binding_type: "mysql",
    uri_query: "",
    ro_uri_extra: "",
    uid: 999,
    // conf.d takes the replication settings the init container writes.
    scratch_dirs: &["/tmp", "/var/run/mysqld", "/etc/mysql/conf.d"],
    user_env: "MYSQL_USER",
    password_env: "MYSQL_PASSWORD",
    database_env: "MYSQL_DATABASE",
    root_password_env: Some("MYSQL_ROOT_PASSWORD"),
    admin_user: "root",
    init_script: Some((
        "10-replication-user.sh",
        include_str!("resources/scripts/mysql-replication-user.sh"),
    )),
    replication_script: Some(include_str!("resources/scripts/mysql-replication.sh")),
    replication_credential: (REPLICATION_PASSWORD_ENV, REPLICATION_PASSWORD_KEY),
    replication_args: &[],
    readiness_command: &[
        "sh",
        "-c",
        "exec mysqladmin ping -h 127.0.0.1 -P 3306 --silent",
    ],
};

const MONGODB: EngineProfile = EngineProfile {
    // There is no official `mongodb` image: the Docker Hub library image is `mongo`.
    image: "mongo",
    port: 27017,
    port_name: "mongodb",
    scheme: "mongodb",
    binding_type: "mongodb",
    uri_query: "?authSource=admin",
    // A secondary serves reads only to a client that asks for them.
    ro_uri_extra: "&readPreference=secondaryPreferred",
    uid: 999,
    // The keyfile folder takes the replica-set key the init container writes.
    scratch_dirs: &["/tmp", MONGODB_KEYFILE_DIR],
    user_env: "MONGO_INITDB_ROOT_USERNAME",
    password_env: "MONGO_INITDB_ROOT_PASSWORD",
    database_env: "MONGO_INITDB_DATABASE",
    root_password_env: None,
    admin_user: "root",
    init_script: Some((
        "10-application-user.js",
        include_str!("resources/scripts/mongodb-application-user.js"),
    )),
    replication_script: Some(include_str!("resources/scripts/mongodb-replication.sh")),
    replication_credential: (REPLICA_SET_KEY_ENV, REPLICA_SET_KEY_KEY),
    replication_args: &[
        "--replSet",
        MONGODB_REPLICA_SET,
        "--keyFile",
        MONGODB_KEYFILE,
    ],
    readiness_command: &[
        "bash",
        "-c",
        include_str!("resources/scripts/mongodb-ready.sh"),
    ],
};

/// The profile of `engine`.
pub fn profile(engine: Engine) -> &'static EngineProfile {
    match engine {
        Engine::Postgres => &POSTGRES,
        Engine::Mysql => &MYSQL,
        Engine::Mongodb => &MONGODB,
    }
}

/// The data layout of `engine` at `version`. Postgres 18 moved its data: the volume goes
/// at `/var/lib/postgresql` (a mount at the old path makes the container exit), and the
/// image picks a versioned subfolder itself.
pub fn data_layout(engine: Engine, version: &str) -> DataLayout {
    match engine {
        Engine::Postgres if major(version).is_some_and(|m| m >= 18) => DataLayout {
            mount_path: "/var/lib/postgresql",
            env: None,
            args: &[],
        },
        // The volume's root holds `lost+found` on many filesystems (ext4, the default of
        // most cloud disks), which initdb and mysqld's initialisation both refuse.
        Engine::Postgres => DataLayout {
            mount_path: "/var/lib/postgresql/data",
            env: Some(("PGDATA", "/var/lib/postgresql/data/pgdata")),
            args: &[],
        },
        Engine::Mysql => DataLayout {
            mount_path: "/var/lib/mysql",
            env: None,
            args: &[MYSQL_DATADIR_ARG],
        },
        Engine::Mongodb => DataLayout {
            mount_path: "/data/db",
            env: None,
            args: &[],
        },
    }
}

/// The leading number of a version string such as "16.4".
pub fn major(version: &str) -> Option<u32> {
    version.split('.').next()?.parse().ok()
}

/// The image reference for `engine` at `version`, under `registry` when one is given
/// (a mirror such as `registry.example.com/library`).
pub fn image(engine: Engine, version: &str, registry: Option<&str>) -> String {
    let repository = profile(engine).image;
    match registry
        .map(|r| r.trim_end_matches('/'))
        .filter(|r| !r.is_empty())
    {
        Some(registry) => format!("{registry}/{repository}:{version}"),
        None => format!("{repository}:{version}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_engine_listens_on_its_well_known_port() {
        assert_eq!(profile(Engine::Postgres).port, 5432);
        assert_eq!(profile(Engine::Mysql).port, 3306);
        assert_eq!(profile(Engine::Mongodb).port, 27017);
    }

    #[test]
    fn mongodb_uses_the_official_mongo_image() {
        assert_eq!(image(Engine::Mongodb, "7.0", None), "mongo:7.0");
        assert_eq!(image(Engine::Postgres, "16.4", None), "postgres:16.4");
        assert_eq!(image(Engine::Mysql, "8.4", None), "mysql:8.4");
    }

    #[test]
    fn a_mirror_registry_prefixes_the_image() {
        assert_eq!(
            image(Engine::Mysql, "8.4", Some("mirror.local/library/")),
            "mirror.local/library/mysql:8.4"
        );
        assert_eq!(image(Engine::Mysql, "8.4", Some("")), "mysql:8.4");
    }

    #[test]
    fn postgres_up_to_17_keeps_pgdata_in_a_subfolder_of_the_volume() {
        let layout = data_layout(Engine::Postgres, "17.2");
        assert_eq!(layout.mount_path, "/var/lib/postgresql/data");
        assert_eq!(
            layout.env,
            Some(("PGDATA", "/var/lib/postgresql/data/pgdata"))
        );
    }

    #[test]
    fn postgres_18_mounts_the_parent_folder_and_sets_no_pgdata() {
        let layout = data_layout(Engine::Postgres, "18");
        assert_eq!(layout.mount_path, "/var/lib/postgresql");
        assert_eq!(layout.env, None);
    }

    #[test]
    fn mysql_keeps_its_data_in_a_subfolder_beside_lost_and_found() {
        assert_eq!(data_layout(Engine::Mysql, "9.7").args, [MYSQL_DATADIR_ARG]);
        assert!(data_layout(Engine::Postgres, "17").args.is_empty());
    }

    #[test]
    fn mysql_and_mongodb_mount_their_data_paths() {
        assert_eq!(
            data_layout(Engine::Mysql, "8.4").mount_path,
            "/var/lib/mysql"
        );
        assert_eq!(data_layout(Engine::Mongodb, "7.0").mount_path, "/data/db");
    }

    /// The bytes the mongodb readiness script's `printf` sends, its escapes decoded.
    fn readiness_request() -> Vec<u8> {
        let script = MONGODB.readiness_command[2];
        let start = script.find("printf '").expect("a printf") + "printf '".len();
        let format = &script[start..start + script[start..].find('\'').expect("closed")];
        let mut bytes = Vec::new();
        let mut rest = format;
        while let Some(c) = rest.chars().next() {
            if let Some(hex) = rest.strip_prefix("\\x") {
                bytes.push(u8::from_str_radix(&hex[..2], 16).expect("two hex digits"));
                rest = &hex[2..];
            } else {
                bytes.push(u8::try_from(c).expect("ASCII"));
                rest = &rest[1..];
            }
        }
        bytes
    }

    fn int32_at(bytes: &[u8], at: usize) -> usize {
        let word: [u8; 4] = bytes[at..at + 4].try_into().expect("four bytes");
        usize::try_from(i32::from_le_bytes(word)).expect("not negative")
    }

    #[test]
    fn the_mongodb_readiness_probe_sends_one_well_formed_hello() {
        let request = readiness_request();
        // Header: the whole length, then OP_MSG (2013); no flags; a body section (0).
        assert_eq!(int32_at(&request, 0), request.len());
        assert_eq!(int32_at(&request, 12), 2013);
        assert_eq!(int32_at(&request, 16), 0);
        assert_eq!(request[20], 0);
        // The body: one BSON document filling the rest, { hello: 1, $db: "admin" }.
        let document = &request[21..];
        assert_eq!(int32_at(document, 0), document.len());
        assert_eq!(&document[4..11], b"\x10hello\0");
        assert_eq!(int32_at(document, 11), 1);
        assert_eq!(&document[15..20], b"\x02$db\0");
        assert_eq!(int32_at(document, 20), "admin\0".len());
        assert_eq!(&document[24..], b"admin\0\0");
        // The controller greets members with the same message.
        assert_eq!(
            request,
            crate::replication::mongodb::wire::command_message("hello")
        );
        assert_eq!(MONGODB.readiness_command[..2], ["bash", "-c"]);
        // The script names the port itself; it must be the one the server listens on.
        let target = format!("/dev/tcp/127.0.0.1/{}", MONGODB.port);
        assert!(MONGODB.readiness_command[2].contains(&target), "{target}");
    }
}
