use database_api::upgrade::{DATA_DIRECTORY_ANNOTATION, UpgradePhase, UpgradeStatus};
use database_api::{DatabaseStatus, Engine};
use kube::ResourceExt;

use super::*;
use crate::resources::BuildConfig;
use crate::resources::credentials::Layout;
use crate::resources::fixtures::database;
use crate::resources::statefulset::build_statefulset;

fn running(version: &str) -> StatefulSet {
    build_statefulset(
        &database(Engine::Postgres, version, 1),
        &BuildConfig::default(),
        "10Gi",
        Layout::SeparateAdmin,
    )
}

fn pgdata(set: &StatefulSet) -> Option<String> {
    directory_of(set)
}

fn recorded(db: &mut Database, phase: UpgradePhase) -> UpgradeStatus {
    let upgrade = UpgradeStatus {
        phase,
        from_version: "15".into(),
        to_version: db.spec.version.clone(),
        from_directory: Some("/var/lib/postgresql/data/pgdata".into()),
        to_directory: Some("/var/lib/postgresql/data/pgdata-17".into()),
        backup: "orders-before-17-20261205-0600".into(),
        ..UpgradeStatus::default()
    };
    db.status = Some(DatabaseStatus {
        upgrade: Some(Box::new(upgrade.clone())),
        ..DatabaseStatus::default()
    });
    upgrade
}

#[test]
fn a_postgres_major_step_starts_an_upgrade_from_what_runs() {
    let db = database(Engine::Postgres, "17", 1);
    let Plan::Start(start) = plan(&db, Some(&running("15")), "b") else {
        panic!("an upgrade starts");
    };
    assert_eq!(start.from_version, "15");
    assert_eq!(start.to_version, "17");
    assert_eq!(
        start.from_directory.as_deref(),
        Some("/var/lib/postgresql/data/pgdata")
    );
    assert_eq!(
        start.to_directory.as_deref(),
        Some("/var/lib/postgresql/data/pgdata-17")
    );
    assert_eq!(start.phase, UpgradePhase::BackingUp);
    assert_eq!(plan(&db, Some(&running("17.2")), "b"), Plan::Settled);
    assert_eq!(plan(&db, None, "b"), Plan::Settled, "nothing runs yet");
    let mysql = database(Engine::Mysql, "8.4", 1);
    assert_eq!(plan(&mysql, None, "b"), Plan::Settled);
}

#[test]
fn the_old_version_runs_until_the_backup_is_taken_and_again_after_a_rollback() {
    let mut db = database(Engine::Postgres, "17", 1);
    for (phase, version, directory) in [
        (
            UpgradePhase::BackingUp,
            "15",
            "/var/lib/postgresql/data/pgdata",
        ),
        (
            UpgradePhase::RolledBack,
            "15",
            "/var/lib/postgresql/data/pgdata",
        ),
        (
            UpgradePhase::Restoring,
            "17",
            "/var/lib/postgresql/data/pgdata-17",
        ),
    ] {
        recorded(&mut db, phase);
        let plan = plan(&db, Some(&running("15")), "b");
        assert!(matches!(plan, Plan::Recorded(_)), "{phase:?}");
        let shaped = as_run(&db, &plan, "orders-0");
        assert_eq!(shaped.spec.version, version, "{phase:?}");
        let set = build_statefulset(
            &shaped,
            &BuildConfig::default(),
            "10Gi",
            Layout::SeparateAdmin,
        );
        assert_eq!(pgdata(&set).as_deref(), Some(directory), "{phase:?}");
    }
}

#[test]
fn a_finished_upgrade_leaves_the_directory_to_the_annotation() {
    let mut db = database(Engine::Postgres, "17", 1);
    recorded(&mut db, UpgradePhase::Succeeded);
    assert_eq!(plan(&db, Some(&running("17")), "b"), Plan::Settled);
    db.annotations_mut().insert(
        DATA_DIRECTORY_ANNOTATION.into(),
        "/var/lib/postgresql/data/pgdata-17".into(),
    );
    db.spec.version = "17.4".into();
    let set = build_statefulset(&db, &BuildConfig::default(), "10Gi", Layout::SeparateAdmin);
    assert_eq!(
        pgdata(&set).as_deref(),
        Some("/var/lib/postgresql/data/pgdata-17"),
        "a minor change keeps the upgraded directory"
    );
}

#[test]
fn a_directory_outside_the_versions_mount_is_ignored() {
    let mut db = database(Engine::Postgres, "17", 1);
    for outside in [
        "/etc",
        "/var/lib/postgresql/data/../x",
        "/var/lib/postgresql/database",
    ] {
        db.annotations_mut()
            .insert(DATA_DIRECTORY_ANNOTATION.into(), outside.into());
        assert_eq!(recorded_directory(&db), None, "{outside}");
    }
}

#[test]
fn postgres_18_keeps_its_image_directory_beside_the_older_one() {
    let db = database(Engine::Postgres, "18", 1);
    let Plan::Start(start) = plan(&db, Some(&running("17")), "b") else {
        panic!("an upgrade starts");
    };
    assert_eq!(
        start.to_directory.as_deref(),
        Some("/var/lib/postgresql/18/docker")
    );
    assert_eq!(
        pgdata(&running("18")).as_deref(),
        Some("/var/lib/postgresql/18/docker")
    );
}

#[test]
fn the_backup_dumps_the_version_that_serves() {
    let mut db = database(Engine::Postgres, "17", 1);
    assert_eq!(as_served(&db).spec.version, "17");
    recorded(&mut db, UpgradePhase::BackingUp);
    assert!(backing_up(&db));
    assert_eq!(as_served(&db).spec.version, "15");
    recorded(&mut db, UpgradePhase::Restoring);
    assert!(!backing_up(&db));
    assert_eq!(as_served(&db).spec.version, "17");
}

#[test]
fn an_upgrade_backup_is_named_for_the_major_it_leads_to() {
    assert_eq!(
        backup_name("orders", "17.2", "20261205-0600"),
        "orders-before-17-20261205-0600"
    );
}

#[test]
fn a_pod_waiting_on_an_image_it_cannot_pull_will_not_start() {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "orders-0"},
        "status": {
            "initContainerStatuses": [{
                "name": "replication", "image": "postgres:18.99", "imageID": "",
                "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}},
            }],
            "containerStatuses": [{
                "name": "database", "image": "postgres:18.99", "imageID": "",
                "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": "PodInitializing"}},
            }],
        },
    }))
    .expect("a Pod");
    assert_eq!(
        run::will_not_start(&pod).as_deref(),
        Some("ImagePullBackOff (not found)")
    );
    let starting: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "orders-0"},
        "status": {"containerStatuses": [{
            "name": "database", "image": "postgres:17", "imageID": "",
            "ready": false, "restartCount": 0,
            "state": {"waiting": {"reason": "ContainerCreating"}},
        }]},
    }))
    .expect("a Pod");
    assert_eq!(run::will_not_start(&starting), None);
}

#[test]
fn only_the_instances_up_to_the_primary_run_until_the_restore_finished() {
    let mut db = database(Engine::Postgres, "17", 3);
    recorded(&mut db, UpgradePhase::Restoring);
    let plan = plan(&db, Some(&running("17")), "b");
    assert_eq!(as_run(&db, &plan, "orders-0").spec.replicas, 1);
    assert_eq!(as_run(&db, &plan, "orders-1").spec.replicas, 2);
    recorded(&mut db, UpgradePhase::BackingUp);
    let plan = super::plan(&db, Some(&running("15")), "b");
    assert_eq!(as_run(&db, &plan, "orders-0").spec.replicas, 3);
}

#[test]
fn an_upgrade_under_way_finishes_before_another_version_change_counts() {
    let mut db = database(Engine::Postgres, "17", 1);
    recorded(&mut db, UpgradePhase::Restoring);
    db.spec.version = "18".into();
    let Plan::Recorded(upgrade) = plan(&db, Some(&running("17")), "b") else {
        panic!("the recorded upgrade goes on");
    };
    assert_eq!(upgrade.to_version, "17");
    assert_eq!(
        as_run(&db, &plan(&db, None, "b"), "orders-0").spec.version,
        "17"
    );
    db.spec.version = "17".into();
    recorded(&mut db, UpgradePhase::RolledBack);
    db.spec.version = "18".into();
    assert!(
        matches!(plan(&db, Some(&running("15")), "b"), Plan::Start(_)),
        "after a rollback, another version tries again"
    );
}

#[test]
fn a_mysql_series_step_is_an_in_place_upgrade_after_a_backup() {
    let set = |version: &str| {
        build_statefulset(
            &database(Engine::Mysql, version, 1),
            &BuildConfig::default(),
            "10Gi",
            Layout::SeparateAdmin,
        )
    };
    let db = database(Engine::Mysql, "9.8", 1);
    let Plan::Start(start) = plan(&db, Some(&set("9.7")), "b") else {
        panic!("an upgrade starts");
    };
    assert!(start.in_place);
    assert_eq!(
        (
            start.from_directory.as_deref(),
            start.to_directory.as_deref()
        ),
        (None, None)
    );
    let mut switching = db.clone();
    switching.status = Some(DatabaseStatus {
        upgrade: Some(Box::new(UpgradeStatus {
            phase: UpgradePhase::Switching,
            ..start
        })),
        ..DatabaseStatus::default()
    });
    let plan = plan(&switching, Some(&set("9.7")), "b");
    let shaped = as_run(&switching, &plan, "orders-0");
    assert_eq!(shaped.spec.version, "9.8");
    assert!(!shaped.annotations().contains_key(DATA_DIRECTORY_ANNOTATION));
    assert_eq!(as_served(&switching).spec.version, "9.8");
}
