//! The exporter's database user: created on the primary, through the engine's own
//! client in the database container, once the Database asks for an exporter.
//!
//! `monitor` may read the server's statistics and nothing else: postgres's
//! `pg_monitor` role; mysql's `PROCESS`, `REPLICATION CLIENT` and reads of
//! `performance_schema`, from the Pod's loopback only; mongodb's `clusterMonitor` and
//! reads of `local` (the oplog's size and window). Replicas get it through replication.
//! Its password comes from the container's environment, never a command line, and each
//! script may run again: it sets the password and rights to what they should be.

use database_api::conditions::{self, reason};
use database_api::{Database, Engine};
use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use crate::exec::{self, ExecError};
use crate::replication::mongodb;
use crate::resources::monitoring::enabled;

/// Stops a script on an instance that has not restarted with the password yet.
const NEEDS_PASSWORD: &str = r#"[ -n "$DATABASE_MONITOR_PASSWORD" ] || { echo "the instance has not restarted with the monitoring password yet" >&2; exit 1; }"#;

const POSTGRES: &str = r#"export PGCONNECT_TIMEOUT=3
psql -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 -qtAX -v password="$DATABASE_MONITOR_PASSWORD" <<'SQL'
SELECT 'CREATE ROLE monitor' WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'monitor')\gexec
ALTER ROLE monitor WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS CONNECTION LIMIT 3 PASSWORD :'password';
GRANT pg_monitor TO monitor;
SQL"#;

const MYSQL: &str = r#"export MYSQL_PWD="$MYSQL_ROOT_PASSWORD"
printf "CREATE USER IF NOT EXISTS 'monitor'@'127.0.0.1' IDENTIFIED BY '%s' WITH MAX_USER_CONNECTIONS 3; ALTER USER 'monitor'@'127.0.0.1' IDENTIFIED BY '%s' WITH MAX_USER_CONNECTIONS 3; GRANT PROCESS, REPLICATION CLIENT ON *.* TO 'monitor'@'127.0.0.1'; GRANT SELECT ON performance_schema.* TO 'monitor'@'127.0.0.1';" "$DATABASE_MONITOR_PASSWORD" "$DATABASE_MONITOR_PASSWORD" | mysql --protocol=socket -uroot --connect-timeout=3"#;

const MONGODB: &str = r#"const pwd = process.env.DATABASE_MONITOR_PASSWORD;
if (!pwd) { throw new Error("the instance has not restarted with the monitoring password yet"); }
const admin = db.getSiblingDB("admin");
const roles = [{ role: "clusterMonitor", db: "admin" }, { role: "read", db: "local" }];
if (admin.getUser("monitor")) { admin.updateUser("monitor", { pwd, roles }); }
else { admin.createUser({ user: "monitor", pwd, roles }); }"#;

/// How soon a pass tries again to create the user.
const RETRY: std::time::Duration = std::time::Duration::from_secs(10);
/// How long creating the user may take.
const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// The MonitoringReady condition this pass sets: (status, reason, message).
pub type Verdict = (bool, &'static str, String);

/// Makes sure the exporter's user exists on `primary` (a ready primary's Pod) when the
/// Database asks for an exporter and its condition does not say so already. `None`
/// when there is nothing to say.
pub async fn ensure_user(pods: &Api<Pod>, db: &Database, primary: Option<&str>) -> Option<Verdict> {
    let previous = db
        .status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, conditions::MONITORING_READY));
    if !enabled(db) {
        return previous.map(|_| {
            (
                false,
                reason::MONITORING_DISABLED,
                "spec.monitoring.enabled is not set, so no exporter runs".to_owned(),
            )
        });
    }
    if previous.is_some_and(|c| c.status == conditions::TRUE) {
        return Some(ready());
    }
    let Some(primary) = primary else {
        return Some((
            false,
            reason::MONITORING_PENDING,
            "waiting for a ready primary to create the monitoring user on".to_owned(),
        ));
    };
    Some(match create_user(pods, db.spec.engine, primary).await {
        Ok(()) => ready(),
        Err(err) => (
            false,
            reason::MONITORING_PENDING,
            format!("creating the monitoring user failed, and will be tried again: {err}"),
        ),
    })
}

/// When to look again: soon while the user is not made yet.
pub fn retry_after(verdict: Option<&Verdict>) -> Option<std::time::Duration> {
    verdict
        .filter(|(_, why, _)| *why == reason::MONITORING_PENDING)
        .map(|_| RETRY)
}

fn ready() -> Verdict {
    (
        true,
        reason::MONITORING_USER_READY,
        "the exporter logs in as monitor, which may read the server's statistics only".to_owned(),
    )
}

async fn create_user(pods: &Api<Pod>, engine: Engine, pod: &str) -> Result<(), ExecError> {
    let script = match engine {
        Engine::Postgres => POSTGRES,
        Engine::Mysql => MYSQL,
        Engine::Mongodb => {
            return mongodb::shell(pods, pod, MONGODB, TIMEOUT)
                .await
                .map(|_| ());
        }
    };
    let guarded = format!("{NEEDS_PASSWORD}\n{script}");
    exec::run_within(pods, pod, &["sh", "-c", &guarded], TIMEOUT)
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_script_puts_the_password_on_a_command_line() {
        for script in [POSTGRES, MYSQL, MONGODB] {
            assert!(script.contains("DATABASE_MONITOR_PASSWORD"));
        }
        assert!(POSTGRES.contains(":'password'"));
    }

    #[test]
    fn the_user_gets_read_only_statistics_rights() {
        assert!(POSTGRES.contains("GRANT pg_monitor TO monitor"));
        assert!(POSTGRES.contains("NOSUPERUSER"));
        assert!(!MYSQL.contains("GRANT ALL"));
        assert!(!MYSQL.contains("SELECT ON *.*"));
        assert!(MONGODB.contains("clusterMonitor"));
        assert!(!MONGODB.contains("readWrite"));
    }
}
