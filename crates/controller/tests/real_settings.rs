//! Engine settings on real servers: what `spec.parameters` and the memory limit set is
//! what the server shows, a change that needs no restart reaches the instances without
//! restarting any, and (postgres, two instances) one that needs a restart rolls them
//! one at a time.

// A settings change and the restarts it needs are one scenario, told in one function.
#![allow(clippy::too_many_lines)]

mod common;

use std::time::Instant;

use common::Env;
use k8s_openapi::api::core::v1::Pod;

use kube::{Api, ResourceExt};
use serde_json::json;
use testenv::Options;
use testenv::toolkit::real_tier::{REAL_WAIT, enforce_restricted, exec};
use testenv::toolkit::wait::eventually;

const PODS: [&str; 2] = ["orders-0", "orders-1"];

async fn show(env: &Env, pod: &str, setting: &str) -> String {
    let query = format!(r#"psql -U "$POSTGRES_USER" -d postgres -tAc "SHOW {setting}""#);
    exec(env, pod, &["sh", "-c", &query])
        .await
        .map_err(|e| format!("SHOW {setting} in {pod}: {e}"))
        .expect("SHOW answers")
        .trim()
        .to_owned()
}

/// Waits until every instance runs with a settings revision other than `old`; returns it.
async fn applied_after(env: &Env, old: Option<&str>) -> String {
    eventually(
        REAL_WAIT,
        "the settings applied on every instance",
        || async {
            let status = env.databases().get("orders").await.ok()?.status?;
            let revision = status.parameters_revision?;
            (status.phase == database_api::Phase::Running && Some(revision.as_str()) != old)
                .then_some(revision)
        },
    )
    .await
}

async fn pods(env: &Env) -> Vec<Pod> {
    let api: Api<Pod> = env.api();
    let mut pods = Vec::new();
    for name in PODS {
        pods.push(api.get(name).await.expect("pod"));
    }
    pods
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum())
}

fn ready_since(pod: &Pod) -> k8s_openapi::jiff::Timestamp {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready" && c.status == "True"))
        .and_then(|c| c.last_transition_time.clone())
        .expect("Ready")
        .0
}

#[tokio::test]
async fn postgres_takes_its_settings_by_reload_or_by_a_rolling_restart() {
    let env = Env::start(Options::real(&["postgres-17"])).await;
    enforce_restricted(&env).await;
    let started = Instant::now();
    env.create_database(
        "orders",
        json!({
            "engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 2,
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "768Mi"}},
            "parameters": {"work_mem": "12MB", "max_connections": "120"},
        }),
    )
    .await;
    let first = applied_after(&env, None).await;
    eprintln!("create to settings applied: {:.1?}", started.elapsed());
    for pod in PODS {
        assert_eq!(show(&env, pod, "work_mem").await, "12MB", "{pod}");
        assert_eq!(show(&env, pod, "max_connections").await, "120", "{pod}");
        assert_eq!(
            show(&env, pod, "shared_buffers").await,
            "192MB",
            "{pod}: a quarter of the limit"
        );
    }

    // work_mem needs no restart: both servers show it and neither restarted.
    let before = pods(&env).await;
    let changed = Instant::now();
    env.patch_database(
        "orders",
        json!({"spec": {"parameters": {"work_mem": "24MB", "max_connections": "120"}}}),
    )
    .await;
    let second = applied_after(&env, Some(&first)).await;
    eprintln!("reload-only change applied in {:.1?}", changed.elapsed());
    for pod in PODS {
        assert_eq!(show(&env, pod, "work_mem").await, "24MB", "{pod}");
    }
    let after = pods(&env).await;
    for (old, new) in before.iter().zip(&after) {
        assert_eq!(old.uid(), new.uid(), "{} was replaced", old.name_any());
        assert_eq!(restarts(old), restarts(new), "{} restarted", old.name_any());
    }

    // max_connections needs a restart: the instances restart one at a time, the
    // highest ordinal first, each once the one before is ready again.
    let changed = Instant::now();
    env.patch_database(
        "orders",
        json!({"spec": {"parameters": {"work_mem": "24MB", "max_connections": "130"}}}),
    )
    .await;
    applied_after(&env, Some(&second)).await;
    eprintln!(
        "restart-needing change rolled out in {:.1?}",
        changed.elapsed()
    );
    let rolled = pods(&env).await;
    for (old, new) in before.iter().zip(&rolled) {
        assert_ne!(old.uid(), new.uid(), "{} was not restarted", old.name_any());
    }
    let (zero, one) = (&rolled[0], &rolled[1]);
    let zero_created = zero.creation_timestamp().expect("created").0;
    assert!(
        ready_since(one) <= zero_created,
        "orders-0 was replaced before orders-1 was ready again"
    );
    for pod in PODS {
        assert_eq!(show(&env, pod, "max_connections").await, "130", "{pod}");
        assert_eq!(show(&env, pod, "work_mem").await, "24MB", "{pod}");
    }
}

/// Runs `script` in `pod` and returns its trimmed output.
async fn ask(env: &Env, pod: &str, script: &str) -> String {
    exec(env, pod, &["sh", "-c", script])
        .await
        .map_err(|e| format!("{script} in {pod}: {e}"))
        .expect("the server answers")
        .trim()
        .to_owned()
}

/// Patches `orders`' parameters and waits until they are applied; the one Pod must be
/// the same, unrestarted.
async fn change_in_place(env: &Env, parameters: serde_json::Value, old: &str) {
    let api: Api<Pod> = env.api();
    let before = api.get("orders-0").await.expect("pod");
    env.patch_database("orders", json!({"spec": {"parameters": parameters}}))
        .await;
    let changed = Instant::now();
    applied_after(env, Some(old)).await;
    eprintln!("reload-only change applied in {:.1?}", changed.elapsed());
    let after = api.get("orders-0").await.expect("pod");
    assert_eq!(before.uid(), after.uid(), "the Pod was replaced");
    assert_eq!(restarts(&before), restarts(&after), "the server restarted");
}

const MYSQL: &str = r#"MYSQL_PWD="$MYSQL_ROOT_PASSWORD" mysql -uroot -N -B -e "SELECT @@max_connections, @@innodb_buffer_pool_size, @@sql_mode""#;

#[tokio::test]
async fn mysql_shows_its_settings_and_sets_a_dynamic_one_without_a_restart() {
    let env = Env::start(Options::real(&["mysql-9"])).await;
    enforce_restricted(&env).await;
    env.create_database(
        "orders",
        json!({
            "engine": "mysql", "version": "9.7", "storage": "1Gi",
            "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
            "parameters": {"max-connections": "123", "sql_mode": "STRICT_TRANS_TABLES,NO_ZERO_DATE"},
        }),
    )
    .await;
    let first = applied_after(&env, None).await;
    // innodb_buffer_pool_size is half the memory limit.
    assert_eq!(
        ask(&env, "orders-0", MYSQL).await,
        "123\t536870912\tSTRICT_TRANS_TABLES,NO_ZERO_DATE"
    );
    change_in_place(
        &env,
        json!({"max-connections": "177", "sql_mode": "STRICT_TRANS_TABLES,NO_ZERO_DATE"}),
        &first,
    )
    .await;
    assert_eq!(
        ask(&env, "orders-0", MYSQL).await,
        "177\t536870912\tSTRICT_TRANS_TABLES,NO_ZERO_DATE"
    );
}

const MONGODB: &str = r#"mongosh --quiet --norc "mongodb://127.0.0.1:27017/admin?directConnection=true" --eval '
db.getSiblingDB("admin").auth(process.env.MONGO_INITDB_ROOT_USERNAME, process.env.MONGO_INITDB_ROOT_PASSWORD);
print(db.adminCommand({ getParameter: 1, cursorTimeoutMillis: 1 }).cursorTimeoutMillis + " " + db.serverStatus().wiredTiger.cache["maximum bytes configured"])'"#;

#[tokio::test]
async fn mongodb_shows_its_settings_and_sets_a_runtime_parameter_without_a_restart() {
    let env = Env::start(Options::real(&["mongo-6.0"])).await;
    enforce_restricted(&env).await;
    env.create_database(
        "orders",
        json!({
            "engine": "mongodb", "version": "6.0", "storage": "1Gi",
            "resources": {"requests": {"cpu": "100m", "memory": "512Mi"}, "limits": {"memory": "2Gi"}},
            "parameters": {
                "setParameter.cursorTimeoutMillis": "600000",
                "storage.wiredTiger.engineConfig.cacheSizeGB": "0.75",
            },
        }),
    )
    .await;
    let first = applied_after(&env, None).await;
    assert_eq!(ask(&env, "orders-0", MONGODB).await, "600000 805306368");
    change_in_place(
        &env,
        json!({
            "setParameter.cursorTimeoutMillis": "300000",
            "storage.wiredTiger.engineConfig.cacheSizeGB": "0.75",
        }),
        &first,
    )
    .await;
    assert_eq!(ask(&env, "orders-0", MONGODB).await, "300000 805306368");
}
