//! Major-version upgrades, each after a backup. postgres (whose image carries one
//! major's binaries, so `pg_upgrade` cannot run in it) moves by dump and restore: writes
//! are held, the backup is taken, the new version starts in a data directory of its own,
//! the backup is restored into it and writes resume; the old directory is never
//! touched, so a failure at any step goes back to the old version on it. mysql and
//! mongodb convert their files in place when the new version starts: the backup is the
//! way back once they began ([`run`] carries the steps out).
//!
//! What the instances run follows from the recorded upgrade: the old version while
//! the backup is taken and after a rollback, the new one from the switch on.

pub mod hold;
pub mod run;

use std::borrow::Cow;

use database_api::upgrade::{DATA_DIRECTORY_ANNOTATION, UpgradePhase, UpgradeStatus};
use database_api::versions::{Change, Version, change};
use database_api::{Database, Engine};
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::ResourceExt;

use crate::engine::major;
use crate::version::{engine_container, running_version};

/// Where `db` stands with major upgrades.
#[derive(Clone, Debug, PartialEq)]
pub enum Plan {
    /// No upgrade under way: the instances run `spec.version`.
    Settled,
    /// An upgrade to begin: the status to record.
    Start(UpgradeStatus),
    /// The recorded upgrade, under way or ended (rolled back, for this version).
    Recorded(UpgradeStatus),
}

impl Plan {
    /// The upgrade this plan records, if any.
    pub fn status(&self) -> Option<&UpgradeStatus> {
        match self {
            Self::Settled => None,
            Self::Start(status) | Self::Recorded(status) => Some(status),
        }
    }
}

/// What `db` calls for, given the StatefulSet it runs (`backup` names the backup a new
/// upgrade would take).
pub fn plan(db: &Database, observed: Option<&StatefulSet>, backup: &str) -> Plan {
    if let Some(recorded) = recorded(db) {
        return Plan::Recorded(recorded.clone());
    }
    let (Some(set), Some(wanted)) = (observed, Version::parse(&db.spec.version)) else {
        return Plan::Settled;
    };
    let Some(running) = running_version(set) else {
        return Plan::Settled;
    };
    let (in_place, from_directory, to_directory) = match change(db.spec.engine, running, wanted) {
        Change::DumpAndRestore => (false, directory_of(set), Some(directory_for(wanted.major))),
        Change::InPlaceUpgrade => (true, None, None),
        Change::WithinSeries | Change::Refused(_) => return Plan::Settled,
    };
    Plan::Start(UpgradeStatus {
        phase: UpgradePhase::BackingUp,
        from_version: running.to_string(),
        to_version: db.spec.version.clone(),
        in_place,
        from_directory,
        to_directory,
        backup: backup.to_owned(),
        started_at: None,
        message: None,
        writes_held: false,
    })
}

/// `db` as its instances should run it: the old version and directory while the backup
/// is taken and after a rollback, the new directory from the switch on. Until the
/// restore finished only the instances up to the `primary` run: the StatefulSet updates
/// the highest ordinal first, and a standby of the new version cannot clone the old
/// primary, so the primary goes first and the standbys clone it once it runs.
pub fn as_run<'a>(db: &'a Database, plan: &Plan, primary: &str) -> Cow<'a, Database> {
    let Some(upgrade) = plan.status() else {
        return Cow::Borrowed(db);
    };
    let (version, directory) = served(upgrade);
    let mut shaped = db.clone();
    shaped.spec.version.clone_from(version);
    if upgrade.in_place {
        // The same files, where the layout keeps them.
        return Cow::Owned(shaped);
    }
    if upgrade.phase == UpgradePhase::Restoring {
        let up_to_primary = crate::replication::ordinal(primary).map_or(1, |o| o + 1);
        shaped.spec.replicas = shaped.spec.replicas.min(up_to_primary);
    }
    match directory {
        Some(directory) => {
            shaped
                .annotations_mut()
                .insert(DATA_DIRECTORY_ANNOTATION.to_owned(), directory.clone());
        }
        None => {
            shaped.annotations_mut().remove(DATA_DIRECTORY_ANNOTATION);
        }
    }
    Cow::Owned(shaped)
}

/// The version and data directory an upgrade's instances run at its phase: the old
/// ones until the switch and after a rollback, the new ones from the switch on.
fn served(upgrade: &UpgradeStatus) -> (&String, Option<&String>) {
    match upgrade.phase {
        UpgradePhase::BackingUp | UpgradePhase::RolledBack => {
            (&upgrade.from_version, upgrade.from_directory.as_ref())
        }
        UpgradePhase::Restoring | UpgradePhase::Switching | UpgradePhase::Succeeded => {
            (&upgrade.to_version, upgrade.to_directory.as_ref())
        }
    }
}

/// The upgrade that decides what `db` runs: one under way (it finishes, or rolls back,
/// before another version change counts), or one that rolled back while `spec.version`
/// still asks for the version that failed.
fn recorded(db: &Database) -> Option<&UpgradeStatus> {
    db.status
        .as_ref()
        .and_then(|s| s.upgrade.as_deref())
        .filter(|u| match u.phase {
            UpgradePhase::BackingUp | UpgradePhase::Restoring | UpgradePhase::Switching => true,
            UpgradePhase::RolledBack => u.to_version == db.spec.version,
            UpgradePhase::Succeeded => false,
        })
}

/// Whether `db`'s upgrade is taking its backup.
pub fn backing_up(db: &Database) -> bool {
    recorded(db).is_some_and(|u| u.phase == UpgradePhase::BackingUp)
}

/// `db` with the version its instances serve: the old one while an upgrade takes its
/// backup or after it rolled back, the new one while it restores.
pub fn as_served(db: &Database) -> Cow<'_, Database> {
    match recorded(db).map(|u| served(u).0) {
        Some(version) => {
            let mut shaped = db.clone();
            shaped.spec.version.clone_from(version);
            Cow::Owned(shaped)
        }
        None => Cow::Borrowed(db),
    }
}

/// The data directory a StatefulSet's engine container uses: its `PGDATA`, or the
/// image's own default from postgres 18 on.
pub fn directory_of(set: &StatefulSet) -> Option<String> {
    let pgdata = engine_container(set)?
        .env
        .iter()
        .flatten()
        .find(|e| e.name == "PGDATA")
        .and_then(|e| e.value.clone());
    pgdata.or_else(|| {
        let version = running_version(set)?;
        (version.major >= 18).then(|| default_directory(version.major))
    })
}

/// The directory an upgraded postgres major keeps its data in, beside the ones before
/// it: the image's own from 18 on (the volume is mounted one level up from there),
/// `pgdata-<major>` under the older images' mount.
pub fn directory_for(major: u32) -> String {
    if major >= 18 {
        default_directory(major)
    } else {
        format!("/var/lib/postgresql/data/pgdata-{major}")
    }
}

fn default_directory(major: u32) -> String {
    format!("/var/lib/postgresql/{major}/docker")
}

/// The data directory `db` records for its version, when it is not the layout's own;
/// only a directory under the version's mount counts (the annotation outlives a
/// version change the user makes by hand).
pub fn recorded_directory(db: &Database) -> Option<&str> {
    let directory = db.annotations().get(DATA_DIRECTORY_ANNOTATION)?;
    let mount = crate::engine::data_layout(db.spec.engine, &db.spec.version).mount_path;
    let under_mount = directory
        .strip_prefix(mount)
        .is_some_and(|rest| rest.starts_with('/') && !rest.contains(".."));
    (db.spec.engine == Engine::Postgres && under_mount && major(&db.spec.version).is_some())
        .then_some(directory.as_str())
}

/// The name of the backup an upgrade to `version` takes at `stamp` (`yyyymmdd-hhmm`).
pub fn backup_name(database: &str, version: &str, stamp: &str) -> String {
    let major = major(version).unwrap_or_default();
    format!("{database}-before-{major}-{stamp}")
}

#[cfg(test)]
mod tests;
