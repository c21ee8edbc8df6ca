//! deploy/default rendered by the pinned kubectl's kustomize: the certificate Job and
//! the renewal CronJob run the same Pod, and the webhook Pods mount only the serving
//! pair; with the deploy/certmanager component, the Certificate names the Service, both
//! configurations carry the cainjector annotation, and the Job, the CronJob and their
//! RBAC are gone.

// Each overlay rendered and what it must hold are one scenario, told in one function.
#![allow(clippy::too_many_lines)]

use std::path::Path;

use serde_json::Value;
use testenv::toolkit::kubectl::{default_overlay_with, kustomize};

#[test]
fn the_certmanager_component_in_the_default_overlay_wires_certificate_and_configurations() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .canonicalize()
        .expect("deploy/");
    let overlay = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let root = overlay.path().canonicalize().expect("temp dir");
    // deploy/default as a user would edit it: the cert-manager component uncommented.
    default_overlay_with(&deploy, &root, &["certmanager"]);
    let documents = render(&root);
    let of_kind = |kind: &str| {
        documents
            .iter()
            .filter(|doc| doc["kind"] == kind)
            .collect::<Vec<_>>()
    };
    let certificate = of_kind("Certificate")[0];
    let certificate_ref = format!(
        "{}/{}",
        certificate["metadata"]["namespace"]
            .as_str()
            .expect("namespace"),
        certificate["metadata"]["name"].as_str().expect("name")
    );
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        let config = of_kind(kind)[0];
        assert_eq!(
            config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            certificate_ref.as_str(),
            "{kind} must name the Certificate as rendered"
        );
        let service = &config["webhooks"][0]["clientConfig"]["service"];
        let expected = serde_json::json!([
            format!(
                "{}.{}.svc",
                service["name"].as_str().expect("name"),
                service["namespace"].as_str().expect("ns")
            ),
            format!(
                "{}.{}.svc.cluster.local",
                service["name"].as_str().expect("name"),
                service["namespace"].as_str().expect("ns")
            ),
        ]);
        assert_eq!(
            certificate["spec"]["dnsNames"], expected,
            "the Certificate must cover the Service {kind} calls"
        );
    }
    let services: Vec<&str> = of_kind("Service")
        .iter()
        .filter_map(|s| s["metadata"]["name"].as_str())
        .collect();
    assert!(
        services.contains(&"database-operator-webhook"),
        "{services:?}"
    );
    assert_eq!(certificate["spec"]["secretName"], "webhook-server-cert");
    assert_eq!(
        of_kind("Issuer")[0]["spec"]["selfSigned"],
        serde_json::json!({})
    );
    assert!(
        of_kind("Job").is_empty() && of_kind("CronJob").is_empty(),
        "cert-manager replaces the bootstrap Job and the renewal CronJob"
    );
    for kind in ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"] {
        let names: Vec<&str> = of_kind(kind)
            .iter()
            .filter_map(|o| o["metadata"]["name"].as_str())
            .collect();
        assert!(
            !names.contains(&"database-operator-webhook-certs"),
            "{kind} of the certificate Jobs is left: {names:?}"
        );
    }
}

/// `kubectl kustomize dir`, as separate documents.
fn render(dir: &Path) -> Vec<Value> {
    serde_saphyr::from_multiple(&kustomize(dir)).expect("YAML documents")
}

#[test]
fn the_renewal_cronjob_runs_the_certificate_jobs_pod_and_webhook_pods_mount_no_ca_key() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/default");
    let documents = render(&deploy);
    let one = |kind: &str| {
        let found: Vec<&Value> = documents.iter().filter(|d| d["kind"] == kind).collect();
        assert_eq!(found.len(), 1, "one {kind}");
        found[0]
    };
    let job = one("Job");
    let cron = one("CronJob");
    // Pod Security and RBAC are proven for the Job's Pod (crates/e2e); the CronJob's is
    // the same Pod.
    assert_eq!(
        cron["spec"]["jobTemplate"]["spec"]["template"], job["spec"]["template"],
        "the CronJob's Pod differs from the Job's"
    );
    assert_eq!(cron["spec"]["concurrencyPolicy"], "Forbid");
    assert!(cron["spec"]["schedule"].is_string());

    let webhook = documents
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == "database-operator-webhook")
        .expect("the webhook Deployment");
    let volumes = webhook["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .expect("volumes");
    let secret = volumes
        .iter()
        .find_map(|v| v.get("secret"))
        .expect("the Secret volume");
    assert_eq!(secret["secretName"], job_flag(job, "secret"));
    let keys: Vec<&str> = secret["items"]
        .as_array()
        .expect("items")
        .iter()
        .filter_map(|item| item["key"].as_str())
        .collect();
    assert_eq!(keys, ["tls.crt", "tls.key"]);
}

fn job_flag(job: &Value, name: &str) -> String {
    job["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .find_map(|arg| arg.strip_prefix(&format!("--{name}=")))
        .expect("flag")
        .to_owned()
}
