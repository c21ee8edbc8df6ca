//! Helpers for the install tests: render `deploy/default`, split it into objects, and
//! get ServiceAccount tokens so components run with exactly the RBAC `deploy/` grants.

use std::path::PathBuf;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};
use serde_json::Value;
use testenv::ControlPlane;

/// The namespace `deploy/default` installs into.
pub const OPERATOR_NAMESPACE: &str = "database-operator-system";

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.ancestors().nth(2).map_or(here.clone(), PathBuf::from)
}

/// `kubectl kustomize deploy/default` with the pinned kubectl, as separate objects.
pub fn render_default(plane: &ControlPlane) -> anyhow::Result<Vec<Value>> {
    let dir = workspace_root().join("deploy/default");
    let output = plane.kubectl()?.arg("kustomize").arg(&dir).output()?;
    anyhow::ensure!(
        output.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8(output.stdout)?;
    Ok(serde_saphyr::from_multiple::<Value>(&text)?)
}

/// Objects of `kind` among `objects`.
pub fn of_kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// A token for ServiceAccount `namespace/name` from the TokenRequest API, and a
/// kubeconfig that uses it.
pub async fn service_account_kubeconfig(
    plane: &ControlPlane,
    namespace: &str,
    name: &str,
) -> anyhow::Result<PathBuf> {
    let client = plane.client().await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(client, namespace);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        }),
        ..TokenRequest::default()
    };
    let issued: TokenRequest = accounts
        .create_subresource("token", name, &PostParams::default(), &request)
        .await?;
    let token = issued.status.and_then(|s| s.token).unwrap_or_default();
    anyhow::ensure!(!token.is_empty(), "no token issued for {namespace}/{name}");
    Ok(plane.kubeconfig_for_token(&format!("{namespace}-{name}"), &token)?)
}
