//! `webhook certs bootstrap`: make sure the serving Secret exists and is valid, and that
//! both webhook configurations trust its CA.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Bundle, check, issue, service_dns_names};

/// Field manager of the webhook's own writes.
const FIELD_MANAGER: &str = "database-webhook";

/// What to bootstrap.
#[derive(Clone, Debug)]
pub struct BootstrapOptions {
    pub namespace: String,
    pub service: String,
    pub secret: String,
    pub validating_config: String,
    pub mutating_config: String,
}

/// What bootstrap did with the Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// No Secret existed; a new CA and certificate were stored.
    Created,
    /// The Secret existed but could not be kept (wrong names, expiring, malformed).
    Replaced,
    /// The Secret was valid and kept as it is.
    Reused,
}

/// Why bootstrap failed.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("issuing certificates: {0}")]
    Issue(#[from] rcgen::Error),
    #[error("reading Secret {0}: {1}")]
    ReadSecret(String, #[source] kube::Error),
    #[error("writing Secret {0}: {1}")]
    WriteSecret(String, #[source] kube::Error),
    #[error("writing caBundle into {kind} {name}: {source}")]
    PatchConfig {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Ensures the Secret holds a valid CA and serving certificate for the Service (reusing
/// it when it does, so repeated runs do not rotate anything), then writes the CA into
/// every webhook of both configurations.
pub async fn bootstrap(
    client: &Client,
    options: &BootstrapOptions,
) -> Result<Outcome, BootstrapError> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &options.namespace);
    let names = service_dns_names(&options.service, &options.namespace);
    let existing = secrets
        .get_opt(&options.secret)
        .await
        .map_err(|err| BootstrapError::ReadSecret(options.secret.clone(), err))?;
    let (bundle, outcome) = match existing.as_ref().map(|secret| (secret, bundle_of(secret))) {
        Some((_, Some(bundle))) if check(&bundle, &names).is_ok() => (bundle, Outcome::Reused),
        Some((secret, _)) => {
            let bundle = issue(&names)?;
            let mut replacement = secret_for(options, &bundle);
            // Replace only the version that was judged, so a concurrent writer is not
            // overwritten unseen.
            replacement
                .metadata
                .resource_version
                .clone_from(&secret.metadata.resource_version);
            secrets
                .replace(&options.secret, &PostParams::default(), &replacement)
                .await
                .map_err(|err| BootstrapError::WriteSecret(options.secret.clone(), err))?;
            (bundle, Outcome::Replaced)
        }
        None => {
            let bundle = issue(&names)?;
            secrets
                .create(&PostParams::default(), &secret_for(options, &bundle))
                .await
                .map_err(|err| BootstrapError::WriteSecret(options.secret.clone(), err))?;
            (bundle, Outcome::Created)
        }
    };
    tracing::info!(secret = %options.secret, ?outcome, "serving certificate ready");
    let ca_bundle = STANDARD.encode(&bundle.ca_pem);
    inject::<ValidatingWebhookConfiguration>(client, &options.validating_config, &ca_bundle)
        .await?;
    inject::<MutatingWebhookConfiguration>(client, &options.mutating_config, &ca_bundle).await?;
    Ok(outcome)
}

fn bundle_of(secret: &Secret) -> Option<Bundle> {
    let data = secret.data.as_ref()?;
    let text = |key: &str| String::from_utf8(data.get(key)?.0.clone()).ok();
    Some(Bundle {
        ca_pem: text("ca.crt")?,
        cert_pem: text("tls.crt")?,
        key_pem: text("tls.key")?,
    })
}

fn secret_for(options: &BootstrapOptions, bundle: &Bundle) -> Secret {
    let bytes = |pem: &str| ByteString(pem.as_bytes().to_vec());
    Secret {
        metadata: ObjectMeta {
            name: Some(options.secret.clone()),
            namespace: Some(options.namespace.clone()),
            labels: Some(BTreeMap::from([(
                database_api::constants::labels::MANAGED_BY.to_owned(),
                FIELD_MANAGER.to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(BTreeMap::from([
            ("ca.crt".to_owned(), bytes(&bundle.ca_pem)),
            ("tls.crt".to_owned(), bytes(&bundle.cert_pem)),
            ("tls.key".to_owned(), bytes(&bundle.key_pem)),
        ])),
        ..Secret::default()
    }
}

/// Sets `clientConfig.caBundle` of every webhook in the configuration `name` with one
/// JSON patch; each write is guarded by a `test` of the webhook's name, so a
/// configuration whose webhooks were reordered meanwhile fails instead of being mixed up.
async fn inject<K>(client: &Client, name: &str, ca_bundle: &str) -> Result<(), BootstrapError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + k8s_openapi::Resource
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let kind = <K as k8s_openapi::Resource>::KIND;
    let fail = |source| BootstrapError::PatchConfig {
        kind,
        name: name.to_owned(),
        source,
    };
    let api: Api<K> = Api::all(client.clone());
    let current = serde_json::to_value(api.get(name).await.map_err(fail)?).unwrap_or(Value::Null);
    let webhooks = current["webhooks"].as_array().cloned().unwrap_or_default();
    let mut ops = Vec::new();
    for (index, webhook) in webhooks.iter().enumerate() {
        ops.push(json!({"op": "test", "path": format!("/webhooks/{index}/name"), "value": webhook["name"]}));
        ops.push(json!({"op": "add", "path": format!("/webhooks/{index}/clientConfig/caBundle"), "value": ca_bundle}));
    }
    if ops.is_empty() {
        return Ok(());
    }
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops))
        .map_err(|err| fail(kube::Error::SerdeError(err)))?;
    api.patch(
        name,
        &PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        },
        &Patch::<()>::Json(patch),
    )
    .await
    .map_err(fail)?;
    tracing::info!(kind, name, webhooks = webhooks.len(), "caBundle written");
    Ok(())
}
