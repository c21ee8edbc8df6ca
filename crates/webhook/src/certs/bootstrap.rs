//! `webhook certs bootstrap`: one run against the API server. It reads both webhook
//! configurations and the Secret, decides with [`plan`](super::plan()), writes the
//! Secret when something changed, then writes the CAs to trust into every webhook's
//! caBundle where they differ. Run on a schedule (deploy/webhook's CronJob) it renews
//! and rotates; in a steady state it writes nothing.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::plan::{Step, plan};
use super::state::State;
use super::verify::ders;
use super::{IssueError, Renewal, service_dns_names};

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

/// What a run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// What changed in the Secret; empty when it was kept as it was.
    pub steps: Vec<Step>,
    /// How many of the two webhook configurations had their caBundle written.
    pub configurations_written: usize,
}

/// Why bootstrap failed.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("issuing certificates: {0}")]
    Issue(#[from] IssueError),
    #[error("reading Secret {0}: {1}")]
    ReadSecret(String, #[source] kube::Error),
    #[error("writing Secret {0}: {1}")]
    WriteSecret(String, #[source] kube::Error),
    #[error("reading {kind} {name}: {source}")]
    ReadConfig {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing caBundle into {kind} {name}: {source}")]
    PatchConfig {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// [`bootstrap_with`] the default validity periods and thresholds.
pub async fn bootstrap(
    client: &Client,
    options: &BootstrapOptions,
) -> Result<Outcome, BootstrapError> {
    bootstrap_with(client, options, &Renewal::default()).await
}

/// Makes the Secret hold a CA and a serving certificate for the Service that are not
/// due for renewal (taking the next step of a CA rotation when one is under way), and
/// makes every webhook of both configurations trust exactly the CAs the Secret needs.
pub async fn bootstrap_with(
    client: &Client,
    options: &BootstrapOptions,
    renewal: &Renewal,
) -> Result<Outcome, BootstrapError> {
    // The configurations are read before the Secret: a run that read an older Secret
    // than another run wrote then holds older configurations too, and its guarded
    // patch is refused instead of undoing the other run's caBundle.
    let validating =
        Config::read::<ValidatingWebhookConfiguration>(client, &options.validating_config).await?;
    let mutating =
        Config::read::<MutatingWebhookConfiguration>(client, &options.mutating_config).await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &options.namespace);
    let existing = secrets
        .get_opt(&options.secret)
        .await
        .map_err(|err| BootstrapError::ReadSecret(options.secret.clone(), err))?;

    let now = OffsetDateTime::now_utc();
    let trusted: Vec<Vec<Vec<u8>>> = validating.trusted().chain(mutating.trusted()).collect();
    let names = service_dns_names(&options.service, &options.namespace);
    let stored = existing
        .as_ref()
        .and_then(|secret| State::from_secret(secret, now));
    let plan = plan(stored, &trusted, &names, renewal, now)?;
    for step in &plan.steps {
        tracing::info!(secret = %options.secret, %step, "certificates");
    }
    if !plan.steps.is_empty() {
        write_secret(&secrets, options, existing, &plan.state).await?;
    }
    let bundle = plan.state.trust_bundle();
    let written = usize::from(
        validating
            .write::<ValidatingWebhookConfiguration>(client, &bundle)
            .await?,
    ) + usize::from(
        mutating
            .write::<MutatingWebhookConfiguration>(client, &bundle)
            .await?,
    );
    Ok(Outcome {
        steps: plan.steps,
        configurations_written: written,
    })
}

/// Creates the Secret, or replaces the version that was read (so a concurrent writer
/// is not overwritten unseen), keeping labels and annotations that are not ours.
async fn write_secret(
    secrets: &Api<Secret>,
    options: &BootstrapOptions,
    existing: Option<Secret>,
    state: &State,
) -> Result<(), BootstrapError> {
    let creating = existing.is_none();
    let mut secret = existing.unwrap_or_else(|| Secret {
        metadata: ObjectMeta {
            name: Some(options.secret.clone()),
            namespace: Some(options.namespace.clone()),
            ..ObjectMeta::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        ..Secret::default()
    });
    secret.metadata.managed_fields = None;
    secret.data = Some(state.data());
    secret.string_data = None;
    state.annotate(
        secret
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new),
    );
    secret
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(
            database_api::constants::labels::MANAGED_BY.to_owned(),
            FIELD_MANAGER.to_owned(),
        );
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    let written = if creating {
        secrets.create(&params, &secret).await
    } else {
        secrets.replace(&options.secret, &params, &secret).await
    };
    written
        .map(|_| ())
        .map_err(|err| BootstrapError::WriteSecret(options.secret.clone(), err))
}

/// A webhook configuration as read: its version, and each webhook's name and caBundle.
struct Config {
    kind: &'static str,
    name: String,
    resource_version: Value,
    webhooks: Vec<(Value, Vec<u8>)>,
}

trait WebhookConfiguration:
    Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
    + k8s_openapi::Resource
    + Clone
    + DeserializeOwned
    + serde::Serialize
    + std::fmt::Debug
{
}

impl<K> WebhookConfiguration for K where
    K: Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + k8s_openapi::Resource
        + Clone
        + DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug
{
}

impl Config {
    async fn read<K: WebhookConfiguration>(
        client: &Client,
        name: &str,
    ) -> Result<Self, BootstrapError> {
        let kind = <K as k8s_openapi::Resource>::KIND;
        let api: Api<K> = Api::all(client.clone());
        let object = api
            .get(name)
            .await
            .map_err(|source| BootstrapError::ReadConfig {
                kind,
                name: name.to_owned(),
                source,
            })?;
        let value = serde_json::to_value(object).unwrap_or(Value::Null);
        let webhooks = value["webhooks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|webhook| {
                let bundle = webhook["clientConfig"]["caBundle"]
                    .as_str()
                    .and_then(|encoded| STANDARD.decode(encoded).ok())
                    .unwrap_or_default();
                (webhook["name"].clone(), bundle)
            })
            .collect();
        Ok(Self {
            kind,
            name: name.to_owned(),
            resource_version: value["metadata"]["resourceVersion"].clone(),
            webhooks,
        })
    }

    /// The DER of the CAs each webhook trusts.
    fn trusted(&self) -> impl Iterator<Item = Vec<Vec<u8>>> + '_ {
        self.webhooks
            .iter()
            .map(|(_, bundle)| ders(&String::from_utf8_lossy(bundle)))
    }

    /// Sets every webhook's caBundle to `bundle` with one JSON patch, unless all trust
    /// exactly its CAs already (in any order). The patch tests the version that was read
    /// (so it is refused when the configuration changed since) and each webhook's name
    /// (so reordered webhooks are never mixed up). Returns whether it wrote.
    async fn write<K: WebhookConfiguration>(
        &self,
        client: &Client,
        bundle: &str,
    ) -> Result<bool, BootstrapError> {
        let wanted: BTreeSet<Vec<u8>> = ders(bundle).into_iter().collect();
        if self
            .trusted()
            .all(|current| current.into_iter().collect::<BTreeSet<_>>() == wanted)
        {
            return Ok(false);
        }
        let fail = |source| BootstrapError::PatchConfig {
            kind: self.kind,
            name: self.name.clone(),
            source,
        };
        let encoded = STANDARD.encode(bundle);
        let mut ops = vec![
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": self.resource_version}),
        ];
        for (index, (name, _)) in self.webhooks.iter().enumerate() {
            ops.push(
                json!({"op": "test", "path": format!("/webhooks/{index}/name"), "value": name}),
            );
            ops.push(json!({"op": "add", "path": format!("/webhooks/{index}/clientConfig/caBundle"), "value": encoded}));
        }
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(ops))
            .map_err(|err| fail(kube::Error::SerdeError(err)))?;
        let api: Api<K> = Api::all(client.clone());
        api.patch(
            &self.name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.to_owned()),
                ..PatchParams::default()
            },
            &Patch::<()>::Json(patch),
        )
        .await
        .map_err(fail)?;
        tracing::info!(kind = self.kind, name = %self.name, webhooks = self.webhooks.len(), "caBundle written");
        Ok(true)
    }
}
