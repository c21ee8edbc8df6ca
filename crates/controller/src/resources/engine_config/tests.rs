use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::resources::fixtures::database;

fn with(engine: Engine, version: &str, spec: &serde_json::Value) -> Database {
    let mut db = database(engine, version, 1);
    let mut value = serde_json::to_value(&db.spec).expect("spec");
    for (key, field) in spec.as_object().expect("object") {
        value[key] = field.clone();
    }
    db.spec = serde_json::from_value(value).expect("spec");
    db
}

#[test]
fn no_parameters_and_no_memory_limit_means_the_images_own_configuration() {
    let db = database(Engine::Postgres, "17", 1);
    assert_eq!(effective(&db), None);
    assert!(build_config_configmap(&db, None).is_none());
}

#[test]
fn the_memory_limit_sizes_the_engine_unless_a_parameter_says_otherwise() {
    let db = with(
        Engine::Postgres,
        "17",
        &json!({"resources": {"limits": {"memory": "2Gi"}}, "parameters": {"effective_cache_size": "1GB"}}),
    );
    let settings = effective(&db).expect("settings");
    assert_eq!(settings["shared_buffers"], "512MB");
    assert_eq!(settings["effective_cache_size"], "1GB");
}

#[test]
fn postgres_includes_the_data_directorys_file_then_quotes_each_value() {
    let settings = BTreeMap::from([
        ("work_mem".to_owned(), "16MB".to_owned()),
        ("log_line_prefix".to_owned(), "%m it's".to_owned()),
    ]);
    let text = render(
        Engine::Postgres,
        &settings,
        Some("/var/lib/postgresql/data/pgdata"),
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[1], format!("# revision {}", revision(&settings)));
    assert_eq!(
        lines[2..],
        [
            "include_if_exists = '/var/lib/postgresql/data/pgdata/postgresql.conf'",
            "log_line_prefix = '%m it''s'",
            "work_mem = '16MB'",
        ]
    );
}

#[test]
fn mysql_writes_an_option_file_and_mongodb_nested_yaml() {
    let mysql = render(
        Engine::Mysql,
        &BTreeMap::from([("max_connections".to_owned(), "300".to_owned())]),
        None,
    );
    assert!(
        mysql.ends_with("[mysqld]\nmax_connections = 300\n"),
        "{mysql}"
    );
    let mongodb = render(
        Engine::Mongodb,
        &BTreeMap::from([
            (
                "storage.wiredTiger.engineConfig.cacheSizeGB".to_owned(),
                "0.25".to_owned(),
            ),
            (
                "setParameter.cursorTimeoutMillis".to_owned(),
                "60000".to_owned(),
            ),
            ("operationProfiling.mode".to_owned(), "slowOp".to_owned()),
        ]),
        None,
    );
    let body: serde_json::Value =
        serde_json::from_str(mongodb.lines().nth(2).expect("a body")).expect("JSON");
    assert_eq!(
        body,
        json!({
            "storage": {"wiredTiger": {"engineConfig": {"cacheSizeGB": 0.25}}},
            "setParameter": {"cursorTimeoutMillis": 60000},
            "operationProfiling": {"mode": "slowOp"},
        })
    );
}

#[test]
fn only_a_setting_that_needs_a_restart_changes_the_restart_revision() {
    let base = BTreeMap::from([
        ("work_mem".to_owned(), "4MB".to_owned()),
        ("shared_buffers".to_owned(), "128MB".to_owned()),
    ]);
    let mut reload = base.clone();
    reload.insert("work_mem".to_owned(), "64MB".to_owned());
    reload.insert("statement_timeout".to_owned(), "30s".to_owned());
    let mut restart = base.clone();
    restart.insert("shared_buffers".to_owned(), "256MB".to_owned());
    let of = |s| restart_revision(Engine::Postgres, s);
    assert_eq!(of(&base), of(&reload));
    assert_ne!(of(&base), of(&restart));
    assert_ne!(revision(&base), revision(&reload));

    // mysql cannot take a runtime setting back: adding one restarts, a new value does not.
    let mysql = BTreeMap::from([("max_connections".to_owned(), "200".to_owned())]);
    let mut more = mysql.clone();
    more.insert("max_connections".to_owned(), "300".to_owned());
    assert_eq!(
        restart_revision(Engine::Mysql, &mysql),
        restart_revision(Engine::Mysql, &more)
    );
    more.insert("wait_timeout".to_owned(), "600".to_owned());
    assert_ne!(
        restart_revision(Engine::Mysql, &mysql),
        restart_revision(Engine::Mysql, &more)
    );
}
