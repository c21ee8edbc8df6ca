//! The rules that compare an update with the object it replaces: what may not change
//! and what may only move one way.

use super::{Limits, Outcome, validate};
use crate::Database;
use crate::storage::parse_gi;
use crate::versions::{Change, Version, change};

/// Checks the new side of an update on its own, then against the old side: the engine
/// is immutable, storage may not shrink, and the version may only change the way the
/// engine upgrades its data in place (see [`crate::versions::change`]). Growing storage
/// and an in-place upgrade are allowed with a warning.
pub fn validate_update(old: &Database, new: &Database, limits: &Limits) -> Outcome {
    let mut outcome = validate(new, limits);
    check_engine(old, new, &mut outcome);
    check_storage(old, new, &mut outcome);
    check_version(old, new, &mut outcome);
    super::parameters::check_update(&old.spec, &new.spec, &mut outcome);
    if old.spec.storage_class_name != new.spec.storage_class_name {
        outcome.error(
            "spec.storageClassName",
            format!(
                "is immutable: it was {} and cannot become {} (a StatefulSet's volumes keep the class they were created with)",
                class_name(old.spec.storage_class_name.as_deref()),
                class_name(new.spec.storage_class_name.as_deref())
            ),
        );
    }
    if old.spec.restore_from != new.spec.restore_from {
        outcome.error(
            "spec.restoreFrom",
            "is given only when a Database is created and cannot change after",
        );
    }
    outcome
}

fn check_engine(old: &Database, new: &Database, outcome: &mut Outcome) {
    if old.spec.engine != new.spec.engine {
        outcome.error(
            "spec.engine",
            format!(
                "is immutable: it was {} and cannot become {}",
                old.spec.engine, new.spec.engine
            ),
        );
    }
}

fn check_storage(old: &Database, new: &Database, outcome: &mut Outcome) {
    let (Some(before), Some(after)) = (parse_gi(&old.spec.storage), parse_gi(&new.spec.storage))
    else {
        return;
    };
    if after < before {
        outcome.error(
            "spec.storage",
            format!(
                "may not shrink (from {before}Gi to {after}Gi): a persistent volume can only grow"
            ),
        );
    } else if after > before {
        outcome.warn(format!(
            "spec.storage grows from {before}Gi to {after}Gi: every instance's volume must be expanded, which needs a StorageClass with allowVolumeExpansion"
        ));
    }
}

fn check_version(old: &Database, new: &Database, outcome: &mut Outcome) {
    // A changed engine is already refused; comparing versions across engines means nothing.
    if old.spec.engine != new.spec.engine {
        return;
    }
    let engine = new.spec.engine;
    let (Some(before), Some(after)) = (
        Version::parse(&old.spec.version),
        Version::parse(&new.spec.version),
    ) else {
        return;
    };
    match change(engine, before, after) {
        Change::WithinSeries => {}
        Change::Refused(reason) => outcome.error("spec.version", reason),
        Change::DumpAndRestore | Change::InPlaceUpgrade
            if !crate::backup::has_destination(new) =>
        {
            outcome.error(
                "spec.backup.destination",
                format!(
                    "must be set to move {engine} from {} to {}: a major upgrade takes a backup there first",
                    old.spec.version, new.spec.version
                ),
            );
        }
        Change::InPlaceUpgrade => outcome.warn(format!(
            "spec.version moves from {} to {}: a backup is taken first, then {engine} converts its data in place when the new version starts, which cannot be undone except by restoring that backup",
            old.spec.version, new.spec.version
        )),
        Change::DumpAndRestore => outcome.warn(format!(
            "spec.version moves from {} to {}: writes are held while a backup is taken, then {} starts in a data directory of its own and the backup is restored into it; the volume needs room for both copies, and a failed upgrade goes back to {} with its data",
            old.spec.version, new.spec.version, new.spec.version, old.spec.version
        )),
    }
}

/// A storage class as messages name it.
fn class_name(name: Option<&str>) -> String {
    name.map_or_else(|| "the cluster's default".to_owned(), |n| format!("{n:?}"))
}
