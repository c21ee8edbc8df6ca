//! deploy/components/monitoring: the PrometheusRule's groups pass `promtool check rules`
//! and the unit tests in its tests/alerts.test.yaml, which cover every alert; every
//! query of the Grafana dashboard is PromQL promtool accepts, under panel ids that are
//! unique; and the component renders into deploy/default as a user enables it, with
//! the rules and the dashboard as they are in the files.
//!
//! promtool comes from the `prometheus` Debian package (CI installs it); without it
//! these tests fail rather than skip.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use e2e::{OPERATOR_NAMESPACE, of_kind, workspace_root};
use serde_json::{Value, json};
use testenv::toolkit::kubectl::{default_overlay_with, kustomize};

fn component() -> PathBuf {
    workspace_root().join("deploy/components/monitoring")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path)
        .map_err(|e| format!("{}: {e}", path.display()))
        .expect("read")
}

/// The PrometheusRule object as written in the component.
fn prometheus_rule() -> Value {
    let rule: Value =
        serde_saphyr::from_str(&read(&component().join("prometheus_rule.yaml"))).expect("YAML");
    assert_eq!(rule["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(rule["kind"], "PrometheusRule");
    rule
}

fn dashboard_text() -> String {
    read(&component().join("dashboards/databases.json"))
}

/// An empty folder of this test's own under the target's temporary folder.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("monitoring-{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir.canonicalize().expect("scratch folder")
}

/// `promtool args…` in `dir`; its output, or a failure with that output.
fn promtool(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(dir)
        .output();
    if let Err(e) = &output {
        assert!(
            e.kind() != std::io::ErrorKind::NotFound,
            "promtool is not installed (no `promtool` on PATH); the alert rules of \
             deploy/components/monitoring are checked with it. Install it with \
             `apt-get install -y --no-install-recommends prometheus`, or put the promtool \
             of a Prometheus release on PATH"
        );
    }
    let output = output.expect("running promtool");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "promtool {} failed in {}:\n{text}",
        args.join(" "),
        dir.display()
    );
    text
}

#[test]
fn the_alert_rules_pass_promtool_and_their_unit_tests_cover_every_alert() {
    let spec = &prometheus_rule()["spec"];
    let alerts: BTreeSet<&str> = spec["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|group| group["rules"].as_array().expect("rules"))
        .filter_map(|rule| rule["alert"].as_str())
        .collect();
    assert!(!alerts.is_empty(), "no alerts in the PrometheusRule");

    // promtool reads plain rule files: the object's spec is one, named as the tests expect.
    let dir = scratch("rules");
    let rules = serde_saphyr::to_string(spec).expect("rules YAML");
    std::fs::write(dir.join("rules.yaml"), rules).expect("write rules.yaml");
    let tests_text = read(&component().join("tests/alerts.test.yaml"));
    std::fs::write(dir.join("alerts.test.yaml"), &tests_text).expect("write the tests");
    let checked = promtool(&dir, &["check", "rules", "rules.yaml"]);
    eprintln!("{checked}");
    let tested = promtool(&dir, &["test", "rules", "alerts.test.yaml"]);
    eprintln!("{tested}");

    // Every alert fires in some test, and some test expects silence.
    let tests: Value = serde_saphyr::from_str(&tests_text).expect("tests YAML");
    assert_eq!(tests["rule_files"], json!(["rules.yaml"]));
    let cases: Vec<&Value> = tests["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .flat_map(|test| test["alert_rule_test"].as_array().expect("alert_rule_test"))
        .collect();
    let expected = |case: &Value| {
        case["exp_alerts"]
            .as_array()
            .is_some_and(|alerts| !alerts.is_empty())
    };
    let firing: BTreeSet<&str> = cases
        .iter()
        .filter(|case| expected(case))
        .filter_map(|case| case["alertname"].as_str())
        .collect();
    assert_eq!(firing, alerts, "alerts without a test in which they fire");
    assert!(
        cases.iter().any(|case| !expected(case)),
        "no test expects an alert not to fire"
    );
}

/// The queries of every panel, rows' collapsed panels included. Each panel has a
/// unique id; each but a row reads the `datasource` variable and has a query.
fn panel_queries(dashboard: &Value) -> Vec<&str> {
    let mut all = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        all.push(panel);
        all.extend(panel["panels"].as_array().into_iter().flatten());
    }
    let mut ids = BTreeSet::new();
    let mut queries = Vec::new();
    for panel in all {
        let title = panel["title"].as_str().expect("title");
        assert!(
            ids.insert(panel["id"].as_u64().expect("id")),
            "panel {title:?} reuses id {}",
            panel["id"]
        );
        if panel["type"] == "row" {
            continue;
        }
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{title}");
        let exprs: Vec<&str> = panel["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|target| target["expr"].as_str())
            .filter(|expr| !expr.trim().is_empty())
            .collect();
        assert!(!exprs.is_empty(), "panel {title:?} has no query");
        queries.extend(exprs);
    }
    queries
}

#[test]
fn every_dashboard_panel_queries_valid_promql_under_a_unique_id() {
    let dashboard: Value = serde_json::from_str(&dashboard_text()).expect("dashboard JSON");
    let variables: Vec<(&str, &str)> = dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap_or(""),
                v["type"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        variables,
        [
            ("datasource", "datasource"),
            ("namespace", "query"),
            ("database", "query")
        ]
    );
    let queries = panel_queries(&dashboard);

    // Each query as a recording rule, with the variables as Grafana would fill them in:
    // `promtool check rules` parses them all.
    let rules: Vec<Value> = queries
        .iter()
        .enumerate()
        .map(|(i, expr)| {
            let expr = expr
                .replace("$__rate_interval", "2m")
                .replace("$__range", "6h")
                .replace("$namespace", "(shop|web)")
                .replace("$database", "(orders|sessions)");
            json!({"record": format!("dashboard:query_{i}"), "expr": expr})
        })
        .collect();
    let file = json!({"groups": [{"name": "dashboard", "rules": rules}]});
    let dir = scratch("dashboard");
    let yaml = serde_saphyr::to_string(&file).expect("YAML");
    std::fs::write(dir.join("queries.yaml"), yaml).expect("write");
    promtool(&dir, &["check", "rules", "queries.yaml"]);
}

/// deploy/default as a user edits it to enable the prometheus and monitoring components.
fn render_with_monitoring() -> Vec<Value> {
    let deploy = workspace_root()
        .join("deploy")
        .canonicalize()
        .expect("deploy/");
    let root = scratch("overlay");
    default_overlay_with(
        &deploy,
        &root,
        &["components/prometheus", "components/monitoring"],
    );
    serde_saphyr::from_multiple(&kustomize(&root)).expect("YAML documents")
}

#[test]
fn the_component_renders_into_the_default_overlay_with_its_rules_and_dashboard() {
    let objects = render_with_monitoring();
    let one = |kind: &str| {
        let found = of_kind(&objects, kind);
        assert_eq!(found.len(), 1, "one {kind}");
        found[0]
    };

    let monitor = one("PodMonitor");
    assert_eq!(monitor["metadata"]["name"], "database-operator-databases");
    assert_eq!(monitor["metadata"]["namespace"], OPERATOR_NAMESPACE);
    assert_eq!(monitor["spec"]["namespaceSelector"], json!({"any": true}));
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"],
        json!({
            "app.kubernetes.io/managed-by": "database-operator",
            "app.kubernetes.io/component": "database",
        })
    );
    let endpoint = &monitor["spec"]["podMetricsEndpoints"][0];
    assert_eq!(endpoint["port"], "metrics");
    assert_eq!(endpoint["interval"], "30s");
    let targets: BTreeSet<&str> = endpoint["relabelings"]
        .as_array()
        .expect("relabelings")
        .iter()
        .filter_map(|r| r["targetLabel"].as_str())
        .collect();
    assert_eq!(
        targets,
        BTreeSet::from(["job", "database", "engine", "namespace", "pod"])
    );

    let rule = one("PrometheusRule");
    assert_eq!(
        rule["metadata"]["name"],
        "database-operator-database-alerts"
    );
    assert_eq!(rule["metadata"]["namespace"], OPERATOR_NAMESPACE);
    assert_eq!(
        rule["spec"],
        prometheus_rule()["spec"],
        "kustomize changed the rules promtool tested"
    );

    let dashboards = of_kind(&objects, "ConfigMap")
        .into_iter()
        .find(|c| c["metadata"]["name"] == "database-operator-dashboards")
        .expect("the dashboards ConfigMap, without a hash suffix");
    assert_eq!(dashboards["metadata"]["namespace"], OPERATOR_NAMESPACE);
    assert_eq!(dashboards["metadata"]["labels"]["grafana_dashboard"], "1");
    assert_eq!(dashboards["data"]["databases.json"], dashboard_text());

    // The controller's backup failures carry the Database's namespace, which the
    // alert reads: the ServiceMonitor must honour it.
    assert_eq!(
        one("ServiceMonitor")["spec"]["endpoints"][0]["honorLabels"],
        true
    );
}
