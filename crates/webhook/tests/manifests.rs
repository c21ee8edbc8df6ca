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
fn the_certmanager_component_annotates_both_configurations_and_issues_for_the_service() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy")
        .canonicalize()
        .expect("deploy/");
    let overlay = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let root = overlay.path().canonicalize().expect("temp dir");
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- {}\ncomponents:\n- {}\n",
        relative(&root, &deploy.join("webhook")).display(),
        relative(&root, &deploy.join("certmanager")).display(),
    );
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
    let documents: Vec<serde_json::Value> = rendered
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).expect("YAML document"))
        .collect();
    let by_kind = |kind: &str| {
        documents
            .iter()
            .find(|doc| doc["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} in {rendered}"))
    };
    for kind in [
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    ] {
        assert_eq!(
            by_kind(kind)["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "database-operator-system/database-webhook-cert",
            "{kind}"
        );
    }
    let certificate = by_kind("Certificate");
    assert_eq!(
        certificate["spec"]["dnsNames"],
        serde_json::json!([
            "database-webhook.database-operator-system.svc",
            "database-webhook.database-operator-system.svc.cluster.local"
        ])
    );
    assert_eq!(certificate["spec"]["secretName"], "webhook-server-cert");
    assert_eq!(
        by_kind("Issuer")["spec"]["selfSigned"],
        serde_json::json!({})
    );
}
