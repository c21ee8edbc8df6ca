//! Certificate renewal under load, against a real API server, as deploy/default installs
//! the webhook without cert-manager. The API server calls the webhook through its
//! Service (an ExternalName Service pointing at 127.0.0.1, so the certificate is checked
//! for `SVC.NS.svc` as in a cluster); the webhook serves from a folder kept in sync with
//! its Secret the way kubelet updates a Secret volume, with a delay; the CronJob's
//! command runs every few seconds as the webhook's ServiceAccount with deploy/'s RBAC;
//! and several clients send admission requests through the API server all along. With
//! validity periods of seconds, the serving certificate is renewed several times and
//! the CA once: no request fails, and the certificate served changes.

// The renewal under load, install to last check, is one scenario, told in one function.
#![allow(clippy::too_many_lines)]

mod deploy;
mod record;
mod secret_volume;
mod tasks;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use database_api::validation::Limits;
use database_webhook::AppState;
use database_webhook::server::{ServeOptions, Server};
use deploy::{object, render_default};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use record::{Shared, record_secret, summarize, with};
use secret_volume::SecretVolume;
use serde_json::{Value, json};
use testenv::toolkit::cluster::{create_object, service_account_kubeconfig, wait_for_webhooks};
use testenv::{ControlPlane, Options};

const NAMESPACE: &str = "database-operator-system";
/// Where the load's Databases are created.
const LOAD_NAMESPACE: &str = "production";
const SERVICE_ACCOUNT: &str = "database-operator-webhook";
const SECRET: &str = "webhook-server-cert";
const CRONJOB: &str = "database-operator-webhook-certs-renewal";
const RBAC: &str = "database-operator-webhook-certs";
/// The CronJob's flags shortened to seconds: the serving certificate is renewed with
/// less than 15 s left (every 30 s), the CA with less than 49.5 s left (after 100 s).
const RENEWAL_FLAGS: [&str; 3] = [
    "--serving-validity=45s",
    "--ca-validity=150s",
    "--ca-overlap=8s",
];
/// How often the CronJob's command runs.
const CRON_PERIOD: Duration = Duration::from_secs(2);
/// How long the volume takes to follow the Secret (kubelet: up to a minute or two,
/// hence the default --ca-overlap of an hour).
const KUBELET_DELAY: Duration = Duration::from_secs(2);
/// How often the webhook checks its files (--cert-reload-seconds).
const RELOAD_INTERVAL: Duration = Duration::from_secs(1);
const CLIENTS: usize = 4;
/// Load keeps running this long after the old CA is dropped.
const TAIL: Duration = Duration::from_secs(6);
const DEADLINE: Duration = Duration::from_secs(200);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_certificate_and_ca_are_renewed_under_load_without_a_failed_request() {
    let began = Instant::now();
    let plane = ControlPlane::start(Options::default().with_full_audit())
        .await
        .expect("control plane");
    let admin = plane.client().await.expect("admin client");
    let objects = render_default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    install(&admin, &objects, port).await;
    let kubeconfig = service_account_kubeconfig(&plane, NAMESPACE, SERVICE_ACCOUNT).await;
    let args = cron_args(&objects);

    // The install Job's run, then the Pod starts with the Secret mounted.
    let start = Instant::now();
    tasks::bootstrap(&args, &kubeconfig)
        .await
        .expect("first run");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let mut volume = SecretVolume::new();
    let first = tasks::serving_files(&secrets.get(SECRET).await.expect("Secret"));
    volume.publish(&first);
    let (stop_webhook, webhook) = serve(listener, volume.path());
    wait_for_webhooks(&admin, LOAD_NAMESPACE).await;

    let record = Shared::default();
    record_secret(&record, &secrets.get(SECRET).await.expect("Secret"), start);
    let done = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let client = plane.client().await.expect("client");
        tasks.push(tokio::spawn(tasks::load(
            client,
            record.clone(),
            done.clone(),
            start,
        )));
    }
    tasks.push(tokio::spawn(tasks::cron(
        args,
        kubeconfig,
        record.clone(),
        done.clone(),
        start,
    )));
    tasks.push(tokio::spawn(tasks::observe(
        port,
        record.clone(),
        done.clone(),
        start,
    )));
    let kubelet = tokio::spawn(tasks::kubelet(
        admin.clone(),
        (volume, first),
        record.clone(),
        done.clone(),
        start,
    ));

    let finished = wait_for_rotation(&record, start).await;
    done.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await.expect("task");
    }
    let _volume = kubelet.await.expect("kubelet");
    let _ = stop_webhook.send(());
    webhook.await.expect("webhook");

    let record = record.lock().expect("record");
    let summary = summarize(&record);
    eprintln!("{summary}\ntotal {:?}", began.elapsed());
    assert!(
        finished,
        "no full CA rotation within {DEADLINE:?}:\n{summary}"
    );
    let first_failures: Vec<&String> = record.failures.iter().take(10).collect();
    assert!(
        record.failures.is_empty(),
        "{} failures, the first: {first_failures:#?}\n{summary}",
        record.failures.len()
    );
    assert!(
        record.requests > 1000,
        "only {} requests\n{summary}",
        record.requests
    );

    served_leaves_of_both_cas(&record, &summary);
    used_exactly_the_deployed_rbac(&plane, &objects);
}

/// The served certificate changed: the webhook served leaves of both CAs, and at least
/// three (the first and two renewals) of the first.
fn served_leaves_of_both_cas(record: &record::Record, summary: &str) {
    let ca_of = |leaf: &Vec<u8>| {
        record
            .secret_versions
            .iter()
            .find(|(_, l, _)| l == leaf)
            .map(|(_, _, ca)| ca.clone())
            .expect("every served leaf came from the Secret")
    };
    let first_ca = &record.secret_versions[0].2;
    let served_by_first = record
        .served
        .iter()
        .filter(|(_, leaf)| &ca_of(leaf) == first_ca)
        .count();
    let served_by_next = record
        .served
        .iter()
        .filter(|(_, leaf)| &ca_of(leaf) != first_ca)
        .count();
    assert!(served_by_first >= 3, "{summary}");
    assert!(served_by_next >= 1, "{summary}");
}

/// Waits until the CA was rotated all the way (the caBundle held two CAs, then only the
/// new one, whose certificate is served), then lets the load run a little longer.
/// False when that did not happen before the deadline.
async fn wait_for_rotation(record: &Shared, start: Instant) -> bool {
    loop {
        let rotated = with(record, |r| {
            let Some((_, _, current)) = r.secret_versions.last() else {
                return false;
            };
            let overlapped = r
                .bundles
                .iter()
                .any(|(_, b)| b.iter().all(|set| set.len() == 2));
            let only_current = r
                .bundles
                .last()
                .is_some_and(|(_, b)| b.iter().all(|set| set.len() == 1 && set.contains(current)));
            let served_current = r.served.last().is_some_and(|(_, leaf)| {
                r.secret_versions
                    .iter()
                    .any(|(_, l, ca)| l == leaf && ca == current)
            });
            r.secret_versions[0].2 != *current && overlapped && only_current && served_current
        });
        if rotated {
            tokio::time::sleep(TAIL).await;
            return true;
        }
        if start.elapsed() > DEADLINE {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The namespaces, the CRD, the webhook's ServiceAccount and the RBAC of the
/// certificate Jobs as rendered, both webhook configurations calling the Service on
/// `port`, and that Service as an ExternalName for 127.0.0.1.
async fn install(admin: &kube::Client, objects: &[Value], port: u16) {
    use kube::CustomResourceExt as _;
    create_object(admin, object(objects, "Namespace", NAMESPACE)).await;
    create_object(
        admin,
        &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": LOAD_NAMESPACE}}),
    )
    .await;
    testenv::install_crd(admin, &database_api::Database::crd())
        .await
        .expect("CRD Established");
    create_object(admin, object(objects, "ServiceAccount", SERVICE_ACCOUNT)).await;
    for kind in ["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"] {
        create_object(admin, object(objects, kind, RBAC)).await;
    }
    let mut service = None;
    for (kind, name) in [
        (
            "ValidatingWebhookConfiguration",
            "database-operator-validating-webhook",
        ),
        (
            "MutatingWebhookConfiguration",
            "database-operator-mutating-webhook",
        ),
    ] {
        let mut config = object(objects, kind, name).clone();
        for hook in config["webhooks"].as_array_mut().expect("webhooks") {
            let reference = &mut hook["clientConfig"]["service"];
            reference["port"] = json!(port);
            service = Some((reference["name"].clone(), reference["namespace"].clone()));
        }
        create_object(admin, &config).await;
    }
    let (name, namespace) = service.expect("a service reference");
    create_object(
        admin,
        &json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}}),
    )
    .await;
}

/// The CronJob container's arguments, `$(POD_NAMESPACE)` expanded as kubelet does, with
/// the validity periods shortened.
fn cron_args(objects: &[Value]) -> Vec<String> {
    let container = &object(objects, "CronJob", CRONJOB)["spec"]["jobTemplate"]["spec"]["template"]
        ["spec"]["containers"][0];
    assert_eq!(container["command"], json!(["/webhook"]));
    container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .map(|arg| arg.replace("$(POD_NAMESPACE)", NAMESPACE))
        .chain(RENEWAL_FLAGS.map(str::to_owned))
        .collect()
}

fn serve(
    listener: std::net::TcpListener,
    cert_dir: PathBuf,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = Server::new(
        listener,
        ServeOptions {
            cert_dir,
            reload_interval: RELOAD_INTERVAL,
        },
    )
    .expect("the webhook loads its certificate");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        server
            .run(AppState::new(Limits::default()), async move {
                let _ = stopped.await;
            })
            .await
            .expect("the webhook serves");
    });
    (stop, task)
}

/// The ServiceAccount's requests were never refused, and used every rule the
/// certificate Jobs' Role and ClusterRole grant.
fn used_exactly_the_deployed_rbac(plane: &ControlPlane, objects: &[Value]) {
    let account = format!("system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}");
    let mut used = BTreeSet::new();
    for event in plane.requests_by(&account) {
        let code = &event["responseStatus"]["code"];
        assert_ne!(code, 403, "refused: {event}");
        let object = &event["objectRef"];
        used.insert((
            object["apiGroup"].as_str().unwrap_or_default().to_owned(),
            object["resource"].as_str().unwrap_or_default().to_owned(),
            event["verb"].as_str().unwrap_or_default().to_owned(),
        ));
    }
    let mut granted = BTreeSet::new();
    for kind in ["Role", "ClusterRole"] {
        for rule in object(objects, kind, RBAC)["rules"]
            .as_array()
            .expect("rules")
        {
            let strings = |key: &str| -> Vec<String> {
                rule[key]
                    .as_array()
                    .expect(key)
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            };
            for group in strings("apiGroups") {
                for resource in strings("resources") {
                    for verb in strings("verbs") {
                        granted.insert((group.clone(), resource.clone(), verb));
                    }
                }
            }
        }
    }
    assert_eq!(used, granted, "used (left) and granted (right) differ");
}
