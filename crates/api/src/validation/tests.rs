//! Unit tests of each validation rule, on creation and on update.

use super::*;
use crate::DeletionPolicy;

fn db(name: &str, engine: Engine, version: &str, storage: &str, replicas: i32) -> Database {
    let mut db = Database::new(
        name,
        DatabaseSpec {
            engine,
            version: version.into(),
            storage: storage.into(),
            replicas,
            deletion_policy: DeletionPolicy::Retain,
            backup: None,
            restore_from: None,
            replication: crate::replication::Replication::default(),
            ..crate::DatabaseSpec::new(crate::Engine::Postgres, String::new(), String::new())
        },
    );
    db.metadata.namespace = Some("production".into());
    db
}

fn orders() -> Database {
    db("orders-db", Engine::Postgres, "15.4", "100Gi", 1)
}

fn errors(outcome: &Outcome) -> Vec<String> {
    outcome.errors.iter().map(ToString::to_string).collect()
}

fn has_error(outcome: &Outcome, path: &str, needle: &str) -> bool {
    outcome
        .errors
        .iter()
        .any(|e| e.path == path && e.message.contains(needle))
}

#[test]
fn a_valid_database_is_allowed_without_warnings() {
    let outcome = validate(&orders(), &Limits::default());
    assert!(outcome.is_allowed(), "{:?}", errors(&outcome));
    assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
}

#[test]
fn field_errors_display_as_path_colon_rule() {
    let error = FieldError::new("spec.storage", r#"must be whole gibibytes like "10Gi""#);
    assert_eq!(
        error.to_string(),
        r#"spec.storage: must be whole gibibytes like "10Gi""#
    );
}

#[test]
fn every_broken_rule_is_reported_at_once() {
    let bad = db("Orders_DB", Engine::Postgres, "12", "10G", 9);
    let outcome = validate(&bad, &Limits::default());
    let paths: Vec<&str> = outcome.errors.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "metadata.name",
            "spec.version",
            "spec.storage",
            "spec.replicas"
        ]
    );
    assert!(
        outcome
            .message()
            .contains("; spec.storage: must be whole gibibytes")
    );
}

#[test]
fn a_malformed_version_is_refused_with_the_format() {
    for version in ["latest", "16.4-alpine", "v16", "1.2.3.4", ""] {
        let outcome = validate(
            &db("a", Engine::Postgres, version, "1Gi", 1),
            &Limits::default(),
        );
        assert!(
            has_error(&outcome, "spec.version", "MAJOR[.MINOR[.PATCH]]"),
            "{version:?}: {:?}",
            errors(&outcome)
        );
    }
}

#[test]
fn an_unsupported_version_names_the_supported_series() {
    let outcome = validate(&db("a", Engine::Mysql, "5.7", "1Gi", 1), &Limits::default());
    assert_eq!(
        errors(&outcome),
        ["spec.version: mysql 5.7 is not supported; supported series: 8.0, 8.4, 9.x"]
    );
}

#[test]
fn storage_must_be_whole_gibibytes_between_one_and_the_maximum() {
    let limits = Limits {
        max_storage_gi: 100,
    };
    let cases = [
        ("100Mi", r#"must be whole gibibytes like "10Gi""#),
        ("1.5Gi", r#"must be whole gibibytes like "10Gi""#),
        ("0Gi", "must be at least 1Gi"),
        ("101Gi", "must be at most 100Gi"),
    ];
    for (storage, rule) in cases {
        let outcome = validate(&db("a", Engine::Postgres, "16", storage, 1), &limits);
        assert!(
            has_error(&outcome, "spec.storage", rule),
            "{storage}: {:?}",
            errors(&outcome)
        );
    }
    for storage in ["1Gi", "100Gi"] {
        assert!(validate(&db("a", Engine::Postgres, "16", storage, 1), &limits).is_allowed());
    }
}

#[test]
fn the_default_storage_maximum_is_sixteen_tebibytes() {
    assert_eq!(Limits::default().max_storage_gi, 16_384);
    let outcome = validate(
        &db("a", Engine::Postgres, "16", "16385Gi", 1),
        &Limits::default(),
    );
    assert!(has_error(&outcome, "spec.storage", "at most 16384Gi"));
}

#[test]
fn replicas_outside_one_to_five_are_refused() {
    for replicas in [0, -1, 6, i32::MAX, i32::MIN] {
        let outcome = validate(
            &db("a", Engine::Mysql, "8.4", "1Gi", replicas),
            &Limits::default(),
        );
        assert!(
            has_error(&outcome, "spec.replicas", "between 1 and 5"),
            "{replicas}"
        );
    }
}

#[test]
fn more_than_one_replica_warns_only_for_engines_that_do_not_replicate() {
    let postgres = validate(
        &db("a", Engine::Postgres, "16", "1Gi", 3),
        &Limits::default(),
    );
    assert!(postgres.is_allowed());
    assert!(postgres.warnings.is_empty(), "{:?}", postgres.warnings);
    let mysql = validate(&db("a", Engine::Mysql, "8.4", "1Gi", 3), &Limits::default());
    assert!(mysql.is_allowed());
    assert!(mysql.warnings.is_empty(), "{:?}", mysql.warnings);
    let mongodb = validate(
        &db("a", Engine::Mongodb, "7.0", "1Gi", 3),
        &Limits::default(),
    );
    assert!(mongodb.is_allowed());
    assert!(mongodb.warnings.is_empty(), "{:?}", mongodb.warnings);
}

#[test]
fn an_even_mongodb_replica_count_warns_about_elections() {
    let outcome = validate(
        &db("a", Engine::Mongodb, "7.0", "1Gi", 4),
        &Limits::default(),
    );
    assert!(outcome.is_allowed());
    assert!(
        outcome.warnings.iter().any(|w| w.contains("even number")),
        "{:?}",
        outcome.warnings
    );
    let odd = validate(
        &db("a", Engine::Mongodb, "7.0", "1Gi", 3),
        &Limits::default(),
    );
    assert!(!odd.warnings.iter().any(|w| w.contains("even number")));
}

#[test]
fn a_name_of_52_characters_is_the_longest_allowed() {
    let longest = "a".repeat(MAX_NAME_LEN);
    let outcome = validate(
        &db(&longest, Engine::Postgres, "16", "1Gi", 1),
        &Limits::default(),
    );
    assert!(outcome.is_allowed(), "{:?}", errors(&outcome));
    let too_long = "a".repeat(MAX_NAME_LEN + 1);
    let outcome = validate(
        &db(&too_long, Engine::Postgres, "16", "1Gi", 1),
        &Limits::default(),
    );
    assert!(has_error(
        &outcome,
        "metadata.name",
        "at most 52 characters"
    ));
}

#[test]
fn the_name_must_be_a_dns_1035_label() {
    for bad in ["1db", "-db", "db-", "Db", "db.prod", "db_1"] {
        let outcome = validate(
            &db(bad, Engine::Postgres, "16", "1Gi", 1),
            &Limits::default(),
        );
        assert!(has_error(&outcome, "metadata.name", "DNS-1035"), "{bad}");
    }
    for good in ["d", "db-1", "orders-db"] {
        assert!(
            validate(
                &db(good, Engine::Postgres, "16", "1Gi", 1),
                &Limits::default()
            )
            .is_allowed()
        );
    }
}

#[test]
fn a_generate_name_prefix_leaves_room_for_the_random_suffix() {
    let mut generated = db("x", Engine::Postgres, "16", "1Gi", 1);
    generated.metadata.name = None;
    generated.metadata.generate_name = Some("orders-".into());
    assert!(validate(&generated, &Limits::default()).is_allowed());
    generated.metadata.generate_name = Some(format!("{}-", "a".repeat(47)));
    let outcome = validate(&generated, &Limits::default());
    assert!(has_error(
        &outcome,
        "metadata.generateName",
        "at most 47 characters"
    ));
}

#[test]
fn changing_the_engine_is_refused_on_update() {
    let old = orders();
    let mut new = orders();
    new.spec.engine = Engine::Mysql;
    new.spec.version = "8.4".into();
    let outcome = validate_update(&old, &new, &Limits::default());
    assert_eq!(
        errors(&outcome),
        ["spec.engine: is immutable: it was postgres and cannot become mysql"]
    );
}

#[test]
fn shrinking_storage_is_denied_with_field_path() {
    let old = orders();
    let mut new = orders();
    new.spec.storage = "50Gi".into();
    let outcome = validate_update(&old, &new, &Limits::default());
    assert!(
        has_error(
            &outcome,
            "spec.storage",
            "may not shrink (from 100Gi to 50Gi)"
        ),
        "{:?}",
        errors(&outcome)
    );
}

#[test]
fn growing_storage_is_allowed_with_a_volume_expansion_warning() {
    let old = orders();
    let mut new = orders();
    new.spec.storage = "200Gi".into();
    let outcome = validate_update(&old, &new, &Limits::default());
    assert!(outcome.is_allowed());
    assert!(
        outcome
            .warnings
            .iter()
            .any(|w| w.contains("allowVolumeExpansion"))
    );
}

#[test]
fn moving_back_a_major_version_is_refused_but_a_minor_one_is_not() {
    let old = orders();
    let mut new = orders();
    new.spec.version = "14.9".into();
    let outcome = validate_update(&old, &new, &Limits::default());
    assert!(has_error(&outcome, "spec.version", "may not move back"));

    new.spec.version = "15.2".into();
    let outcome = validate_update(&old, &new, &Limits::default());
    assert!(outcome.is_allowed(), "{:?}", errors(&outcome));
    assert!(outcome.warnings.is_empty());
}

#[test]
fn mysql_8_4_back_to_8_0_is_a_series_downgrade() {
    let old = db("a", Engine::Mysql, "8.4.2", "1Gi", 1);
    let new = db("a", Engine::Mysql, "8.0.39", "1Gi", 1);
    let outcome = validate_update(&old, &new, &Limits::default());
    assert!(has_error(&outcome, "spec.version", "may not move back"));
}

/// A nightly schedule to a volume: what a major upgrade needs.
fn give_backup_destination(db: &mut Database) {
    db.spec.backup = Some(
        serde_json::from_value(serde_json::json!({
            "schedule": "0 3 * * *",
            "destination": {"volume": {"claimName": "dumps"}},
        }))
        .expect("a schedule"),
    );
}

#[test]
fn a_postgres_major_upgrade_needs_a_backup_destination_and_warns_what_it_does() {
    let old = orders();
    for version in ["16.4", "18"] {
        let mut new = orders();
        new.spec.version = version.into();
        let outcome = validate_update(&old, &new, &Limits::default());
        assert!(
            has_error(&outcome, "spec.backup.destination", "must be set"),
            "{version}: {:?}",
            errors(&outcome)
        );
        give_backup_destination(&mut new);
        let outcome = validate_update(&old, &new, &Limits::default());
        assert!(outcome.is_allowed(), "{version}: {:?}", errors(&outcome));
        assert!(
            outcome
                .warnings
                .iter()
                .any(|w| w.contains("writes are held") && w.contains("goes back to 15")),
            "{version}: {:?}",
            outcome.warnings
        );
    }
}

#[test]
fn mysql_and_mongodb_upgrade_one_series_at_a_time_after_a_backup() {
    for (engine, from, to) in [
        (Engine::Mysql, "8.0.39", "8.4"),
        (Engine::Mysql, "8.4", "9.7"),
        (Engine::Mongodb, "6.0", "7.0"),
    ] {
        let old = db("a", engine, from, "1Gi", 1);
        let mut new = db("a", engine, to, "1Gi", 1);
        let outcome = validate_update(&old, &new, &Limits::default());
        assert!(
            has_error(&outcome, "spec.backup.destination", "must be set"),
            "{from} to {to}: {:?}",
            errors(&outcome)
        );
        give_backup_destination(&mut new);
        let outcome = validate_update(&old, &new, &Limits::default());
        assert!(
            outcome.is_allowed(),
            "{from} to {to}: {:?}",
            errors(&outcome)
        );
        assert!(
            outcome
                .warnings
                .iter()
                .any(|w| w.contains("a backup is taken first")),
            "{from} to {to}: {:?}",
            outcome.warnings
        );
    }
    for (engine, from, to) in [
        (Engine::Mysql, "8.0", "9.7"),
        (Engine::Mongodb, "6.0", "8.0"),
    ] {
        let old = db("a", engine, from, "1Gi", 1);
        let new = db("a", engine, to, "1Gi", 1);
        let outcome = validate_update(&old, &new, &Limits::default());
        assert!(
            has_error(&outcome, "spec.version", "first"),
            "{from} to {to}"
        );
    }
}

#[test]
fn versions_with_leading_zeros_name_no_image_and_are_refused() {
    for version in ["016", "16.04"] {
        let outcome = validate(
            &db("a", Engine::Postgres, version, "1Gi", 1),
            &Limits::default(),
        );
        assert!(
            has_error(&outcome, "spec.version", "without leading zeros"),
            "{version}"
        );
    }
}

#[test]
fn a_series_past_its_end_of_life_is_allowed_with_a_warning_naming_when() {
    for (engine, version) in [
        (Engine::Postgres, "13"),
        (Engine::Mongodb, "6.0"),
        (Engine::Mysql, "8.0"),
        (Engine::Mysql, "9.3"),
    ] {
        let outcome = validate(&db("a", engine, version, "1Gi", 1), &Limits::default());
        assert!(outcome.is_allowed(), "{engine} {version}");
        assert!(
            outcome.warnings.iter().any(|w| w.contains("end of life")),
            "{engine} {version}: {:?}",
            outcome.warnings
        );
    }
    let current = validate(&db("a", Engine::Mysql, "9.7", "1Gi", 1), &Limits::default());
    assert!(!current.warnings.iter().any(|w| w.contains("end of life")));
}

#[test]
fn an_unchanged_update_gives_the_same_verdict_as_creation() {
    let bad = db("a", Engine::Postgres, "12", "1Gi", 1);
    assert_eq!(
        validate_update(&bad, &bad, &Limits::default()),
        validate(&bad, &Limits::default())
    );
}
