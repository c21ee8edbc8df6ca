//! What the controller asks a postgres instance, through `psql` in its container as the
//! administrator over the local socket: its state, and the few changes replication needs.
//! No password is ever on a command line: replicas read theirs from a file the init
//! container wrote.

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;

use super::plan::EngineState;
use crate::exec::{self, ExecError};

/// `psql` as the image's superuser, with the SQL as its one argument. A server that
/// accepts no connection (hung, or shutting down) fails it within seconds.
const PSQL: &str = r#"export PGCONNECT_TIMEOUT=3; exec psql -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 -tAX -F '|' -c "$1""#;
/// Two statements, each on its own (ALTER SYSTEM may not run in a transaction block).
const PSQL_TWO: &str = r#"export PGCONNECT_TIMEOUT=3; exec psql -U "$POSTGRES_USER" -d postgres -v ON_ERROR_STOP=1 -tAX -c "$1" -c "$2""#;
/// How long asking an instance its state may take: a hung one must not hold up a pass.
const ASK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(8);

/// A replica's position is the WAL it has on disk (received or replayed, whichever is
/// further): what a synchronous commit waited for, and what promotion replays first.
/// A primary also names the oldest WAL segment it still has, by its position part
/// (log and segment number, without the timeline, so that segments of every timeline
/// compare), with the segment size that turns it into a position.
const STATE: &str = "SELECT pg_is_in_recovery(), \
     CASE WHEN pg_is_in_recovery() \
     THEN greatest(coalesce(pg_last_wal_receive_lsn(), '0/0'), coalesce(pg_last_wal_replay_lsn(), '0/0')) \
     ELSE pg_current_wal_lsn() END, \
     current_setting('primary_conninfo'), \
     EXISTS (SELECT 1 FROM pg_stat_wal_receiver WHERE status = 'streaming'), \
     current_setting('synchronous_standby_names') <> '', \
     (SELECT setting FROM pg_settings WHERE name = 'wal_keep_size'), \
     CASE WHEN pg_is_in_recovery() THEN '' ELSE \
     (SELECT coalesce(min(substr(name, 9)), '') FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$') END, \
     (SELECT setting FROM pg_settings WHERE name = 'wal_segment_size')";

/// The instance's state.
pub async fn state(pods: &Api<Pod>, pod: &str) -> Result<EngineState, ExecError> {
    let output = exec::run_within(pods, pod, &["sh", "-c", PSQL, "sh", STATE], ASK_TIMEOUT).await?;
    parse_state(&output).ok_or_else(|| ExecError::Failed {
        pod: pod.to_owned(),
        stderr: format!("unexpected answer {output:?}"),
    })
}

/// Promotes a standby and waits (up to 15 seconds, within the command's bound) until it
/// takes writes; a slower promotion goes on and the next pass sees it done.
pub async fn promote(pods: &Api<Pod>, pod: &str) -> Result<(), ExecError> {
    let output = exec::run(
        pods,
        pod,
        &["sh", "-c", PSQL, "sh", "SELECT pg_promote(true, 15)"],
    )
    .await?;
    if output.trim() == "t" {
        Ok(())
    } else {
        Err(ExecError::Failed {
            pod: pod.to_owned(),
            stderr: "the promotion did not finish within 15 seconds".to_owned(),
        })
    }
}

/// Makes a standby stream from `primary` (reloaded, no restart).
pub async fn repoint(
    pods: &Api<Pod>,
    pod: &str,
    primary: &str,
    service: &str,
) -> Result<(), ExecError> {
    // The passfile sits beside the data directory, where the init container wrote it.
    let script = format!(
        r#"conninfo="host={primary}.{service} port=5432 user=replicator passfile=$(dirname "$PGDATA")/replication.pgpass application_name={pod}"; set -- "ALTER SYSTEM SET primary_conninfo = '$conninfo'" "SELECT pg_reload_conf()"; {PSQL_TWO}"#
    );
    exec::run(pods, pod, &["sh", "-c", &script])
        .await
        .map(|_| ())
}

/// Marks a replica's data for replacement: when its Pod starts again, its init container
/// clones the primary rather than keeping the data (see the replication script, which
/// reads the same file beside the data directory).
pub async fn mark_for_reseed(pods: &Api<Pod>, pod: &str) -> Result<(), ExecError> {
    let script = r#"touch "$(dirname "$PGDATA")/reseed""#;
    exec::run(pods, pod, &["sh", "-c", script])
        .await
        .map(|_| ())
}

/// The most log a primary keeps for replicas that fall behind: a replica that has not
/// fetched a part of the log before the primary recycles it can never catch up.
const MOST_LOG_KEPT_MB: u64 = 512;

/// How many megabytes of log a primary on a volume of `storage_gi` keeps for its
/// replicas: [`MOST_LOG_KEPT_MB`], or a quarter of a smaller volume.
pub fn log_kept_mb(storage_gi: u64) -> u64 {
    MOST_LOG_KEPT_MB.min(storage_gi.saturating_mul(1024) / 4)
}

/// Makes the primary keep `megabytes` of log for replicas (reloaded, no restart).
pub async fn keep_log(pods: &Api<Pod>, pod: &str, megabytes: u64) -> Result<(), ExecError> {
    alter_system(
        pods,
        pod,
        &format!("ALTER SYSTEM SET wal_keep_size = '{megabytes}MB'"),
    )
    .await
}

/// Makes commits on the primary wait for one replica, or not.
pub async fn set_synchronous(pods: &Api<Pod>, pod: &str, on: bool) -> Result<(), ExecError> {
    let setting = if on {
        "ALTER SYSTEM SET synchronous_standby_names = 'ANY 1 (*)'"
    } else {
        "ALTER SYSTEM RESET synchronous_standby_names"
    };
    alter_system(pods, pod, setting).await
}

/// Runs one `ALTER SYSTEM` statement on `pod` and reloads its configuration.
async fn alter_system(pods: &Api<Pod>, pod: &str, statement: &str) -> Result<(), ExecError> {
    let command = [
        "sh",
        "-c",
        PSQL_TWO,
        "sh",
        statement,
        "SELECT pg_reload_conf()",
    ];
    exec::run(pods, pod, &command).await.map(|_| ())
}

/// `t|0/3000148|host=orders-0.orders port=5432 ...|t|f|512` (in recovery, position,
/// the configured upstream, streaming, synchronous, megabytes of log kept) into a state.
fn parse_state(output: &str) -> Option<EngineState> {
    let line = output.lines().find(|l| !l.trim().is_empty())?;
    let mut fields = line.split('|');
    let in_recovery = fields.next()? == "t";
    let position = parse_lsn(fields.next()?)?;
    let conninfo = fields.next()?;
    let streaming = fields.next()? == "t";
    let synchronous = fields.next()? == "t";
    let log_kept_mb = fields.next()?.trim().parse().ok()?;
    let oldest_segment = fields.next()?.trim();
    let segment_bytes = fields.next()?.trim().parse().ok()?;
    let oldest_log = if oldest_segment.is_empty() {
        None
    } else {
        Some(segment_start(oldest_segment, segment_bytes)?)
    };
    Some(EngineState {
        primary: !in_recovery,
        position,
        upstream: in_recovery.then(|| upstream_pod(conninfo)).flatten(),
        streaming,
        synchronous,
        log_kept_mb: Some(log_kept_mb),
        oldest_log,
        history: None,
        replica_set: None,
    })
}

/// A log sequence number `X/Y` (two hexadecimal halves) as one number.
fn parse_lsn(text: &str) -> Option<u64> {
    let (high, low) = text.trim().split_once('/')?;
    Some((u64::from_str_radix(high, 16).ok()? << 32) | u64::from_str_radix(low, 16).ok()?)
}

/// Where the WAL segment whose name ends in `position_part` (16 hexadecimal digits: the
/// log, then the segment's number in it) starts.
fn segment_start(position_part: &str, segment_bytes: u64) -> Option<u64> {
    if position_part.len() != 16 || !position_part.is_char_boundary(8) {
        return None;
    }
    let (log, segment) = position_part.split_at(8);
    let log = u64::from_str_radix(log, 16).ok()?;
    let segment = u64::from_str_radix(segment, 16).ok()?;
    Some((log << 32) + segment.checked_mul(segment_bytes)?)
}

/// The Pod a replica streams from: the first label of `host=<pod>.<service>`.
fn upstream_pod(conninfo: &str) -> Option<String> {
    conninfo
        .split_whitespace()
        .find_map(|pair| pair.strip_prefix("host="))
        .and_then(|host| host.split('.').next())
        .filter(|pod| !pod.is_empty())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_primary_reports_its_write_position_and_no_upstream() {
        let state = parse_state("f|0/3000148||f|f|0|000000000000002|16777216\n");
        assert_eq!(state, None, "a segment name of the wrong length");
        let state = parse_state("f|0/3000148||f|f|0|0000000000000002|16777216\n").expect("parsed");
        assert_eq!(
            state,
            EngineState {
                primary: true,
                position: 0x300_0148,
                upstream: None,
                streaming: false,
                synchronous: false,
                log_kept_mb: Some(0),
                oldest_log: Some(0x200_0000),
                history: None,
                replica_set: None,
            }
        );
    }

    #[test]
    fn a_replica_reports_whom_it_streams_from() {
        let state = parse_state(
            "t|1/A0|host=orders-2.orders port=5432 user=replicator passfile=/x application_name=orders-1|t|f|512||16777216",
        )
        .expect("parsed");
        assert!(!state.primary);
        assert_eq!(state.position, (1 << 32) | 0xA0);
        assert_eq!(state.upstream.as_deref(), Some("orders-2"));
        assert!(state.streaming);
        assert_eq!(state.log_kept_mb, Some(512));
        assert_eq!(
            state.oldest_log, None,
            "only a primary names its oldest log"
        );
    }

    #[test]
    fn a_segment_name_gives_where_the_segment_starts() {
        assert_eq!(
            segment_start("0000000100000003", 16 << 20),
            Some((1 << 32) | 0x300_0000)
        );
        assert_eq!(
            segment_start("00000000000000FF", 16 << 20),
            Some(0xFF_u64 << 24)
        );
        assert_eq!(
            segment_start("0000000000000002", 64 << 20),
            Some(0x800_0000)
        );
        assert_eq!(segment_start("00000000000000", 16 << 20), None);
        assert_eq!(segment_start("000000000000000G", 16 << 20), None);
    }

    #[test]
    fn a_primary_keeps_a_quarter_of_a_small_volume_for_its_replicas() {
        assert_eq!(log_kept_mb(1), 256);
        assert_eq!(log_kept_mb(2), 512);
        assert_eq!(log_kept_mb(100), 512);
    }

    #[test]
    fn nonsense_is_no_state() {
        assert_eq!(parse_state(""), None);
        assert_eq!(parse_state("psql: error"), None);
        assert_eq!(parse_state("f|0/3000148||f|f|512"), None, "an older answer");
        assert_eq!(parse_lsn("zz/1"), None);
    }
}
