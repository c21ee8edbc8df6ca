//! Holding a postgres database's writes while an upgrade moves its data: new sessions
//! start read-only (the setting is the database's own, so it holds across a restart)
//! and the application's open sessions are ended. The backup and restore Jobs turn it
//! off for their own session only.

use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::exec::{self, ExecError};

/// Runs the script on stdin as the superuser, with the application database's name as
/// the variable `db` (`:"db"` quotes it as an identifier, `:'db'` as a literal).
const PSQL: &str = r#"export PGCONNECT_TIMEOUT=3; exec psql -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 -tAX -v db="$POSTGRES_DB" <<'SQL'"#;

const HOLD: &str = r#"ALTER DATABASE :"db" SET default_transaction_read_only = on;
SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
 WHERE datname = :'db' AND pid <> pg_backend_pid() AND usename <> current_user;
SQL"#;

const RELEASE: &str = r#"ALTER DATABASE :"db" RESET default_transaction_read_only;
SQL"#;

/// Makes new sessions of the application database read-only and ends the open ones.
pub async fn hold(pods: &Api<Pod>, pod: &str) -> Result<(), ExecError> {
    exec::run(pods, pod, &["sh", "-c", &format!("{PSQL}\n{HOLD}")]).await?;
    Ok(())
}

/// Lets new sessions write again.
pub async fn release(pods: &Api<Pod>, pod: &str) -> Result<(), ExecError> {
    exec::run(pods, pod, &["sh", "-c", &format!("{PSQL}\n{RELEASE}")]).await?;
    Ok(())
}

/// The session setting the backup and restore Jobs connect with, so a held database
/// still lets them read and restore (`PGOPTIONS`).
pub const JOB_SESSION_OPTIONS: &str = "-c default_transaction_read_only=off";
