//! The engine's configuration file, rendered from `spec.parameters` and the memory
//! settings that follow the memory limit, in a ConfigMap the operator owns and mounted
//! into every instance. The file's first line names its revision, so a reload can tell
//! that the kubelet has brought the new file into the Pod.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use database_api::parameters::{Takes, canonical, lookup, memory_settings};
use database_api::{Database, Engine, quantity};
use k8s_openapi::api::core::v1::{ConfigMap, ConfigMapVolumeSource, Volume, VolumeMount};

use super::meta::{config_configmap_name, object_meta};

/// Where the file is mounted.
pub const CONFIG_DIR: &str = "/etc/database/config";
const VOLUME: &str = "engine-config";
/// The Pod template annotation that changes when a setting needing a restart changes,
/// so the StatefulSet rolls the instances one at a time.
pub const RESTART_ANNOTATION: &str = "mycompany.io/restart-settings";

/// The settings the server runs with: the memory settings of the memory limit, then
/// the user's parameters (which win). `None` when the Database gives neither, and the
/// server runs with the image's own configuration.
pub fn effective(db: &Database) -> Option<BTreeMap<String, String>> {
    let engine = db.spec.engine;
    let limit = db
        .spec
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref())
        .and_then(|l| l.get("memory"))
        .and_then(|q| quantity::bytes(&q.0));
    if limit.is_none() && db.spec.parameters.is_none() {
        return None;
    }
    let mut settings: BTreeMap<String, String> = limit
        .map(|bytes| memory_settings(engine, bytes))
        .unwrap_or_default()
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value))
        .collect();
    for (name, value) in db.spec.parameters.iter().flatten() {
        settings.insert(canonical(engine, name), value.clone());
    }
    Some(settings)
}

/// The file's name for `engine`.
pub fn file_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Postgres => "postgresql.conf",
        Engine::Mysql => "my.cnf",
        Engine::Mongodb => "mongod.conf",
    }
}

/// The path the server reads the file from.
pub fn file_path(engine: Engine) -> String {
    format!("{CONFIG_DIR}/{}", file_name(engine))
}

/// The revision of a set of settings: what the file's first line names, and what the
/// status records once every instance runs with it.
pub fn revision(settings: &BTreeMap<String, String>) -> String {
    fingerprint(settings.iter().map(|(k, v)| format!("{k}={v}")))
}

/// The fingerprint of the settings only a restart applies. mysql and mongodb cannot
/// take back a runtime setting that was removed, so there the names of the runtime
/// settings count too: adding or removing one restarts, changing its value does not.
pub fn restart_revision(engine: Engine, settings: &BTreeMap<String, String>) -> String {
    fingerprint(
        settings
            .iter()
            .filter_map(|(name, value)| match (lookup(engine, name), engine) {
                (Ok(Takes::Reload), Engine::Postgres) => None,
                (Ok(Takes::Reload), Engine::Mysql | Engine::Mongodb) => Some(name.clone()),
                _ => Some(format!("{name}={value}")),
            }),
    )
}

/// FNV-1a, 64 bits, in hex: stable across builds and releases, which a revision must be.
fn fingerprint(lines: impl Iterator<Item = String>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for line in lines {
        for byte in line.bytes().chain(std::iter::once(b'\n')) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// The ConfigMap holding the file, when the Database has settings.
pub fn build_config_configmap(db: &Database, data_directory: Option<&str>) -> Option<ConfigMap> {
    let settings = effective(db)?;
    let text = render(db.spec.engine, &settings, data_directory);
    Some(ConfigMap {
        metadata: object_meta(db, config_configmap_name(db)),
        data: Some(BTreeMap::from([(
            file_name(db.spec.engine).to_owned(),
            text,
        )])),
        ..ConfigMap::default()
    })
}

/// The file's text. postgres's includes the data directory's own `postgresql.conf`
/// first, so the settings initdb wrote still apply unless overridden.
pub fn render(
    engine: Engine,
    settings: &BTreeMap<String, String>,
    data_directory: Option<&str>,
) -> String {
    let mut text = format!(
        "# Written by the database operator from spec.parameters.\n# revision {}\n",
        revision(settings)
    );
    match engine {
        Engine::Postgres => {
            if let Some(directory) = data_directory {
                let _ = writeln!(
                    text,
                    "include_if_exists = '{}/postgresql.conf'",
                    quote_postgres(directory)
                );
            }
            for (name, value) in settings {
                let _ = writeln!(text, "{name} = '{}'", quote_postgres(value));
            }
        }
        Engine::Mysql => {
            text.push_str("[mysqld]\n");
            for (name, value) in settings {
                let _ = writeln!(text, "{name} = {value}");
            }
        }
        Engine::Mongodb => {
            // JSON is YAML, and serde_json nests the dotted paths correctly.
            let mut root = serde_json::Map::new();
            for (path, value) in settings {
                insert_path(&mut root, path, typed(value));
            }
            text.push_str(&serde_json::Value::Object(root).to_string());
            text.push('\n');
        }
    }
    text
}

fn quote_postgres(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\'', "''")
}

/// A value as mongod reads it: a number or a boolean when it looks like one.
pub fn typed(value: &str) -> serde_json::Value {
    match value {
        "true" => serde_json::Value::Bool(true),
        "false" => serde_json::Value::Bool(false),
        _ => value
            .parse::<i64>()
            .map(serde_json::Value::from)
            .or_else(|_| value.parse::<f64>().map(serde_json::Value::from))
            .unwrap_or_else(|_| serde_json::Value::String(value.to_owned())),
    }
}

fn insert_path(
    root: &mut serde_json::Map<String, serde_json::Value>,
    path: &str,
    value: serde_json::Value,
) {
    let mut node = root;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            node.insert(part.to_owned(), value);
            return;
        }
        let child = node
            .entry(part.to_owned())
            .or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        if !child.is_object() {
            *child = serde_json::Value::Object(serde_json::Map::new());
        }
        let Some(map) = child.as_object_mut() else {
            return;
        };
        node = map;
    }
}

/// The arguments that point the server at the file; they go first (mysql reads
/// `--defaults-extra-file` only as its first option).
pub fn server_args(engine: Engine) -> Vec<String> {
    match engine {
        Engine::Postgres => vec![
            "-c".to_owned(),
            format!("config_file={}", file_path(engine)),
        ],
        Engine::Mysql => vec![format!("--defaults-extra-file={}", file_path(engine))],
        Engine::Mongodb => vec!["--config".to_owned(), file_path(engine)],
    }
}

/// The volume of the ConfigMap and its read-only mount.
pub fn volume(db: &Database) -> (Volume, VolumeMount) {
    (
        Volume {
            name: VOLUME.to_owned(),
            config_map: Some(ConfigMapVolumeSource {
                name: config_configmap_name(db),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        VolumeMount {
            name: VOLUME.to_owned(),
            mount_path: CONFIG_DIR.to_owned(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
    )
}

#[cfg(test)]
mod tests;
