//! With failurePolicy Fail and the webhook down, the matchConditions of deploy/webhook
//! still let metadata-only updates (the controller's finalizer) and deletion through,
//! while anything the webhook must judge is refused.

// The outage, what works through it, and the recovery are one story, told in one function.
#![allow(clippy::too_many_lines)]

mod cluster;
mod common;

use cluster::{NAMESPACE, cluster_with_webhook, databases, register};
use common::Webhook;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::toolkit::cluster::wait_for_webhooks;
use testenv::toolkit::fixtures::database_object;
use testenv::toolkit::refusal::refused;

const FINALIZER: &str = database_api::constants::FINALIZER;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finalizers_and_deletion_complete_while_the_webhook_is_down_but_a_create_is_refused() {
    let (_plane, client, mut webhook) = cluster_with_webhook().await;
    let api = databases(&client);
    let spec = json!({"engine": "postgres", "version": "16.4", "storage": "10Gi"});
    api.create(&PostParams::default(), &database_object("orders-db", &spec))
        .await
        .expect("created while the webhook runs");

    webhook.stop().await;

    let add = Patch::Merge(json!({"metadata": {"finalizers": [FINALIZER]}}));
    api.patch("orders-db", &PatchParams::default(), &add)
        .await
        .expect("adding a finalizer skips the webhooks");
    let annotate =
        Patch::Merge(json!({"metadata": {"annotations": {"mycompany.io/paused": "true"}}}));
    api.patch("orders-db", &PatchParams::default(), &annotate)
        .await
        .expect("an annotation skips the webhooks");

    let created = api
        .create(
            &PostParams::default(),
            &database_object("billing-db", &spec),
        )
        .await;
    refused(
        created,
        "a create needs the webhook",
        &["failed calling webhook"],
    );

    let grow = Patch::Merge(json!({"spec": {"storage": "20Gi"}}));
    assert!(
        api.patch("orders-db", &PatchParams::default(), &grow)
            .await
            .is_err(),
        "a spec change needs the webhook"
    );
    let scale = Patch::Merge(json!({"spec": {"replicas": 2}}));
    assert!(
        api.patch_scale("orders-db", &PatchParams::default(), &scale)
            .await
            .is_err(),
        "a scale needs the webhook too"
    );

    api.delete("orders-db", &DeleteParams::default())
        .await
        .expect("deletion does not call the webhooks");
    let terminating = api.get("orders-db").await.expect("held by the finalizer");
    assert!(terminating.metadata.deletion_timestamp.is_some());

    let remove = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    api.patch("orders-db", &PatchParams::default(), &remove)
        .await
        .expect("removing the finalizer skips the webhooks");
    assert!(
        api.get_opt("orders-db").await.expect("get").is_none(),
        "the Database is gone once its finalizer is removed"
    );

    // Nothing was half-written by the refused create, and all works again once a
    // webhook is back.
    assert!(
        api.get_opt("billing-db").await.expect("get").is_none(),
        "the refused create stored nothing"
    );
    let validating: kube::Api<
        k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration,
    > = kube::Api::all(client.clone());
    let mutating: kube::Api<
        k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration,
    > = kube::Api::all(client.clone());
    for name in ["validating-webhook"] {
        validating
            .delete(name, &DeleteParams::default())
            .await
            .expect("validating configuration removed");
    }
    for name in ["mutating-webhook"] {
        mutating
            .delete(name, &DeleteParams::default())
            .await
            .expect("mutating configuration removed");
    }
    let back = Webhook::start();
    register(&client, &back).await;
    wait_for_webhooks(&client, NAMESPACE).await;
    api.create(
        &PostParams::default(),
        &database_object("billing-db", &spec),
    )
    .await
    .expect("creates work again once the webhook is back");
}

/// The API server going away and coming back needs nothing from the webhook: the same
/// webhook process, never restarted, judges and defaults again once the API server is up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admission_works_again_after_an_api_server_restart_without_restarting_the_webhook() {
    let (mut plane, client, _webhook) = cluster_with_webhook().await;
    let api = databases(&client);
    let spec = json!({"engine": "postgres", "version": "16.4", "storage": "10Gi"});
    api.create(
        &PostParams::default(),
        &database_object("before-restart", &spec),
    )
    .await
    .expect("created before the restart");

    plane.stop_apiserver();
    assert!(
        api.get_opt("before-restart").await.is_err(),
        "the API server is really down"
    );
    plane.start_apiserver().await.expect("API server back");

    // The restarted API server reads the configurations again and calls the same
    // webhook: a denial comes from the validating one, the label from the mutating one.
    wait_for_webhooks(&client, NAMESPACE).await;
    let err = api
        .create(
            &PostParams::default(),
            &database_object(
                "too-old",
                &json!({"engine": "postgres", "version": "12", "storage": "1Gi"}),
            ),
        )
        .await
        .expect_err("the webhook still refuses an unsupported version");
    assert!(
        err.to_string().contains("postgres 12 is not supported"),
        "{err}"
    );
    let created = api
        .create(
            &PostParams::default(),
            &database_object("after-restart", &spec),
        )
        .await
        .expect("created after the restart");
    assert!(
        created
            .metadata
            .labels
            .unwrap_or_default()
            .contains_key(database_api::constants::labels::NAME),
        "the mutating webhook defaulted the new Database"
    );
    assert!(
        api.get_opt("before-restart").await.expect("get").is_some(),
        "what was stored before the restart is still there"
    );
}
