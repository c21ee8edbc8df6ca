//! Bringing changed engine settings to the running servers. A setting that needs a
//! restart changed the Pod template, and the StatefulSet rolls the instances one at a
//! time; the rest are applied in place once the rollout is over and the kubelet has
//! brought the new file into each Pod (its first line names the revision): postgres
//! reloads its configuration, mysql sets the global variables, mongodb the parameters.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use database_api::parameters::{Takes, lookup};
use database_api::{Database, Engine};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use crate::context::Context;
use crate::error::Error;
use crate::exec::{self, ExecError};
use crate::resources::engine_config::{self, file_path, revision, typed};

/// How soon to look again while an instance has not taken the settings yet: the
/// kubelet refreshes a mounted ConfigMap within about a minute.
const REQUEUE: Duration = Duration::from_secs(10);
const APPLIED: &str = "applied";
const STALE: &str = "stale";

/// What this pass did with the settings.
#[derive(Debug, Default)]
pub struct Step {
    /// The revision every instance now runs with, once it does.
    pub applied: Option<String>,
    pub requeue: Option<Duration>,
}

/// Applies the Database's settings to its ready instances, unless the status already
/// says every instance runs with them.
pub async fn apply(
    ctx: &Context,
    db: &Database,
    namespace: &str,
    set: &StatefulSet,
) -> Result<Step, Error> {
    let Some(settings) = engine_config::effective(db) else {
        return Ok(Step::default());
    };
    let wanted = revision(&settings);
    let recorded = db
        .status
        .as_ref()
        .and_then(|s| s.parameters_revision.as_deref());
    if recorded == Some(wanted.as_str()) {
        return Ok(Step::default());
    }
    let waiting = Step {
        applied: None,
        requeue: Some(REQUEUE),
    };
    let replicas = set
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or_default();
    if !rolled_out(set, replicas) {
        return Ok(waiting);
    }
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let exec_pods: Api<Pod> = Api::namespaced(ctx.exec_client().clone(), namespace);
    let listed = crate::replication::database_pods(&pods, db).await?;
    let instances = own_instances(&listed.items, set);
    if instances.len() != usize::try_from(replicas).unwrap_or_default() {
        return Ok(waiting);
    }
    for pod in instances {
        if !took_settings(&exec_pods, pod, db.spec.engine, &settings, &wanted).await {
            return Ok(waiting);
        }
    }
    Ok(Step {
        applied: Some(wanted),
        requeue: None,
    })
}

/// The Pods among `listed` that `set` controls. Backup and restore Jobs' Pods carry
/// the Database's labels too: only the StatefulSet's own instances count.
fn own_instances<'a>(listed: &'a [Pod], set: &StatefulSet) -> Vec<&'a Pod> {
    let set_name = set.metadata.name.as_deref().unwrap_or_default();
    listed
        .iter()
        .filter(|pod| {
            pod.metadata.owner_references.iter().flatten().any(|owner| {
                owner.kind == "StatefulSet"
                    && owner.name == set_name
                    && owner.controller == Some(true)
            })
        })
        .collect()
}

/// Whether `pod` runs with the settings at `wanted` now, applying them if its file is
/// there; a failure is logged and means not yet.
async fn took_settings(
    exec_pods: &Api<Pod>,
    pod: &Pod,
    engine: Engine,
    settings: &BTreeMap<String, String>,
    wanted: &str,
) -> bool {
    let name = pod.metadata.name.clone().unwrap_or_default();
    match reload(exec_pods, &name, engine, settings, wanted).await {
        Ok(took) => took,
        // The engine refused the settings: that stays until the spec changes, so it
        // is logged where an operator looks.
        Err(err @ ExecError::Failed { .. }) => {
            tracing::warn!(pod = %name, error = %err, "the engine refused the settings");
            false
        }
        // An instance restarting or not ready yet answers next time.
        Err(err) => {
            tracing::debug!(pod = %name, error = %err, "settings not applied yet");
            false
        }
    }
}

/// Whether the StatefulSet has every instance on its current template, ready.
fn rolled_out(set: &StatefulSet, replicas: i32) -> bool {
    let Some(status) = set.status.as_ref() else {
        return false;
    };
    status.observed_generation.is_some()
        && status.observed_generation == set.metadata.generation
        && status.updated_replicas == Some(replicas)
        && status.ready_replicas == Some(replicas)
        && status.current_revision == status.update_revision
}

/// Applies the settings in `pod` if its file is at `wanted`; false while it is not.
async fn reload(
    pods: &Api<Pod>,
    pod: &str,
    engine: Engine,
    settings: &BTreeMap<String, String>,
    wanted: &str,
) -> Result<bool, ExecError> {
    let output = match engine {
        Engine::Postgres | Engine::Mysql => {
            let script = shell_script(engine, settings, wanted);
            exec::run(pods, pod, &["sh", "-c", &script]).await?
        }
        Engine::Mongodb => {
            let script = format!(
                "const text = require('fs').readFileSync('{file}', 'utf8');\nif (!text.includes('# revision {wanted}\\n')) {{ print('{STALE}'); }} else {{\n{commands}print('{APPLIED}');\n}}",
                file = file_path(engine),
                commands = mongodb_commands(settings),
            );
            crate::replication::mongodb::shell(pods, pod, &script, Duration::from_secs(20)).await?
        }
    };
    Ok(output.lines().any(|line| line.trim() == APPLIED))
}

/// The shell script that applies the settings in a postgres or mysql container: it
/// prints `stale` while the mounted file is not at `wanted`, and `applied` once the
/// engine took the settings. The SQL goes in a quoted here-document, so the shell
/// expands nothing in it.
fn shell_script(engine: Engine, settings: &BTreeMap<String, String>, wanted: &str) -> String {
    let check = format!(
        "grep -qx '# revision {wanted}' {} || {{ echo {STALE}; exit 0; }}\n",
        file_path(engine)
    );
    if engine == Engine::Postgres {
        return format!(
            r#"{check}PGCONNECT_TIMEOUT=3 psql -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 -tAXq -c 'SELECT pg_reload_conf()' >/dev/null && echo {APPLIED}
"#
        );
    }
    let mut statements = String::new();
    for (name, value) in runtime(engine, settings) {
        let _ = writeln!(statements, "SET GLOBAL {name} = {};", mysql_value(value));
    }
    format!(
        "{check}MYSQL_PWD=\"$MYSQL_ROOT_PASSWORD\" mysql --protocol=socket -uroot --connect-timeout=3 -N -B <<'SQL' && echo {APPLIED}\n{statements}SQL\n"
    )
}

/// The settings the running server takes.
fn runtime(
    engine: Engine,
    settings: &BTreeMap<String, String>,
) -> impl Iterator<Item = (&String, &String)> {
    settings
        .iter()
        .filter(move |(name, _)| lookup(engine, name) == Ok(Takes::Reload))
}

/// A value as `SET GLOBAL` takes it: a number as it is (an option file's `K`, `M` and
/// `G` suffixes multiplied out), anything else quoted (validation keeps quotes out).
fn mysql_value(value: &str) -> String {
    let (digits, scale) = match value.char_indices().last() {
        Some((at, 'K' | 'k')) => (&value[..at], 1u64 << 10),
        Some((at, 'M' | 'm')) => (&value[..at], 1 << 20),
        Some((at, 'G' | 'g')) => (&value[..at], 1 << 30),
        Some((at, 'T' | 't')) => (&value[..at], 1 << 40),
        _ => (value, 1),
    };
    match digits.parse::<u64>() {
        Ok(number) => number.saturating_mul(scale).to_string(),
        Err(_) if value.parse::<f64>().is_ok() => value.to_owned(),
        Err(_) => format!("'{value}'"),
    }
}

/// The `setParameter` commands of mongodb's runtime settings.
fn mongodb_commands(settings: &BTreeMap<String, String>) -> String {
    runtime(Engine::Mongodb, settings)
        .filter_map(|(name, value)| {
            let parameter = name.strip_prefix("setParameter.")?;
            // The command's name must come first, so the object is written out by hand.
            Some(format!(
                "db.adminCommand({{ setParameter: 1, {}: {} }});\n",
                serde_json::Value::from(parameter),
                typed(value)
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sh -n` parses a script without running it.
    fn parses(script: &str) -> bool {
        std::process::Command::new("sh")
            .args(["-n", "-c", script])
            .status()
            .is_ok_and(|s| s.success())
    }

    #[test]
    fn the_scripts_are_valid_shell_and_end_by_saying_applied() {
        let settings = BTreeMap::from([
            ("max_connections".to_owned(), "300".to_owned()),
            ("sql_mode".to_owned(), "ANSI_QUOTES,$(reboot)".to_owned()),
        ]);
        for engine in [Engine::Postgres, Engine::Mysql] {
            let script = shell_script(engine, &settings, "0123");
            assert!(parses(&script), "{script}");
            assert!(script.contains(&format!("&& echo {APPLIED}")), "{script}");
            assert!(
                script.starts_with("grep -qx '# revision 0123' /etc/database/config/"),
                "{script}"
            );
        }
        assert!(
            !parses("true <<'SQL'\nx\nSQL\n && echo applied"),
            "sh -n catches the broken form"
        );
    }

    #[test]
    fn mysql_values_are_numbers_or_quoted_strings() {
        assert_eq!(mysql_value("300"), "300");
        assert_eq!(mysql_value("512M"), "536870912");
        assert_eq!(mysql_value("0.5"), "0.5");
        assert_eq!(mysql_value("ON"), "'ON'");
        assert_eq!(
            mysql_value("STRICT_TRANS_TABLES,NO_ZERO_DATE"),
            "'STRICT_TRANS_TABLES,NO_ZERO_DATE'"
        );
    }

    #[test]
    fn only_runtime_settings_are_applied_in_place() {
        let settings = BTreeMap::from([
            ("max_connections".to_owned(), "300".to_owned()),
            ("innodb_buffer_pool_instances".to_owned(), "2".to_owned()),
        ]);
        let script = shell_script(Engine::Mysql, &settings, "0123");
        assert!(
            script.contains("SET GLOBAL max_connections = 300;\n"),
            "{script}"
        );
        assert!(!script.contains("innodb_buffer_pool_instances"), "{script}");
        assert!(
            script.contains("<<'SQL'"),
            "the shell expands nothing: {script}"
        );

        let mongodb = mongodb_commands(&BTreeMap::from([
            (
                "setParameter.cursorTimeoutMillis".to_owned(),
                "60000".to_owned(),
            ),
            ("operationProfiling.mode".to_owned(), "slowOp".to_owned()),
        ]));
        assert_eq!(
            mongodb,
            "db.adminCommand({ setParameter: 1, \"cursorTimeoutMillis\": 60000 });\n"
        );
    }
}
