//! A control plane ready for a test: the CRDs it needs Established, the namespace it
//! works in, an admin client, and the reads and writes tests make through them.

use std::path::PathBuf;
use std::time::Duration;

use database_api::{Database, Phase, conditions};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{Client, Resource};
use serde_json::{Value, json};

use super::fixtures;
use super::wait::{WAIT, Wait, eventually};
use crate::{ControlPlane, Options, install_crd};

/// A running control plane with CRDs installed and a namespace for the test.
pub struct Cluster {
    /// The control plane: its kubeconfigs, kubectl, audit log and components.
    pub plane: ControlPlane,
    /// Admin client for the test's own reads and writes.
    pub client: Client,
    /// The namespace the test works in.
    pub namespace: String,
}

impl Cluster {
    /// Starts a control plane with `options`, installs `crds` (each Established before
    /// the next) and creates `namespace`.
    pub async fn start(
        options: Options,
        crds: &[CustomResourceDefinition],
        namespace: &str,
    ) -> Self {
        let plane = ControlPlane::start(options)
            .await
            .expect("control plane starts");
        let client = plane.client().await.expect("admin client");
        for crd in crds {
            install_crd(&client, crd).await.expect("CRD Established");
        }
        if plane.is_attached() {
            // An existing cluster may still hold the namespace from the test before.
            delete_namespace(&client, namespace).await;
        }
        create_namespace(&client, namespace).await;
        Self {
            plane,
            client,
            namespace: namespace.to_owned(),
        }
    }

    /// The `K` objects of the test's namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The Databases of the test's namespace.
    pub fn databases(&self) -> Api<Database> {
        self.api()
    }

    /// Waits up to `timeout` until Database `name` is Running, and returns it.
    pub async fn wait_running(&self, name: &str, timeout: Duration) -> Database {
        let what = format!("Database {name} Running");
        eventually(timeout, &what, || async {
            self.databases()
                .get(name)
                .await
                .ok()
                .filter(|d| d.status.as_ref().is_some_and(|s| s.phase == Phase::Running))
        })
        .await
    }

    /// Creates Database `name` with `spec` (as a user writes it) in the test's namespace.
    pub async fn create_database(&self, name: &str, spec: Value) -> Database {
        self.databases()
            .create(&PostParams::default(), &fixtures::database(name, &spec))
            .await
            .expect("created")
    }

    /// Merge-patches Database `name` with `patch` (as `kubectl patch --type=merge` takes
    /// it), and returns the Database as stored.
    pub async fn patch_database(&self, name: &str, patch: Value) -> Database {
        self.databases()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("Database patched")
    }

    /// Waits up to [`WAIT`] until Database `name` has condition `type_` True, and
    /// returns the condition.
    pub async fn condition_true(&self, name: &str, type_: &str) -> Condition {
        let what = format!("{type_} condition on {name}");
        eventually(WAIT, &what, || async {
            let status = self.databases().get(name).await.ok()?.status?;
            conditions::find(&status.conditions, type_)
                .filter(|c| c.status == "True")
                .cloned()
        })
        .await
    }

    /// The events about object `kind`/`name` once `seen` holds for them (waiting up to
    /// [`WAIT`]): the controller sends a step's event after the step, so a test that
    /// saw the change itself may look a moment before the event exists.
    pub async fn events_eventually(
        &self,
        kind: &str,
        name: &str,
        what: &str,
        seen: impl Fn(&[(String, String, String)]) -> bool,
    ) -> Vec<(String, String, String)> {
        Wait::new(format!("{what} among the events of {kind} {name}"), WAIT)
            .every(Duration::from_millis(250))
            .until_ok(|| async {
                let events = self.events_of(kind, name).await;
                if seen(&events) {
                    Ok(events)
                } else {
                    Err(format!("{events:?}"))
                }
            })
            .await
    }

    /// The events about object `kind`/`name` in the test's namespace: (type, reason,
    /// note).
    pub async fn events_of(&self, kind: &str, name: &str) -> Vec<(String, String, String)> {
        self.api::<Event>()
            .list(&ListParams::default())
            .await
            .map(|list| list.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some(kind) && r.name.as_deref() == Some(name)
                })
            })
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.note.unwrap_or_default(),
                )
            })
            .collect()
    }
}

/// Deletes namespace `name`, if there is one, and waits until it is gone. The test
/// that left it has stopped its controller, so the finalizers of its Databases and
/// DatabaseBackups are taken off by hand (the volumes go with the namespace).
pub async fn delete_namespace(client: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    if namespaces
        .get_opt(name)
        .await
        .expect("namespace read")
        .is_none()
    {
        return;
    }
    let _ = namespaces.delete(name, &DeleteParams::default()).await;
    let unfinalize = json!({"metadata": {"finalizers": null}});
    for kind in ["Database", "DatabaseBackup"] {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk("mycompany.io", "v1", kind));
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), name, &resource);
        for object in api
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            let object_name = object.metadata.name.unwrap_or_default();
            let _ = api
                .patch(
                    &object_name,
                    &PatchParams::default(),
                    &Patch::Merge(&unfinalize),
                )
                .await;
        }
    }
    super::wait::gone(&namespaces, name, NAMESPACE_GONE).await;
}

/// How long a namespace of a finished test may take to go.
const NAMESPACE_GONE: std::time::Duration = std::time::Duration::from_secs(300);

/// Creates namespace `name`.
pub async fn create_namespace(client: &Client, name: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace created");
}

/// Creates `object` as it is, of whatever kind it says (its namespace must exist).
pub async fn create_object(client: &Client, object: &Value) {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().expect("kind");
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(namespace) => Api::namespaced_with(client.clone(), namespace, &resource),
        None => Api::all_with(client.clone(), &resource),
    };
    let dynamic: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
    let created = api.create(&PostParams::default(), &dynamic).await;
    assert!(created.is_ok(), "creating {kind}: {created:?}");
}

/// A kubeconfig with a token of ServiceAccount `namespace/name` from the TokenRequest
/// API, as a Pod running as that ServiceAccount has: to run a component with exactly
/// the RBAC it is granted.
pub async fn service_account_kubeconfig(
    plane: &ControlPlane,
    namespace: &str,
    name: &str,
) -> PathBuf {
    let token = service_account_token(plane, namespace, name).await;
    plane
        .kubeconfig_for_token(&format!("{namespace}-{name}"), &token)
        .expect("kubeconfig")
}

/// A token of ServiceAccount `namespace/name`, valid for an hour, from the TokenRequest
/// API.
pub async fn service_account_token(plane: &ControlPlane, namespace: &str, name: &str) -> String {
    let client = plane.client().await.expect("admin client");
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
        .await
        .expect("token");
    let token = issued.status.and_then(|s| s.token).unwrap_or_default();
    assert!(!token.is_empty(), "no token issued for {namespace}/{name}");
    token
}

/// Waits until the API server calls both webhooks of deploy/webhook for Databases in
/// `namespace`: it learns of webhook configurations through an informer, so dry-run
/// creates are retried until a denial comes from the validating webhook and the engine
/// label from the mutating one. Dry runs leave nothing behind.
pub async fn wait_for_webhooks(client: &Client, namespace: &str) {
    let api = fixtures::database_objects(client, namespace);
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let invalid = fixtures::database_object(
        "probe",
        &json!({"engine": "postgres", "version": "12", "storage": "1Gi"}),
    );
    let valid = fixtures::database_object(
        "probe",
        &json!({"engine": "postgres", "version": "16", "storage": "1Gi"}),
    );
    Wait::new("the webhooks to take effect", Duration::from_secs(30))
        .every(Duration::from_millis(200))
        .until_ok(|| async {
            let denied = matches!(
                api.create(&dry_run, &invalid).await,
                Err(kube::Error::Api(status)) if status.message.contains("postgres 12 is not supported")
            );
            let labelled = api.create(&dry_run, &valid).await.is_ok_and(|created| {
                created
                    .metadata
                    .labels
                    .unwrap_or_default()
                    .contains_key(database_api::constants::labels::NAME)
            });
            if denied && labelled {
                Ok(())
            } else {
                Err(format!("denied: {denied}, labelled: {labelled}"))
            }
        })
        .await;
}

/// The caBundle of each webhook of ValidatingWebhookConfiguration `validating`, then of
/// MutatingWebhookConfiguration `mutating`, as PEM text (empty where none is set).
pub async fn webhook_ca_bundles(
    client: &Client,
    validating: &str,
    mutating: &str,
) -> Result<Vec<String>, kube::Error> {
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .get(validating)
        .await?;
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .get(mutating)
        .await?;
    let bundles = validating
        .webhooks
        .unwrap_or_default()
        .into_iter()
        .map(|hook| hook.client_config.ca_bundle)
        .chain(
            mutating
                .webhooks
                .unwrap_or_default()
                .into_iter()
                .map(|hook| hook.client_config.ca_bundle),
        );
    Ok(bundles
        .map(|bundle| String::from_utf8_lossy(&bundle.unwrap_or_default().0).into_owned())
        .collect())
}
