//! Database metrics on the real tier: with `spec.monitoring.enabled`, each instance's
//! Pod runs the community exporter beside the server, a real Prometheus scrapes the
//! server's own figures from the port named `metrics` (the Pods found by the monitoring
//! component's PodMonitor selector, see `testenv::prometheus`), and the exporter's user
//! may read statistics but not the application's data. postgres and mysql run here; no
//! reachable registry serves the mongodb exporter.

mod common;

use std::time::Duration;

use common::Env;
use serde_json::json;
use testenv::Options;
use testenv::prometheus::{Prometheus, scrape_targets};
use testenv::toolkit::real_tier::{REAL_WAIT, enforce_restricted, exec, wait_running};
use testenv::toolkit::wait::eventually;

/// Scrapes run every 2 s; a new target shows within a discovery refresh or two.
const SCRAPED_WITHIN: Duration = Duration::from_secs(90);

async fn monitoring_ready(env: &Env, name: &str) {
    let what = format!("MonitoringReady on {name}");
    eventually(REAL_WAIT, &what, || async {
        let status = env.databases().get(name).await.ok()?.status?;
        database_api::conditions::find(&status.conditions, "MonitoringReady")
            .filter(|c| c.status == "True")
            .cloned()
    })
    .await;
}

/// Points Prometheus at the exporters of the running Pods once each of `pods` has one.
async fn discover(env: &Env, prometheus: &Prometheus, pods: &[&str]) {
    let targets = eventually(REAL_WAIT, "an exporter port on each Pod", || async {
        let targets = scrape_targets(&env.client, &env.namespace).await.ok()?;
        let found = |pod: &&str| {
            targets
                .iter()
                .any(|t| t.labels.contains(&("pod".to_owned(), (*pod).to_owned())))
        };
        pods.iter().all(found).then_some(targets)
    })
    .await;
    prometheus.set_targets(&targets).expect("targets written");
}

/// Runs `sql` in the database container of `pod` as the monitor user over the
/// loopback, as the exporter connects.
async fn postgres_as_monitor(env: &Env, database: &str, sql: &str) -> Result<String, String> {
    let script = format!(
        r#"PGPASSWORD="$DATABASE_MONITOR_PASSWORD" psql -h 127.0.0.1 -U monitor -d {database} -tAX -v ON_ERROR_STOP=1 -c "{sql}""#
    );
    exec(env, "orders-0", &["sh", "-c", &script]).await
}

#[tokio::test]
async fn prometheus_scrapes_postgres_and_mysql_through_their_exporters() {
    assert!(
        Prometheus::installed(),
        "this test needs Prometheus: apt-get install prometheus (.ci/run installs it)"
    );
    let env = Env::start(Options::real(&[
        "postgres-17",
        "postgres-exporter",
        "mysql-9",
        "mysqld-exporter",
    ]))
    .await;
    enforce_restricted(&env).await;
    let prometheus = Prometheus::start().await.expect("prometheus started");
    let monitored = json!({"enabled": true});
    env.create_database(
        "orders",
        json!({"engine": "postgres", "version": "17", "storage": "1Gi", "monitoring": monitored}),
    )
    .await;
    env.create_database(
        "stock",
        json!({"engine": "mysql", "version": "9.7", "storage": "1Gi", "monitoring": monitored}),
    )
    .await;
    postgres_is_scraped_as_a_statistics_only_user(&env, &prometheus).await;
    mysql_is_scraped_as_a_statistics_only_user(&env, &prometheus).await;
}

async fn postgres_is_scraped_as_a_statistics_only_user(env: &Env, prometheus: &Prometheus) {
    wait_running(env, "orders").await;
    monitoring_ready(env, "orders").await;
    discover(env, prometheus, &["orders-0"]).await;

    let up = prometheus
        .wait_for(r#"pg_up{database="orders"} == 1"#, SCRAPED_WITHIN)
        .await
        .expect("postgres scraped");
    let labels = &up[0].labels;
    assert_eq!(labels["namespace"], "shop", "{labels:?}");
    assert_eq!(labels["pod"], "orders-0", "{labels:?}");
    assert_eq!(labels["engine"], "postgres", "{labels:?}");
    // A figure only a logged-in user with pg_monitor reads: the server's own databases.
    prometheus
        .wait_for(
            r#"pg_database_size_bytes{database="orders", datname="app"} > 0"#,
            SCRAPED_WITHIN,
        )
        .await
        .expect("the exporter reads the server's statistics");

    let rights = postgres_as_monitor(
        env,
        "postgres",
        "SELECT rolsuper, pg_has_role('monitor', 'pg_monitor', 'member') FROM pg_roles WHERE rolname = current_user",
    )
    .await
    .expect("monitor logs in");
    assert_eq!(
        rights.trim(),
        "f|t",
        "monitor is pg_monitor and no superuser"
    );
    let refused = postgres_as_monitor(env, "app", "SELECT 1").await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("permission denied")),
        "monitor must not reach the application's database: {refused:?}"
    );
}

async fn mysql_is_scraped_as_a_statistics_only_user(env: &Env, prometheus: &Prometheus) {
    wait_running(env, "stock").await;
    monitoring_ready(env, "stock").await;
    discover(env, prometheus, &["orders-0", "stock-0"]).await;
    let up = prometheus
        .wait_for(r#"mysql_up{database="stock"} == 1"#, SCRAPED_WITHIN)
        .await
        .expect("mysql scraped");
    assert_eq!(up[0].labels["engine"], "mysql");
    prometheus
        .wait_for(
            r#"mysql_global_status_uptime{database="stock"} > 0"#,
            SCRAPED_WITHIN,
        )
        .await
        .expect("the exporter reads mysql's status");
    let grants = exec(
        env,
        "stock-0",
        &[
            "sh",
            "-c",
            r#"MYSQL_PWD="$DATABASE_MONITOR_PASSWORD" mysql -h 127.0.0.1 -umonitor -N -B -e "SHOW GRANTS""#,
        ],
    )
    .await
    .expect("monitor logs in to mysql");
    assert!(grants.contains("PROCESS, REPLICATION CLIENT"), "{grants}");
    assert!(
        grants
            .lines()
            .all(|g| g.contains("ON *.*") || g.contains("ON `performance_schema`.*")),
        "monitor has rights beyond statistics: {grants}"
    );
}
