//! Filling a new Database from a dump (`spec.restoreFrom`): once its primary is ready,
//! a restore Job streams the dump into it; the Database goes Running only after the Job
//! succeeded. A failed restore is final: the Database says why and stays Failed, since
//! what a half-finished restore left behind is not the dump (postgres restores in one
//! transaction, so it at least leaves nothing).

use database_api::Database;
use database_api::backup::{BackupDestination, BackupPhase, DatabaseBackup, RestoreSource};
use database_api::conditions::{self, RESTORED, reason};
use k8s_openapi::api::batch::v1::Job;
use kube::api::Api;
use kube::{Resource, ResourceExt};

use super::job::{self, JobInputs};
use super::job_name;
use super::outcome::{self, JobOutcome};
use super::reconcile::{delete_job, job_pods};
use crate::context::Context;
use crate::engine::major;
use crate::error::Error;
use crate::objects::create_if_absent;

/// Where a Database's restore is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restore {
    /// Not started: the sentence says what it waits for.
    Waiting(String),
    Running(String),
    Done(String),
    Failed(String),
}

impl Restore {
    /// The Restored condition: status, reason, message.
    pub fn condition(&self) -> (bool, &'static str, String) {
        match self {
            Self::Waiting(m) => (false, reason::WAITING, m.clone()),
            Self::Running(m) => (false, reason::RESTORING, m.clone()),
            Self::Done(m) => (true, reason::RESTORED, m.clone()),
            Self::Failed(m) => (false, reason::RESTORE_FAILED, m.clone()),
        }
    }
}

/// The restore's next step for `db`, `None` when it restores nothing. `primary_ready`
/// says whether its primary takes writes yet.
pub async fn run(
    ctx: &Context,
    db: &Database,
    namespace: &str,
    primary_ready: bool,
) -> Result<Option<Restore>, Error> {
    let Some(source) = &db.spec.restore_from else {
        return Ok(None);
    };
    if let Some(settled) = settled(db) {
        return Ok(Some(settled));
    }
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), namespace);
    let name = job_name(&db.name_any(), "-restore");
    if let Some(job) = jobs.get_opt(&name).await.map_err(|source| Error::Observe {
        kind: "Job".into(),
        name: name.clone(),
        source,
    })? {
        return follow(ctx, namespace, &name, &job, source).await.map(Some);
    }
    start(ctx, db, namespace, name, source, primary_ready)
        .await
        .map(Some)
}

/// The restore's recorded end, if it has one: a restore that finished or failed is
/// final either way, so a later pass never restores again.
fn settled(db: &Database) -> Option<Restore> {
    let previous = db
        .status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, RESTORED));
    let done =
        previous.filter(|c| c.status == conditions::TRUE || c.reason == reason::RESTORE_FAILED)?;
    Some(if done.status == conditions::TRUE {
        Restore::Done(done.message.clone())
    } else {
        Restore::Failed(done.message.clone())
    })
}

/// Where the restore Job `name` stands; a Pod that cannot start takes its Job with it.
async fn follow(
    ctx: &Context,
    namespace: &str,
    name: &str,
    job: &Job,
    source: &RestoreSource,
) -> Result<Restore, Error> {
    let pods = job_pods(ctx, namespace, name).await?;
    Ok(match outcome::of(job, &pods) {
        JobOutcome::Running => Restore::Running(format!("restoring {}", describe(source))),
        JobOutcome::Succeeded(report) => Restore::Done(format!(
            "restored {} ({} bytes of dump)",
            describe(source),
            report.source_bytes.unwrap_or(0)
        )),
        JobOutcome::Failed(why) => {
            Restore::Failed(format!("restoring {} failed: {why}", describe(source)))
        }
        JobOutcome::Stuck(why) => {
            delete_job(ctx, namespace, name).await?;
            Restore::Failed(format!(
                "restoring {} failed: its Pod cannot start: {why}",
                describe(source)
            ))
        }
    })
}

/// Starts the restore Job `name` once the dump is found and the primary takes writes.
async fn start(
    ctx: &Context,
    db: &Database,
    namespace: &str,
    name: String,
    source: &RestoreSource,
    primary_ready: bool,
) -> Result<Restore, Error> {
    let (destination, key) = match resolve(ctx, db, namespace, source).await? {
        Ok(found) => found,
        Err(restore) => return Ok(restore),
    };
    let Some(agent_image) = ctx.settings.backup_agent_image.as_deref() else {
        return Ok(Restore::Failed(
            "the controller does not know the backup agent's image: run it in its Pod, or give it --backup-agent-image".into(),
        ));
    };
    if !primary_ready {
        return Ok(Restore::Waiting(format!(
            "waiting for the primary to take writes before restoring {}",
            describe(source)
        )));
    }
    let job = job::restore(
        db,
        &JobInputs {
            name,
            owner: db.controller_owner_ref(&()),
            namespace,
            database: &db.name_any(),
            destination: &destination,
            key: &key,
            agent_image,
            build: &ctx.settings.build,
        },
    );
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), namespace);
    if create_if_absent(&jobs, &job).await? {
        ctx.metrics.wrote("create");
    }
    Ok(Restore::Running(format!("restoring {}", describe(source))))
}

/// Where the dump is: the backup's recorded destination and key, or the location
/// given. A backup not finished yet is waited for; one that cannot be restored into
/// this Database is a failure.
async fn resolve(
    ctx: &Context,
    db: &Database,
    namespace: &str,
    source: &RestoreSource,
) -> Result<Result<(BackupDestination, String), Restore>, Error> {
    if let Some(location) = &source.location {
        return Ok(Ok((location.destination.clone(), location.key.clone())));
    }
    let Some(name) = &source.backup else {
        return Ok(Err(Restore::Failed(
            "spec.restoreFrom names no source".into(),
        )));
    };
    let backups: Api<DatabaseBackup> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(backup) = backups
        .get_opt(name)
        .await
        .map_err(|source| Error::Observe {
            kind: "DatabaseBackup".into(),
            name: name.clone(),
            source,
        })?
    else {
        return Ok(Err(Restore::Waiting(format!(
            "waiting for the DatabaseBackup {name}, which does not exist in namespace {namespace}"
        ))));
    };
    let status = backup.status.clone().unwrap_or_default();
    Ok(match (status.phase, status.destination, status.key) {
        (BackupPhase::Succeeded, Some(destination), Some(key)) => {
            match fits(db, status.engine, status.version.as_deref()) {
                Some(refusal) => Err(Restore::Failed(format!("backup {name} {refusal}"))),
                None => Ok((destination, key)),
            }
        }
        (BackupPhase::Failed, ..) => Err(Restore::Failed(format!(
            "backup {name} failed, so it holds no dump to restore"
        ))),
        _ => Err(Restore::Waiting(format!(
            "waiting for backup {name} to finish"
        ))),
    })
}

/// Why a dump of `engine` at `version` cannot go into `db`, if it cannot: another
/// engine, or a newer major version than the Database runs (a logical dump moves
/// forward, not back).
fn fits(
    db: &Database,
    engine: Option<database_api::Engine>,
    version: Option<&str>,
) -> Option<String> {
    if let Some(engine) = engine
        && engine != db.spec.engine
    {
        return Some(format!(
            "is a {engine} dump and this Database runs {}",
            db.spec.engine
        ));
    }
    let (Some(from), Some(to)) = (version.and_then(major), major(&db.spec.version)) else {
        return None;
    };
    (from > to).then(|| {
        format!(
            "was taken from version {} and this Database runs the older {}: restore into {from} or newer",
            version.unwrap_or_default(),
            db.spec.version
        )
    })
}

fn describe(source: &RestoreSource) -> String {
    match (&source.backup, &source.location) {
        (Some(backup), _) => format!("backup {backup}"),
        (None, Some(location)) => format!("the dump {}", location.key),
        (None, None) => "nothing".into(),
    }
}

#[cfg(test)]
mod tests {
    use database_api::Engine;

    use super::*;
    use crate::resources::fixtures::database;

    #[test]
    fn a_dump_moves_to_the_same_engine_at_the_same_or_a_newer_major() {
        let db = database(Engine::Postgres, "17", 1);
        assert_eq!(fits(&db, Some(Engine::Postgres), Some("16.4")), None);
        assert_eq!(fits(&db, Some(Engine::Postgres), Some("17")), None);
        let newer = fits(&db, Some(Engine::Postgres), Some("18")).expect("refused");
        assert!(newer.contains("older 17"), "{newer}");
        let other = fits(&db, Some(Engine::Mysql), Some("8.4")).expect("refused");
        assert!(other.contains("mysql dump"), "{other}");
    }

    #[test]
    fn the_condition_reads_as_the_restore_stands() {
        assert!(Restore::Done("restored backup b".into()).condition().0);
        assert_eq!(Restore::Failed("x".into()).condition().1, "RestoreFailed");
    }
}
