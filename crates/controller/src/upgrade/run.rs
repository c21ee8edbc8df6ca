//! Carries an upgrade's plan out, one step per pass: hold writes and take the backup,
//! switch to the new directory, restore into the new version and release writes, or go
//! back to the old version when a step fails.

use std::time::Duration;

use database_api::Database;
use database_api::backup::{BackupPhase, DATABASE_LABEL, DatabaseBackup, DatabaseBackupSpec};
use database_api::conditions::reason;
use database_api::upgrade::{
    DATA_DIRECTORY_ANNOTATION, UPGRADE_LABEL, UpgradePhase, UpgradeStatus,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};

use super::{Plan, hold};
use crate::backup::job::{self, JobInputs};
use crate::backup::job_name;
use crate::backup::outcome::{self, JobOutcome};
use crate::backup::reconcile::job_pods;
use crate::context::Context;
use crate::error::Error;
use crate::keys::CONTAINER;
use crate::layout::mark;
use crate::objects::{create_if_absent, delete_if_present, get_opt};
use operator_runtime::events::EventType;

/// How soon to look again while an upgrade is under way.
const WHILE_UPGRADING: Duration = Duration::from_secs(5);

/// Waiting reasons that say the new version's server will not start.
const WILL_NOT_START: [&str; 5] = [
    "ImagePullBackOff",
    "ErrImagePull",
    "CrashLoopBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
];

/// What a pass did to the upgrade.
#[derive(Debug, Default)]
pub struct Step {
    /// The upgrade to record in the status.
    pub status: Option<UpgradeStatus>,
    pub events: Vec<(EventType, &'static str, String)>,
    pub requeue: Option<Duration>,
}

/// Where a pass runs: the Database, its namespace and the instance that takes writes.
pub struct Scope<'a> {
    pub ctx: &'a Context,
    pub db: &'a Database,
    pub namespace: &'a str,
    pub primary: &'a str,
    pub now: &'a Time,
}

/// Takes the plan's next step.
pub async fn run(scope: &Scope<'_>, plan: Plan) -> Result<Step, Error> {
    let mut upgrade = match plan {
        Plan::Settled => return Ok(Step::default()),
        Plan::Start(mut status) => {
            status.started_at = Some(scope.now.clone());
            status
        }
        Plan::Recorded(status) => status,
    };
    let mut events = Vec::new();
    let pod = primary_pod(scope).await?;
    match upgrade.phase {
        UpgradePhase::BackingUp => back_up(scope, &mut upgrade, pod.as_ref(), &mut events).await?,
        UpgradePhase::Restoring => restore(scope, &mut upgrade, pod.as_ref(), &mut events).await?,
        UpgradePhase::Switching => switch(scope, &mut upgrade, pod.as_ref(), &mut events).await?,
        UpgradePhase::RolledBack => {
            if upgrade.writes_held && serves(pod.as_ref(), &upgrade.from_version) {
                hold::release(&exec_pods(scope), scope.primary).await?;
                upgrade.writes_held = false;
            }
            replace_stuck(scope, pod.as_ref(), &upgrade.from_version).await?;
        }
        UpgradePhase::Succeeded => {}
    }
    let requeue = matches!(
        upgrade.phase,
        UpgradePhase::BackingUp | UpgradePhase::Restoring | UpgradePhase::Switching
    ) || upgrade.writes_held;
    Ok(Step {
        status: Some(upgrade),
        events,
        requeue: requeue.then_some(WHILE_UPGRADING),
    })
}

/// Holds writes on the old version, takes the backup, and switches once it is taken.
async fn back_up(
    scope: &Scope<'_>,
    upgrade: &mut UpgradeStatus,
    pod: Option<&Pod>,
    events: &mut Vec<(EventType, &'static str, String)>,
) -> Result<(), Error> {
    // Files converted in place carry every write over: nothing is held for them.
    if !upgrade.writes_held && !upgrade.in_place {
        if !serves(pod, &upgrade.from_version) {
            upgrade.message = Some("waiting for the primary to take writes".into());
            return Ok(());
        }
        hold::hold(&exec_pods(scope), scope.primary).await?;
        upgrade.writes_held = true;
        events.push((
            EventType::Normal,
            reason::UPGRADE_STARTED,
            format!(
                "upgrading from {} to {}: writes are held while backup {} is taken",
                upgrade.from_version, upgrade.to_version, upgrade.backup
            ),
        ));
    }
    let backups: Api<DatabaseBackup> = Api::namespaced(scope.ctx.client.clone(), scope.namespace);
    let Some(backup) = get_opt(&backups, &upgrade.backup).await? else {
        // The backup dumps the version the recorded upgrade says runs: it waits until
        // the status records it.
        if super::backing_up(scope.db) {
            create_backup(scope, &backups, &upgrade.backup).await?;
        }
        upgrade.message = Some(format!("taking backup {}", upgrade.backup));
        return Ok(());
    };
    let status = backup.status.unwrap_or_default();
    match status.phase {
        BackupPhase::Succeeded => backup_taken(scope, upgrade).await?,
        BackupPhase::Failed => {
            let why = status.error.unwrap_or_else(|| "no reason given".into());
            roll_back(
                scope,
                upgrade,
                format!("the backup {} failed: {why}", upgrade.backup),
                events,
            )
            .await?;
        }
        BackupPhase::Pending | BackupPhase::Running => {
            upgrade.message = Some(format!("taking backup {}", upgrade.backup));
        }
    }
    Ok(())
}

/// Moves on once the backup is taken: to restoring it into the new version's own
/// directory, or, for files converted in place, straight to switching.
async fn backup_taken(scope: &Scope<'_>, upgrade: &mut UpgradeStatus) -> Result<(), Error> {
    if let Some(directory) = upgrade.to_directory.clone() {
        mark_directory(scope, Some(&directory)).await?;
        upgrade.phase = UpgradePhase::Restoring;
        // The new version starts on an empty directory, with nothing held.
        upgrade.writes_held = false;
        upgrade.message = Some(format!(
            "backup {} taken; starting {} in {directory}",
            upgrade.backup, upgrade.to_version
        ));
    } else {
        upgrade.phase = UpgradePhase::Switching;
        upgrade.message = Some(format!(
            "backup {} taken; starting {} on the same files",
            upgrade.backup, upgrade.to_version
        ));
    }
    Ok(())
}

/// Restores the backup into the new version once it runs, and releases writes after.
async fn restore(
    scope: &Scope<'_>,
    upgrade: &mut UpgradeStatus,
    pod: Option<&Pod>,
    events: &mut Vec<(EventType, &'static str, String)>,
) -> Result<(), Error> {
    let started = match started(upgrade, pod) {
        Ok(started) => started,
        Err(why) => return roll_back(scope, upgrade, why, events).await,
    };
    let jobs: Api<Job> = Api::namespaced(scope.ctx.client.clone(), scope.namespace);
    let name = job_name(&upgrade.backup, "-restore");
    let Some(found) = get_opt(&jobs, &name).await? else {
        if !started {
            return Ok(());
        }
        if !upgrade.writes_held {
            hold::hold(&exec_pods(scope), scope.primary).await?;
            upgrade.writes_held = true;
        }
        return start_restore(scope, upgrade, &jobs, name).await;
    };
    let job_pods = job_pods(scope.ctx, scope.namespace, &name).await?;
    match outcome::of(&found, &job_pods) {
        JobOutcome::Running => {}
        JobOutcome::Succeeded(_) => {
            hold::release(&exec_pods(scope), scope.primary).await?;
            upgrade.writes_held = false;
            upgrade.phase = UpgradePhase::Succeeded;
            let kept = upgrade.from_directory.as_deref().unwrap_or("its directory");
            let note = format!(
                "upgraded from {} to {}; the {} data stays in {kept} on the volume",
                upgrade.from_version, upgrade.to_version, upgrade.from_version
            );
            upgrade.message = Some(note.clone());
            events.push((EventType::Normal, reason::UPGRADED, note));
        }
        JobOutcome::Failed(why) | JobOutcome::Stuck(why) => {
            let why = format!("restoring backup {} failed: {why}", upgrade.backup);
            roll_back(scope, upgrade, why, events).await?;
        }
    }
    Ok(())
}

/// Waits for the new version to run on the converted files, or goes back when it
/// cannot start.
async fn switch(
    scope: &Scope<'_>,
    upgrade: &mut UpgradeStatus,
    pod: Option<&Pod>,
    events: &mut Vec<(EventType, &'static str, String)>,
) -> Result<(), Error> {
    match started(upgrade, pod) {
        Ok(true) => {}
        Ok(false) => return Ok(()),
        Err(why) => return roll_back(scope, upgrade, why, events).await,
    }
    upgrade.phase = UpgradePhase::Succeeded;
    let note = format!(
        "upgraded from {} to {} in place; backup {} holds the data as it was before",
        upgrade.from_version, upgrade.to_version, upgrade.backup
    );
    upgrade.message = Some(note.clone());
    events.push((EventType::Normal, reason::UPGRADED, note));
    Ok(())
}

/// Creates the Job that restores the upgrade's backup into the new version.
async fn start_restore(
    scope: &Scope<'_>,
    upgrade: &mut UpgradeStatus,
    jobs: &Api<Job>,
    name: String,
) -> Result<(), Error> {
    let backups: Api<DatabaseBackup> = Api::namespaced(scope.ctx.client.clone(), scope.namespace);
    let status = get_opt(&backups, &upgrade.backup)
        .await?
        .and_then(|b| b.status);
    let (Some(destination), Some(key)) = (
        status.as_ref().and_then(|s| s.destination.clone()),
        status.and_then(|s| s.key),
    ) else {
        upgrade.message = Some(format!(
            "backup {} records no dump to restore",
            upgrade.backup
        ));
        return Ok(());
    };
    let Some(agent_image) = scope.ctx.settings.backup_agent_image.as_deref() else {
        upgrade.message = Some("the controller does not know the backup agent's image".into());
        return Ok(());
    };
    let desired = job::restore(
        scope.db,
        &JobInputs {
            name: name.clone(),
            owner: scope.db.controller_owner_ref(&()),
            namespace: scope.namespace,
            database: &scope.db.name_any(),
            destination: &destination,
            key: &key,
            agent_image,
            build: &scope.ctx.settings.build,
        },
    );
    if create_if_absent(jobs, &desired).await? {
        scope.ctx.metrics.wrote("create");
    }
    upgrade.message = Some(format!(
        "restoring backup {} into {}",
        upgrade.backup, upgrade.to_version
    ));
    Ok(())
}

/// Goes back to the old version on its untouched directory, saying why.
async fn roll_back(
    scope: &Scope<'_>,
    upgrade: &mut UpgradeStatus,
    why: String,
    events: &mut Vec<(EventType, &'static str, String)>,
) -> Result<(), Error> {
    let caveat = if upgrade.in_place {
        if upgrade.phase == UpgradePhase::Switching {
            format!(
                " (if {} had begun converting the files and {} cannot start on them, restore backup {} into a new Database)",
                upgrade.to_version, upgrade.from_version, upgrade.backup
            )
        } else {
            String::new()
        }
    } else {
        mark_directory(scope, upgrade.from_directory.as_deref()).await?;
        // The old directory holds the setting made when writes were held.
        upgrade.writes_held = true;
        String::new()
    };
    upgrade.phase = UpgradePhase::RolledBack;
    let note = format!(
        "the upgrade from {} to {} failed and the Database runs {} again on its data: {why}; set spec.version to {} to confirm, or to another version to try again{caveat}",
        upgrade.from_version, upgrade.to_version, upgrade.from_version, upgrade.from_version
    );
    upgrade.message = Some(note.clone());
    events.push((EventType::Warning, reason::UPGRADE_FAILED, note));
    Ok(())
}

async fn create_backup(
    scope: &Scope<'_>,
    backups: &Api<DatabaseBackup>,
    name: &str,
) -> Result<(), Error> {
    let backup = DatabaseBackup {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(scope.namespace.to_owned()),
            labels: Some(
                [
                    (DATABASE_LABEL.to_owned(), scope.db.name_any()),
                    (UPGRADE_LABEL.to_owned(), "true".to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        spec: DatabaseBackupSpec {
            database: scope.db.name_any(),
            destination: None,
        },
        status: None,
    };
    if create_if_absent(backups, &backup).await? {
        scope.ctx.metrics.wrote("create");
    }
    Ok(())
}

/// Records on the Database the data directory its version runs in (`None`: the
/// layout's own).
async fn mark_directory(scope: &Scope<'_>, directory: Option<&str>) -> Result<(), Error> {
    let databases: Api<Database> = Api::namespaced(scope.ctx.client.clone(), scope.namespace);
    mark(&databases, scope.db, DATA_DIRECTORY_ANNOTATION, directory).await?;
    scope.ctx.metrics.wrote("upgrade");
    Ok(())
}

/// Deletes the primary's Pod when it is stuck on the new version after a rollback: a
/// StatefulSet does not replace a Pod that never became ready, so without this the old
/// version would never come back.
async fn replace_stuck(scope: &Scope<'_>, pod: Option<&Pod>, version: &str) -> Result<(), Error> {
    let Some(pod) = pod else { return Ok(()) };
    if image_tag(pod) == Some(version) || will_not_start(pod).is_none() {
        return Ok(());
    }
    if delete_if_present(&pods(scope), scope.primary).await? {
        scope.ctx.metrics.wrote("delete");
    }
    Ok(())
}

/// The primary's Pod, found by a list (the controller lists Pods; it needs no `get`).
async fn primary_pod(scope: &Scope<'_>) -> Result<Option<Pod>, Error> {
    let selector = format!("metadata.name={}", scope.primary);
    let listed = pods(scope)
        .list(&ListParams::default().fields(&selector))
        .await
        .map_err(|source| Error::Observe {
            kind: "Pod".into(),
            name: scope.primary.to_owned(),
            source,
        })?;
    Ok(listed.items.into_iter().next())
}

fn pods(scope: &Scope<'_>) -> Api<Pod> {
    Api::namespaced(scope.ctx.client.clone(), scope.namespace)
}

/// Pods to run commands in, through the client that can upgrade to a WebSocket.
fn exec_pods(scope: &Scope<'_>) -> Api<Pod> {
    Api::namespaced(scope.ctx.exec_client().clone(), scope.namespace)
}

/// Whether the new version's primary runs and is ready (saying so in the message when
/// it is not yet), or why it never will.
fn started(upgrade: &mut UpgradeStatus, pod: Option<&Pod>) -> Result<bool, String> {
    if let Some(reason) = pod.and_then(will_not_start) {
        return Err(format!("{} did not start: {reason}", upgrade.to_version));
    }
    let started = serves(pod, &upgrade.to_version);
    if !started {
        upgrade.message = Some(format!("waiting for {} to start", upgrade.to_version));
    }
    Ok(started)
}

/// Whether `pod` runs `version` and is ready.
fn serves(pod: Option<&Pod>, version: &str) -> bool {
    let Some(pod) = pod else { return false };
    let runs = image_tag(pod) == Some(version);
    let ready = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    runs && ready && pod.metadata.deletion_timestamp.is_none()
}

/// The version in `pod`'s engine image tag.
fn image_tag(pod: &Pod) -> Option<&str> {
    pod.spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == CONTAINER)?
        .image
        .as_deref()?
        .rsplit_once(':')
        .map(|(_, tag)| tag)
}

/// Why `pod` will not start, if one of its containers (an init container included) is
/// waiting for a reason no wait gets past.
pub fn will_not_start(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    status
        .init_container_statuses
        .iter()
        .chain(status.container_statuses.iter())
        .flatten()
        .filter_map(|s| s.state.as_ref()?.waiting.as_ref())
        .find_map(|waiting| {
            let reason = waiting.reason.as_deref()?;
            WILL_NOT_START
                .contains(&reason)
                .then(|| match &waiting.message {
                    Some(message) if !message.is_empty() => format!("{reason} ({message})"),
                    _ => reason.to_owned(),
                })
        })
}
