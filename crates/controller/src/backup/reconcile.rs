//! The DatabaseBackup reconcile: check what the backup needs, start its Job, and write
//! what became of it; on deletion, delete its dump first.

use std::sync::Arc;
use std::time::Duration;

use database_api::backup::{
    BackupDestination, BackupPhase, DATABASE_LABEL, DatabaseBackup, DatabaseBackupStatus,
};
use database_api::conditions::reason;
use database_api::constants::FIELD_MANAGER;
use database_api::validation::{Outcome, check_destination};
use database_api::{Database, Phase};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PropagationPolicy};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::job::{self, JobInputs};
use super::outcome::{self, JobOutcome};
use super::{FINALIZER, job_name, key};
use crate::context::Context;
use crate::error::Error;
use crate::objects::{create_if_absent, delete_with};
use operator_runtime::Action;
use operator_runtime::events::{EventType, Notice};

/// How often a running backup is looked at (its Job's changes also bring it back).
const WHILE_RUNNING: Duration = Duration::from_secs(5);
/// How long a backup waits for its Database to be ready before it looks again.
const WHILE_NOT_READY: Duration = Duration::from_secs(15);
/// How soon a dump that could not be deleted is tried again.
const DELETE_RETRY: Duration = Duration::from_secs(60);

/// One pass over a DatabaseBackup.
pub async fn reconcile(backup: Arc<DatabaseBackup>, ctx: Arc<Context>) -> Result<Action, Error> {
    Box::pin(reconcile_inner(&backup, &ctx)).await
}

async fn reconcile_inner(backup: &DatabaseBackup, ctx: &Context) -> Result<Action, Error> {
    let namespace = backup.namespace().ok_or(Error::MissingNamespace)?;
    let backups: Api<DatabaseBackup> = Api::namespaced(ctx.client.clone(), &namespace);
    if backup.meta().deletion_timestamp.is_some() {
        return finish_deletion(ctx, &backups, backup, &namespace).await;
    }
    if !backup.finalizers().iter().any(|f| f == FINALIZER) {
        set_finalizer(&backups, backup, true).await?;
    }
    let phase = backup.status.as_ref().map(|s| s.phase).unwrap_or_default();
    if matches!(phase, BackupPhase::Succeeded | BackupPhase::Failed) {
        return Ok(Action::await_change());
    }
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace);
    let name = job_name(&backup.name_any(), "-backup");
    match jobs.get_opt(&name).await.map_err(observe("Job", &name))? {
        Some(job) => follow(ctx, &backups, backup, &job, &namespace).await,
        None => start(ctx, &backups, backup, &namespace, name).await,
    }
}

/// How long a backup waits for a Database that does not exist yet before it fails.
const WAIT_FOR_DATABASE: Duration = Duration::from_secs(120);

/// How long ago `backup` was created.
fn waited_for(backup: &DatabaseBackup) -> Duration {
    backup
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|created| k8s_openapi::jiff::Timestamp::now().duration_since(created.0))
        .and_then(|elapsed| Duration::try_from(elapsed).ok())
        .unwrap_or_default()
}

/// Retries a failed pass after the work queue's backoff, as a Database's.
#[allow(clippy::needless_pass_by_value)] // the signature the dispatcher expects
pub fn error_policy(backup: Arc<DatabaseBackup>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(name = %backup.name_any(), error = %error, "backup reconcile failed");
    Action::retry()
}

/// Starts the backup's Job once its Database is ready and everything it names exists.
async fn start(
    ctx: &Context,
    backups: &Api<DatabaseBackup>,
    backup: &DatabaseBackup,
    namespace: &str,
    job_name: String,
) -> Result<Action, Error> {
    let databases: Api<Database> = Api::namespaced(ctx.client.clone(), namespace);
    let database = &backup.spec.database;
    let Some(db) = databases
        .get_opt(database)
        .await
        .map_err(observe("Database", database))?
    else {
        return database_missing(ctx, backups, backup, namespace).await;
    };
    let destination = match destination_of(backup, &db) {
        Ok(destination) => destination,
        Err(why) => return fail(ctx, backups, backup, Some(&db), why).await,
    };
    if let Some(missing) = missing_reference(ctx, namespace, &destination).await? {
        return fail(ctx, backups, backup, Some(&db), missing).await;
    }
    let Some(agent_image) = ctx.settings.backup_agent_image.as_deref() else {
        return fail(ctx, backups, backup, Some(&db), "the controller does not know the backup agent's image: run it in its Pod, or give it --backup-agent-image".to_owned()).await;
    };
    // A Database taking its backup before a major upgrade is dumped with the version
    // that runs, not the one asked for.
    let upgrading = crate::upgrade::backing_up(&db);
    let db = crate::upgrade::as_served(&db);
    if db.status.as_ref().map(|s| s.phase) != Some(Phase::Running) && !upgrading {
        let waiting = format!("waiting for the Database {database} to be Running");
        return wait_pending(backups, backup, waiting).await;
    }
    let key = key(
        &destination,
        namespace,
        database,
        &backup.name_any(),
        db.spec.engine,
    );
    let job = job::backup(
        &db,
        &JobInputs {
            name: job_name.clone(),
            owner: backup.controller_owner_ref(&()),
            namespace,
            database,
            destination: &destination,
            key: &key,
            agent_image,
            build: &ctx.settings.build,
        },
    );
    create_job(ctx, namespace, &job).await?;
    let status = running_status(backup, &db, destination, key);
    write_status(backups, backup, &status).await?;
    Ok(Action::requeue(WHILE_RUNNING))
}

/// Waits a while for a Database that does not exist yet, then fails the backup.
async fn database_missing(
    ctx: &Context,
    backups: &Api<DatabaseBackup>,
    backup: &DatabaseBackup,
    namespace: &str,
) -> Result<Action, Error> {
    let database = &backup.spec.database;
    let missing = format!("the Database {database} does not exist in namespace {namespace}");
    // Created together (one `kubectl apply` of both), the backup may come first.
    if waited_for(backup) < WAIT_FOR_DATABASE {
        return wait_pending(backups, backup, format!("waiting: {missing}")).await;
    }
    fail(ctx, backups, backup, None, missing).await
}

/// Keeps the backup Pending with `why` as its error, and looks again a little later.
async fn wait_pending(
    backups: &Api<DatabaseBackup>,
    backup: &DatabaseBackup,
    why: String,
) -> Result<Action, Error> {
    write_status(
        backups,
        backup,
        &DatabaseBackupStatus {
            phase: BackupPhase::Pending,
            error: Some(why),
            ..status_of(backup)
        },
    )
    .await?;
    Ok(Action::requeue(WHILE_NOT_READY))
}

/// Creates `job` unless it already exists, counting the write.
async fn create_job(ctx: &Context, namespace: &str, job: &Job) -> Result<(), Error> {
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), namespace);
    if create_if_absent(&jobs, job).await? {
        ctx.metrics.wrote("create");
    }
    Ok(())
}

/// The status of a backup whose Job has just started: where it goes and what it dumps.
fn running_status(
    backup: &DatabaseBackup,
    db: &Database,
    destination: BackupDestination,
    key: String,
) -> DatabaseBackupStatus {
    DatabaseBackupStatus {
        phase: BackupPhase::Running,
        started_at: Some(now()),
        destination: Some(destination),
        key: Some(key),
        engine: Some(db.spec.engine),
        version: Some(db.spec.version.clone()),
        error: None,
        observed_generation: backup.meta().generation,
        ..DatabaseBackupStatus::default()
    }
}

/// Reads the Job's outcome into the status.
async fn follow(
    ctx: &Context,
    backups: &Api<DatabaseBackup>,
    backup: &DatabaseBackup,
    job: &Job,
    namespace: &str,
) -> Result<Action, Error> {
    let pods = job_pods(ctx, namespace, &job.name_any()).await?;
    let databases: Api<Database> = Api::namespaced(ctx.client.clone(), namespace);
    let db = databases
        .get_opt(&backup.spec.database)
        .await
        .map_err(observe("Database", &backup.spec.database))?;
    match outcome::of(job, &pods) {
        JobOutcome::Running => Ok(Action::requeue(WHILE_RUNNING)),
        JobOutcome::Succeeded(report) => {
            let status = DatabaseBackupStatus {
                phase: BackupPhase::Succeeded,
                finished_at: Some(now()),
                size_bytes: report.stored_bytes.and_then(|b| i64::try_from(b).ok()),
                dump_bytes: report.source_bytes.and_then(|b| i64::try_from(b).ok()),
                location: report.location.clone(),
                error: None,
                ..status_of(backup)
            };
            write_status(backups, backup, &status).await?;
            // The backup's status is its record; a failed Job stays for its logs.
            delete_job(ctx, namespace, &job.name_any()).await?;
            let note = format!(
                "backup {} is complete: {} at {}",
                backup.name_any(),
                size_in_words(report.stored_bytes.unwrap_or(0)),
                report.location.as_deref().unwrap_or("its destination")
            );
            tell(
                ctx,
                backup,
                db.as_ref(),
                EventType::Normal,
                reason::BACKUP_SUCCEEDED,
                note,
            )
            .await;
            Ok(Action::await_change())
        }
        JobOutcome::Failed(why) => fail(ctx, backups, backup, db.as_ref(), why).await,
        JobOutcome::Stuck(why) => {
            delete_job(ctx, namespace, &job.name_any()).await?;
            fail(
                ctx,
                backups,
                backup,
                db.as_ref(),
                format!("its Pod cannot start: {why}"),
            )
            .await
        }
    }
}

/// Marks the backup failed, says so on it and its Database, and counts it.
async fn fail(
    ctx: &Context,
    backups: &Api<DatabaseBackup>,
    backup: &DatabaseBackup,
    db: Option<&Database>,
    why: String,
) -> Result<Action, Error> {
    write_status(
        backups,
        backup,
        &DatabaseBackupStatus {
            phase: BackupPhase::Failed,
            finished_at: Some(now()),
            error: Some(why.clone()),
            ..status_of(backup)
        },
    )
    .await?;
    ctx.metrics.backup_failed(
        &backup.namespace().unwrap_or_default(),
        &backup.spec.database,
    );
    let note = format!("backup {} failed: {why}", backup.name_any());
    tell(
        ctx,
        backup,
        db,
        EventType::Warning,
        reason::BACKUP_FAILED,
        note,
    )
    .await;
    Ok(Action::await_change())
}

/// Deletes the dump of a backup being deleted (a Job of the agent alone), then lets the
/// backup go. A backup that never stored a dump goes at once.
async fn finish_deletion(
    ctx: &Context,
    backups: &Api<DatabaseBackup>,
    backup: &DatabaseBackup,
    namespace: &str,
) -> Result<Action, Error> {
    if !backup.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let status = backup.status.clone().unwrap_or_default();
    let stored = status.phase == BackupPhase::Succeeded;
    if let (true, Some(destination), Some(key)) = (stored, &status.destination, &status.key) {
        let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), namespace);
        let name = job_name(&backup.name_any(), "-delete");
        let Some(job) = jobs.get_opt(&name).await.map_err(observe("Job", &name))? else {
            let Some(agent_image) = ctx.settings.backup_agent_image.as_deref() else {
                tell(ctx, backup, None, EventType::Warning, reason::DUMP_NOT_DELETED, "the controller does not know the backup agent's image, so the dump stays; remove the finalizer to let the backup go without deleting it".to_owned()).await;
                return Ok(Action::requeue(DELETE_RETRY));
            };
            let job = job::delete(&JobInputs {
                name: name.clone(),
                owner: backup.controller_owner_ref(&()),
                namespace,
                database: &backup.spec.database,
                destination,
                key,
                agent_image,
                build: &ctx.settings.build,
            });
            if create_if_absent(&jobs, &job).await? {
                ctx.metrics.wrote("create");
            }
            return Ok(Action::requeue(WHILE_RUNNING));
        };
        let pods = job_pods(ctx, namespace, &name).await?;
        match outcome::of(&job, &pods) {
            JobOutcome::Succeeded(_) => {}
            JobOutcome::Running => return Ok(Action::requeue(WHILE_RUNNING)),
            JobOutcome::Failed(why) | JobOutcome::Stuck(why) => {
                delete_job(ctx, namespace, &name).await?;
                let note = format!(
                    "the dump of backup {} could not be deleted, so the backup stays; trying again in a minute: {why}",
                    backup.name_any()
                );
                tell(
                    ctx,
                    backup,
                    None,
                    EventType::Warning,
                    reason::DUMP_NOT_DELETED,
                    note,
                )
                .await;
                return Ok(Action::requeue(DELETE_RETRY));
            }
        }
    }
    set_finalizer(backups, backup, false).await?;
    Ok(Action::await_change())
}

/// The destination a backup writes to: its own, else its Database's schedule's.
fn destination_of(backup: &DatabaseBackup, db: &Database) -> Result<BackupDestination, String> {
    let (path, destination) = match (&backup.spec.destination, &db.spec.backup) {
        (Some(own), _) => ("spec.destination", own.clone()),
        (None, Some(schedule)) => (
            "spec.backup.destination of the Database",
            schedule.destination.clone(),
        ),
        (None, None) => {
            return Err(format!(
                "no destination: give spec.destination, or set spec.backup on the Database {}",
                db.name_any()
            ));
        }
    };
    let mut outcome = Outcome::default();
    check_destination(path, &destination, &mut outcome);
    if outcome.is_allowed() {
        Ok(destination)
    } else {
        Err(outcome.message())
    }
}

/// The first Secret or claim the destination names that does not exist, as a sentence.
async fn missing_reference(
    ctx: &Context,
    namespace: &str,
    destination: &BackupDestination,
) -> Result<Option<String>, Error> {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    if let Some(s3) = &destination.s3 {
        let mut wanted = vec![("credentialsSecret", s3.credentials_secret.as_str())];
        if let Some(ca) = &s3.ca {
            wanted.push(("ca", ca.name.as_str()));
        }
        for (field, name) in wanted {
            if secrets
                .get_metadata_opt(name)
                .await
                .map_err(observe("Secret", name))?
                .is_none()
            {
                return Ok(Some(format!(
                    "the Secret {name} that the destination's {field} names does not exist in namespace {namespace}"
                )));
            }
        }
    }
    if let Some(volume) = &destination.volume {
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), namespace);
        let name = volume.claim_name.as_str();
        if claims
            .get_metadata_opt(name)
            .await
            .map_err(observe("PersistentVolumeClaim", name))?
            .is_none()
        {
            return Ok(Some(format!(
                "the PersistentVolumeClaim {name} that the destination's volume names does not exist in namespace {namespace}"
            )));
        }
    }
    Ok(None)
}

/// The Pods of a Job.
pub async fn job_pods(ctx: &Context, namespace: &str, job: &str) -> Result<Vec<Pod>, Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let selector = format!("batch.kubernetes.io/job-name={job}");
    Ok(pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(observe("Pod", &selector))?
        .items)
}

/// Deletes a Job and its Pods.
pub async fn delete_job(ctx: &Context, namespace: &str, name: &str) -> Result<(), Error> {
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), namespace);
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    if delete_with(&jobs, name, &params).await? {
        ctx.metrics.wrote("delete");
    }
    Ok(())
}

async fn set_finalizer(
    api: &Api<DatabaseBackup>,
    backup: &DatabaseBackup,
    on: bool,
) -> Result<(), Error> {
    let mut metadata = json!({"name": backup.name_any()});
    if on {
        metadata["finalizers"] = json!([FINALIZER]);
        metadata["labels"] = json!({DATABASE_LABEL: backup.spec.database});
    }
    let body =
        json!({"apiVersion": "mycompany.io/v1", "kind": "DatabaseBackup", "metadata": metadata});
    match api
        .patch(
            &backup.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() && !on => Ok(()),
        Err(err) if on => Err(Error::AddFinalizer(err)),
        Err(err) => Err(Error::RemoveFinalizer(err)),
    }
}

async fn write_status(
    api: &Api<DatabaseBackup>,
    backup: &DatabaseBackup,
    status: &DatabaseBackupStatus,
) -> Result<(), Error> {
    if backup.status.as_ref() == Some(status) {
        return Ok(());
    }
    let patch = json!({"status": status});
    api.patch_status(
        &backup.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .map_err(Error::PatchStatus)?;
    Ok(())
}

fn status_of(backup: &DatabaseBackup) -> DatabaseBackupStatus {
    backup.status.clone().unwrap_or_default()
}

/// Says what happened on the backup, and on its Database when it exists.
async fn tell(
    ctx: &Context,
    backup: &DatabaseBackup,
    db: Option<&Database>,
    type_: EventType,
    reason: &str,
    note: String,
) {
    let notice = Notice {
        type_,
        reason: reason.to_owned(),
        note,
    };
    let mut regarding = vec![backup.object_ref(&())];
    regarding.extend(db.map(|db| db.object_ref(&())));
    for object in regarding {
        ctx.tell(&object, &notice).await;
    }
}

/// A byte count for people: `12.3 MiB`.
pub fn size_in_words(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} bytes");
    }
    let mut unit = 0;
    let mut scale = 1024_u64;
    while unit + 1 < UNITS.len() && bytes >= scale * 1024 {
        scale *= 1024;
        unit += 1;
    }
    let tenths = u128::from(bytes) * 10 / u128::from(scale);
    format!("{}.{} {}", tenths / 10, tenths % 10, UNITS[unit])
}

fn observe(kind: &'static str, name: &str) -> impl FnOnce(kube::Error) -> Error {
    let name = name.to_owned();
    move |source| Error::Observe {
        kind: kind.into(),
        name,
        source,
    }
}

fn now() -> Time {
    let now = k8s_openapi::jiff::Timestamp::now();
    Time(k8s_openapi::jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backup_waits_a_while_for_its_database_then_fails() {
        let mut backup: DatabaseBackup = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "b", "namespace": "shop"},
            "spec": {"database": "orders"},
        }))
        .expect("a DatabaseBackup");
        let at = |seconds_ago: i64| {
            let now = k8s_openapi::jiff::Timestamp::now().as_second();
            Time(k8s_openapi::jiff::Timestamp::from_second(now - seconds_ago).expect("a time"))
        };
        backup.metadata.creation_timestamp = Some(at(10));
        assert!(waited_for(&backup) < WAIT_FOR_DATABASE);
        backup.metadata.creation_timestamp = Some(at(3600));
        assert!(waited_for(&backup) >= WAIT_FOR_DATABASE);
    }

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(size_in_words(512), "512 bytes");
        assert_eq!(size_in_words(1536), "1.5 KiB");
        assert_eq!(size_in_words(40 << 20), "40.0 MiB");
    }
}
