//! deploy/webhook with the deploy/certmanager component, rendered by the pinned
//! kubectl's kustomize: the Certificate names the Service and both configurations carry
//! the cainjector annotation.

use std::path::{Component, Path, PathBuf};

/// `to` relative to `from` (kustomize refuses absolute paths to other kustomizations).
fn relative(from: &Path, to: &Path) -> PathBuf {
    let from: Vec<Component> = from.components().collect();
    let to: Vec<Component> = to.components().collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut path: PathBuf =
        std::iter::repeat_n(Component::ParentDir, from.len() - common).collect();
    path.extend(&to[common..]);
    path
}

#[test]
fn the_certmanager_component_in_the_default_overlay_wires_certificate_and_configurations() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .canonicalize()
        .expect("deploy/");
    let overlay = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let root = overlay.path().canonicalize().expect("temp dir");
    // deploy/default as a user would edit it: the cert-manager component uncommented.
    let default = std::fs::read_to_string(deploy.join("default/kustomization.yaml")).expect("read");
    let kustomization: String = default
        .replace("# components:", "components:")
        .replace("# - ../certmanager", "- ../certmanager")
        .lines()
        .map(|line| match line.strip_prefix("- ../") {
            Some(rest) => {
                let dir = rest.split_whitespace().next().unwrap_or(rest);
                format!("- {}\n", relative(&root, &deploy.join(dir)).display())
            }
            None => format!("{line}\n"),
        })
        .collect();
    std::fs::write(root.join("kustomization.yaml"), kustomization).expect("write");
    let kubectl = testenv::assets::find("kubectl").expect("kubectl");
    let output = std::process::Command::new(kubectl)
        .arg("kustomize")
        .arg(&root)
        .output()
        .expect("kubectl kustomize");
    let rendered = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&rendered).expect("YAML documents");
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
        of_kind("Job").is_empty(),
        "cert-manager replaces the bootstrap Job"
    );
}
