//! A Database's side of its backups, planned purely from the Database and its
//! DatabaseBackups: the scheduled backup that is due, the old ones its retention
//! deletes, what the status says about them, and when to look again.

use std::time::Duration;

use database_api::Database;
use database_api::backup::{
    BackupPhase, BackupsStatus, DATABASE_LABEL, DEFAULT_KEEP, DatabaseBackup, DatabaseBackupSpec,
    SCHEDULED_LABEL, Schedule, max_age_hours,
};
use database_api::conditions::reason;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use super::reconcile::size_in_words;
use crate::context::Context;
use crate::error::Error;
use crate::objects::{create_if_absent, delete_if_present};

/// What the Database's backups call for now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// A scheduled backup to create, by name.
    pub create: Option<String>,
    /// Backups the retention lets go.
    pub delete: Vec<String>,
    pub status: Option<BackupsStatus>,
    /// The LastBackupSucceeded condition, once a backup has finished.
    pub last_backup: Option<(bool, &'static str, String)>,
    /// When the next scheduled backup is due.
    pub requeue: Option<Duration>,
}

/// The plan for `db`, whose backups (scheduled and not) are `backups`.
pub fn plan(db: &Database, backups: &[DatabaseBackup], now: Timestamp) -> Plan {
    let mut plan = Plan {
        last_backup: last_backup(backups),
        status: db
            .status
            .as_ref()
            .and_then(|s| s.backups.as_deref().cloned()),
        requeue: unfinished(backups),
        ..Plan::default()
    };
    let Some(spec) = &db.spec.backup else {
        return plan;
    };
    let Ok(schedule) = Schedule::parse(&spec.schedule) else {
        // Validation reports the expression; nothing is scheduled from it.
        return plan;
    };
    let mut status = plan.status.clone().unwrap_or_default();
    let since = status
        .last_scheduled
        .as_ref()
        .map(|t| t.0)
        .or_else(|| db.metadata.creation_timestamp.as_ref().map(|t| t.0))
        .unwrap_or(now);
    if !spec.suspend
        && let Some(due) = schedule.next_after(since)
        && due <= now
    {
        // Only the latest missed time is made up for, as a CronJob does.
        let mut latest = due;
        while let Some(next) = schedule.next_after(latest).filter(|n| *n <= now) {
            latest = next;
        }
        plan.create = Some(scheduled_name(&db.name_any(), latest));
        status.last_scheduled = Some(Time(latest));
    }
    let next = schedule.next_after(now).filter(|_| !spec.suspend);
    status.next_scheduled = next.map(Time);
    let due = next.map(|at| {
        Duration::from_secs(
            u64::try_from(at.as_second() - now.as_second())
                .unwrap_or(0)
                .max(1),
        )
    });
    plan.requeue = [plan.requeue, due].into_iter().flatten().min();
    status.last_succeeded = newest(backups, |b| phase(b) == BackupPhase::Succeeded)
        .map(ResourceExt::name_any)
        .or(status.last_succeeded);
    plan.status = Some(status);
    plan.delete = past_retention(spec, backups, now);
    plan
}

/// How soon to look again while a backup is unfinished: the finished backup wakes the
/// Database too, but through a watch of its own, which may come before the cache the
/// pass reads from has it.
fn unfinished(backups: &[DatabaseBackup]) -> Option<Duration> {
    backups
        .iter()
        .any(|b| matches!(phase(b), BackupPhase::Pending | BackupPhase::Running))
        .then_some(WHILE_A_BACKUP_RUNS)
}

/// How soon a Database with a backup under way looks at it again.
const WHILE_A_BACKUP_RUNS: Duration = Duration::from_secs(10);

/// The name of the backup scheduled for `at`: `<database>-<yyyymmdd>-<hhmm>`.
pub fn scheduled_name(database: &str, at: Timestamp) -> String {
    format!("{database}-{}", at.strftime("%Y%m%d-%H%M"))
}

/// The scheduled backups past the retention, oldest first: beyond the count (the
/// default count when no bound is given), or older than the age. Running ones and the
/// newest that succeeded always stay.
fn past_retention(
    spec: &database_api::backup::BackupSchedule,
    backups: &[DatabaseBackup],
    now: Timestamp,
) -> Vec<String> {
    let mut scheduled: Vec<&DatabaseBackup> = backups
        .iter()
        .filter(|b| b.labels().get(SCHEDULED_LABEL).is_some_and(|v| v == "true"))
        .filter(|b| b.metadata.deletion_timestamp.is_none())
        .collect();
    scheduled.sort_by_key(|b| std::cmp::Reverse(created(b)));
    let count = match (&spec.retention.count, &spec.retention.max_age) {
        (Some(count), _) => Some(usize::try_from(*count).unwrap_or(usize::MAX)),
        (None, None) => Some(usize::try_from(DEFAULT_KEEP).unwrap_or(7)),
        (None, Some(_)) => None,
    };
    let max_age = spec
        .retention
        .max_age
        .as_deref()
        .and_then(max_age_hours)
        .map(|hours| Duration::from_secs(hours.saturating_mul(3600)));
    let keep_always = scheduled
        .iter()
        .find(|b| phase(b) == BackupPhase::Succeeded)
        .map(|b| b.name_any());
    let mut delete: Vec<String> = scheduled
        .iter()
        .enumerate()
        .filter(|(index, backup)| {
            let finished = matches!(phase(backup), BackupPhase::Succeeded | BackupPhase::Failed);
            let beyond_count = count.is_some_and(|count| *index >= count);
            let too_old = max_age.is_some_and(|age| {
                created(backup).is_some_and(|at| now.duration_since(at).unsigned_abs() > age)
            });
            finished && (beyond_count || too_old) && Some(backup.name_any()) != keep_always
        })
        .map(|(_, backup)| backup.name_any())
        .collect();
    delete.reverse();
    delete
}

/// LastBackupSucceeded from the newest backup that finished.
fn last_backup(backups: &[DatabaseBackup]) -> Option<(bool, &'static str, String)> {
    let last = newest(backups, |b| {
        matches!(phase(b), BackupPhase::Succeeded | BackupPhase::Failed)
    })?;
    let status = last.status.clone().unwrap_or_default();
    Some(if status.phase == BackupPhase::Succeeded {
        (
            true,
            reason::BACKUP_SUCCEEDED,
            format!(
                "backup {} holds {} at {}",
                last.name_any(),
                size_in_words(
                    status
                        .size_bytes
                        .and_then(|b| u64::try_from(b).ok())
                        .unwrap_or(0)
                ),
                status.location.as_deref().unwrap_or("its destination")
            ),
        )
    } else {
        (
            false,
            reason::BACKUP_FAILED,
            format!(
                "backup {} failed: {}",
                last.name_any(),
                status.error.as_deref().unwrap_or("no reason was recorded")
            ),
        )
    })
}

fn newest(
    backups: &[DatabaseBackup],
    wanted: impl Fn(&DatabaseBackup) -> bool,
) -> Option<&DatabaseBackup> {
    backups
        .iter()
        .filter(|b| wanted(b))
        .max_by_key(|b| (created(b), b.name_any()))
}

fn phase(backup: &DatabaseBackup) -> BackupPhase {
    backup.status.as_ref().map(|s| s.phase).unwrap_or_default()
}

fn created(backup: &DatabaseBackup) -> Option<Timestamp> {
    backup.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

/// Carries out the plan for `db`: lists its backups, creates the one due, deletes
/// those past the retention. Returns the plan, for the status.
pub async fn run(ctx: &Context, db: &Database, namespace: &str) -> Result<Plan, Error> {
    let api: Api<DatabaseBackup> = Api::namespaced(ctx.client.clone(), namespace);
    let backups = if let Some(cached) = ctx.backups_of(namespace, &db.name_any()) {
        cached
    } else {
        let selector = format!("{DATABASE_LABEL}={}", db.name_any());
        let mut listed = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|source| Error::Observe {
                kind: "DatabaseBackup".into(),
                name: selector.clone(),
                source,
            })?
            .items;
        listed.retain(|b| b.spec.database == db.name_any());
        listed
    };
    let plan = plan(db, &backups, Timestamp::now());
    if let Some(name) = &plan.create {
        let backup = DatabaseBackup {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.to_owned()),
                labels: Some(
                    [
                        (DATABASE_LABEL.to_owned(), db.name_any()),
                        (SCHEDULED_LABEL.to_owned(), "true".to_owned()),
                    ]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            spec: DatabaseBackupSpec {
                database: db.name_any(),
                destination: None,
            },
            status: None,
        };
        if create_if_absent(&api, &backup).await? {
            ctx.metrics.wrote("create");
        }
    }
    for name in &plan.delete {
        if delete_if_present(&api, name).await? {
            ctx.metrics.wrote("delete");
        }
    }
    Ok(plan)
}

#[cfg(test)]
mod tests;
