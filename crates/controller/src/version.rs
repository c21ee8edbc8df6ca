//! The version the data was written by is the one the StatefulSet runs: a change of
//! `spec.version` the engine cannot make to that data in place is refused here too, so
//! a cluster without the webhook keeps running the old version instead of crash-looping
//! or starting an empty database.

use database_api::Database;
use database_api::versions::{Change, Version, change};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Container;

use crate::keys::CONTAINER;

/// The version in the running StatefulSet's image tag, if it parses.
pub fn running_version(set: &StatefulSet) -> Option<Version> {
    let image = engine_container(set)?.image.as_deref()?;
    let tag = image.rsplit_once(':')?.1;
    Version::parse(tag)
}

/// The StatefulSet's database container.
pub fn engine_container(set: &StatefulSet) -> Option<&Container> {
    set.spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .iter()
        .find(|c| c.name == CONTAINER)
}

/// Why `db`'s version cannot replace the one `observed` runs, as `spec.version: <reason>`.
pub fn refused_change(db: &Database, observed: Option<&StatefulSet>) -> Option<String> {
    let running = running_version(observed?)?;
    let wanted = Version::parse(&db.spec.version)?;
    match change(db.spec.engine, running, wanted) {
        Change::Refused(reason) => Some(format!(
            "spec.version: {reason} (the instances keep running {running})"
        )),
        Change::DumpAndRestore | Change::InPlaceUpgrade
            if !database_api::backup::has_destination(db) =>
        {
            Some(format!(
                "spec.backup.destination: must be set to move {} from {running} to {wanted}: a major upgrade takes a backup there first (the instances keep running {running})",
                db.spec.engine
            ))
        }
        Change::WithinSeries | Change::InPlaceUpgrade | Change::DumpAndRestore => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::BuildConfig;
    use crate::resources::credentials::Layout;
    use crate::resources::fixtures::database;
    use crate::resources::statefulset::build_statefulset;
    use database_api::Engine;

    #[test]
    fn a_major_change_needs_a_backup_destination_and_a_move_back_is_refused() {
        let running = build_statefulset(
            &database(Engine::Postgres, "16.4", 1),
            &BuildConfig::default(),
            "10Gi",
            Layout::SeparateAdmin,
        );
        let mut wanted = database(Engine::Postgres, "17", 1);
        let message = refused_change(&wanted, Some(&running)).expect("refused");
        assert!(
            message.starts_with("spec.backup.destination: must be set"),
            "{message}"
        );
        assert!(message.contains("keep running 16.4"), "{message}");
        wanted.spec.backup = Some(
            serde_json::from_value(serde_json::json!({
                "schedule": "0 3 * * *",
                "destination": {"volume": {"claimName": "dumps"}},
            }))
            .expect("a schedule"),
        );
        assert_eq!(refused_change(&wanted, Some(&running)), None);
        let back =
            refused_change(&database(Engine::Postgres, "15", 1), Some(&running)).expect("refused");
        assert!(
            back.starts_with("spec.version: may not move back"),
            "{back}"
        );
        assert_eq!(
            refused_change(&database(Engine::Postgres, "16.6", 1), Some(&running)),
            None
        );
        assert_eq!(refused_change(&wanted, None), None, "nothing runs yet");
    }

    #[test]
    fn the_running_version_is_read_through_a_mirror_registry() {
        let config = BuildConfig {
            image_registry: Some("mirror.local:5000/library".into()),
            ..BuildConfig::default()
        };
        let set = build_statefulset(
            &database(Engine::Mysql, "8.4.2", 1),
            &config,
            "10Gi",
            Layout::SeparateAdmin,
        );
        assert_eq!(
            running_version(&set).map(|v| v.to_string()).as_deref(),
            Some("8.4.2")
        );
    }
}
