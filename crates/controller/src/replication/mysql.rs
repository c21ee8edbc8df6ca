//! What the controller asks a mysql instance, through `mysql` in its container as root
//! over the local socket: its state, and the changes GTID replication needs. Passwords
//! reach the client through its environment (`MYSQL_PWD`) or its standard input, never
//! a command line.

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::gtid::GtidSet;
use super::plan::{EngineState, History};
use crate::exec::{self, ExecError};

/// `mysql` as root, with the SQL as its one argument: tab-separated rows, no headers.
const MYSQL: &str = r#"export MYSQL_PWD="$MYSQL_ROOT_PASSWORD"; exec mysql --protocol=socket -uroot --connect-timeout=3 -N -B -e "$1""#;
/// How long asking an instance its state may take: a hung one must not hold up a pass.
const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(8);

/// Writable, the GTID sets (executed, purged, received by the replication channel), the
/// source host, both replication threads' states, and whether commits wait for a
/// replica. Line breaks inside GTID sets are dropped so the row stays one line.
const STATE: &str = "SELECT @@global.read_only, \
     REPLACE(@@global.gtid_executed, '\\n', ''), REPLACE(@@global.gtid_purged, '\\n', ''), \
     COALESCE((SELECT REPLACE(RECEIVED_TRANSACTION_SET, '\\n', '') FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = ''), ''), \
     COALESCE((SELECT HOST FROM performance_schema.replication_connection_configuration WHERE CHANNEL_NAME = ''), ''), \
     COALESCE((SELECT SERVICE_STATE FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = ''), ''), \
     COALESCE((SELECT SERVICE_STATE FROM performance_schema.replication_applier_status WHERE CHANNEL_NAME = ''), ''), \
     @@global.rpl_semi_sync_source_enabled";

/// The instance's state.
pub async fn state(pods: &Api<Pod>, pod: &str) -> Result<EngineState, ExecError> {
    let output =
        exec::run_within(pods, pod, &["sh", "-c", MYSQL, "sh", STATE], ASK_TIMEOUT).await?;
    parse_state(&output).ok_or_else(|| ExecError::Failed {
        pod: pod.to_owned(),
        stderr: format!("unexpected answer {output:?}"),
    })
}

/// Makes a replica the primary: it stops fetching, applies what it already received
/// (up to 15 seconds), forgets its source and takes writes.
pub async fn promote(pods: &Api<Pod>, pod: &str) -> Result<(), ExecError> {
    let sql = "STOP REPLICA IO_THREAD; \
        SELECT COALESCE((SELECT RECEIVED_TRANSACTION_SET FROM performance_schema.replication_connection_status WHERE CHANNEL_NAME = ''), '') INTO @received; \
        SELECT WAIT_FOR_EXECUTED_GTID_SET(@received, 15); \
        STOP REPLICA; RESET REPLICA ALL; \
        SET GLOBAL super_read_only = OFF; SET GLOBAL read_only = OFF";
    let output = exec::run(pods, pod, &["sh", "-c", MYSQL, "sh", sql]).await?;
    if output.trim() == "0" {
        Ok(())
    } else {
        Err(ExecError::Failed {
            pod: pod.to_owned(),
            stderr: "the replica did not apply what it had received within 15 seconds".to_owned(),
        })
    }
}

/// Before a healthy primary hands over to `to`: it stops taking writes, and `to`
/// applies every transaction it committed (up to 15 seconds), so that no write it
/// acknowledged is lost when `to` is promoted. When `to` does not catch up in time,
/// the primary takes writes again and the hand-over waits for a later pass.
pub async fn hand_over(pods: &Api<Pod>, from: &str, to: &str) -> Result<(), ExecError> {
    let freeze =
        "SET GLOBAL super_read_only = ON; SELECT REPLACE(@@global.gtid_executed, '\\n', '')";
    // An error here may come after the freeze took hold, so it thaws as a miss does.
    let caught_up =
        match exec::run_within(pods, from, &["sh", "-c", MYSQL, "sh", freeze], ASK_TIMEOUT).await {
            Ok(executed) => applied(pods, to, executed.trim()).await,
            Err(error) => Err(error),
        };
    match caught_up {
        Ok(true) => Ok(()),
        Ok(false) => {
            thaw(pods, from).await?;
            Err(ExecError::Failed {
                pod: to.to_owned(),
                stderr: format!("did not apply what {from} committed within 15 seconds"),
            })
        }
        Err(error) => {
            thaw(pods, from).await?;
            Err(error)
        }
    }
}

/// Whether `to` applied the GTID set `executed` within 15 seconds.
async fn applied(pods: &Api<Pod>, to: &str, executed: &str) -> Result<bool, ExecError> {
    if GtidSet::parse(executed).is_none() {
        return Ok(false);
    }
    let wait = format!("SELECT WAIT_FOR_EXECUTED_GTID_SET('{executed}', 15)");
    exec::run(pods, to, &["sh", "-c", MYSQL, "sh", &wait])
        .await
        .map(|answer| answer.trim() == "0")
}

/// Lets a primary whose hand-over did not finish take writes again.
async fn thaw(pods: &Api<Pod>, pod: &str) -> Result<(), ExecError> {
    let thaw = "SET GLOBAL super_read_only = OFF; SET GLOBAL read_only = OFF";
    exec::run_within(pods, pod, &["sh", "-c", MYSQL, "sh", thaw], ASK_TIMEOUT)
        .await
        .map(|_| ())
}

/// Makes an instance a read-only replica of `primary`, by GTID auto-positioning, over
/// TLS. The replication user's password goes to the client on its standard input.
pub async fn repoint(
    pods: &Api<Pod>,
    pod: &str,
    primary: &str,
    service: &str,
) -> Result<(), ExecError> {
    let script = format!(
        r#"export MYSQL_PWD="$MYSQL_ROOT_PASSWORD"
printf "SET GLOBAL super_read_only = ON; STOP REPLICA; CHANGE REPLICATION SOURCE TO SOURCE_HOST = '%s', SOURCE_PORT = 3306, SOURCE_USER = 'replicator', SOURCE_PASSWORD = '%s', SOURCE_AUTO_POSITION = 1, SOURCE_SSL = 1, SOURCE_CONNECT_RETRY = 2; START REPLICA;" '{primary}.{service}' "$DATABASE_REPLICATION_PASSWORD" | mysql --protocol=socket -uroot --connect-timeout=3"#
    );
    exec::run(pods, pod, &["sh", "-c", &script])
        .await
        .map(|_| ())
}

/// Whether [`reseed`] started a copy (and how the one before it failed, if it did), or
/// found one under way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reseed {
    Started { last_failure: Option<String> },
    UnderWay,
}

/// The copy, run detached inside the container: the clone plugin replaces the data with
/// the donor's (`$1`), then the server is stopped so the container starts again on the
/// copy. mysqld without a supervisor cannot restart itself after a clone: it reports
/// error 3707 (or drops the connection as it stops, 2013). A copy that failed leaves the
/// server as it was, and its error in `/tmp/clone.failed` for the next pass to report
/// as it starts another.
const CLONE_SCRIPT: &str = r#"echo $$ > /tmp/clone.pid
export MYSQL_PWD="$MYSQL_ROOT_PASSWORD"
printf "SET GLOBAL super_read_only = OFF; SET GLOBAL clone_valid_donor_list = '%s:3306'; CLONE INSTANCE FROM 'replicator'@'%s':3306 IDENTIFIED BY '%s' REQUIRE SSL;" "$1" "$1" "$DATABASE_REPLICATION_PASSWORD" | mysql --protocol=socket -uroot --connect-timeout=3 2>/tmp/clone.err
copied=$?
if [ "$copied" -eq 0 ] || grep -q 'ERROR 3707' /tmp/clone.err; then
	mysqladmin --protocol=socket -uroot shutdown 2>/dev/null
else
	mv /tmp/clone.err /tmp/clone.failed
fi
rm -f /tmp/clone.pid"#;

/// Starts replacing the instance's data with a copy of `primary`'s, in the background
/// inside its container, and returns at once: copying a large database takes long, and
/// the pass (which watches the primary's health) must not wait for it. Once the copy is
/// in place the server stops and its container starts again on it, read-only; the next
/// pass points it at the primary.
pub async fn reseed(
    pods: &Api<Pod>,
    pod: &str,
    primary: &str,
    service: &str,
) -> Result<Reseed, ExecError> {
    let script = format!(
        r#"if [ -f /tmp/clone.pid ] && kill -0 "$(cat /tmp/clone.pid)" 2>/dev/null; then echo under-way; exit 0; fi
cat >/tmp/clone.sh <<'CLONE'
{CLONE_SCRIPT}
CLONE
setsid sh /tmp/clone.sh '{primary}.{service}' </dev/null >/dev/null 2>&1 &
echo started
if [ -f /tmp/clone.failed ]; then head -c 400 /tmp/clone.failed; rm -f /tmp/clone.failed; fi"#
    );
    let output = exec::run(pods, pod, &["sh", "-c", &script]).await?;
    Ok(reseed_answer(&output))
}

/// What the reseed script printed: `under-way`, or `started` and the last copy's error.
fn reseed_answer(output: &str) -> Reseed {
    let mut lines = output.lines().map(str::trim).filter(|l| !l.is_empty());
    if lines.next() == Some("under-way") {
        return Reseed::UnderWay;
    }
    let error: Vec<&str> = lines.collect();
    Reseed::Started {
        last_failure: (!error.is_empty()).then(|| error.join(" ")),
    }
}

/// Makes commits on the primary wait for a replica (semi-synchronous replication), or
/// not. Replicas always have the replica side on, so either side can be promoted.
pub async fn set_synchronous(pods: &Api<Pod>, pod: &str, on: bool) -> Result<(), ExecError> {
    let sql = format!(
        "SET GLOBAL rpl_semi_sync_source_enabled = {}",
        if on { "ON" } else { "OFF" }
    );
    exec::run(pods, pod, &["sh", "-c", MYSQL, "sh", &sql])
        .await
        .map(|_| ())
}

/// One row of [`STATE`] into a state.
fn parse_state(output: &str) -> Option<EngineState> {
    let line = output.lines().find(|l| !l.trim().is_empty())?;
    let fields: Vec<&str> = line.split('\t').collect();
    let [
        read_only,
        executed,
        purged,
        received,
        host,
        fetching,
        applying,
        semi_sync,
    ] = fields.as_slice()
    else {
        return None;
    };
    let executed = GtidSet::parse(executed)?;
    let received = GtidSet::parse(received)?;
    let primary = *read_only == "0" && host.is_empty();
    let upstream = (!host.is_empty())
        .then(|| host.split('.').next().unwrap_or_default().to_owned())
        .filter(|pod| !pod.is_empty());
    Some(EngineState {
        primary,
        position: executed.union(&received).count(),
        upstream,
        streaming: *fetching == "ON" && *applying == "ON",
        synchronous: *semi_sync == "1",
        log_kept_mb: None,
        oldest_log: None,
        history: Some(History {
            executed,
            purged: GtidSet::parse(purged)?,
        }),
        replica_set: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    #[test]
    fn a_writable_instance_without_a_source_is_the_primary() {
        let state = parse_state(&format!("0\t{A}:1-42\t\t\t\t\t\t0\n")).expect("parsed");
        assert!(state.primary);
        assert_eq!(state.position, 42);
        assert_eq!(state.upstream, None);
        assert!(!state.synchronous);
    }

    #[test]
    fn a_replica_counts_what_it_received_but_has_not_applied() {
        let state = parse_state(&format!(
            "1\t{A}:1-40\t\t{A}:1-45\torders-2.orders\tON\tON\t0"
        ))
        .expect("parsed");
        assert!(!state.primary);
        assert_eq!(state.position, 45);
        assert_eq!(state.upstream.as_deref(), Some("orders-2"));
        assert!(state.streaming);
    }

    #[test]
    fn a_writable_instance_with_a_source_is_not_a_primary() {
        let state =
            parse_state(&format!("0\t{A}:1-3\t\t\torders-0.orders\tOFF\tON\t0")).expect("parsed");
        assert!(!state.primary);
        assert!(!state.streaming, "its receiver is off");
    }

    #[test]
    fn nonsense_is_no_state() {
        assert_eq!(parse_state(""), None);
        assert_eq!(parse_state("ERROR 2002 (HY000): Can't connect"), None);
        assert_eq!(parse_state("0\tnot-a-set\t\t\t\t\t\t0"), None);
    }

    #[test]
    fn a_started_copy_reports_how_the_last_one_failed() {
        assert_eq!(reseed_answer("under-way\n"), Reseed::UnderWay);
        assert_eq!(
            reseed_answer("started\n"),
            Reseed::Started { last_failure: None }
        );
        assert_eq!(
            reseed_answer(
                "started\nERROR 3869 (HY000) at line 1: Clone system configuration: orders-0.orders:3306 is not found in clone_valid_donor_list\n"
            ),
            Reseed::Started {
                last_failure: Some(
                    "ERROR 3869 (HY000) at line 1: Clone system configuration: orders-0.orders:3306 is not found in clone_valid_donor_list".to_owned()
                )
            }
        );
    }
}
