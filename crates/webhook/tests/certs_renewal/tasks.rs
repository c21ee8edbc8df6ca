//! What runs alongside while certificates are renewed: the clients, the CronJob, kubelet
//! and an observer of the certificate served.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use database_webhook::certs::ders;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::json;

use testenv::toolkit::cluster::webhook_ca_bundles;
use testenv::toolkit::fixtures::{database_object, database_objects};

use super::record::{Shared, record_secret, with};
use super::secret_volume::SecretVolume;
use super::{CRON_PERIOD, KUBELET_DELAY, LOAD_NAMESPACE, NAMESPACE, SECRET, SERVICE_ACCOUNT};

/// One run of the webhook binary with `args`, as the CronJob's Pod runs it.
pub async fn bootstrap(args: &[String], kubeconfig: &PathBuf) -> Result<(), String> {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_webhook"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .await
        .map_err(|err| err.to_string())?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// What the Deployment mounts of the Secret: tls.crt and tls.key.
pub fn serving_files(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    let data = secret.data.clone().unwrap_or_default();
    ["tls.crt", "tls.key"]
        .into_iter()
        .map(|key| {
            (
                key.to_owned(),
                data.get(key).map(|v| v.0.clone()).unwrap_or_default(),
            )
        })
        .collect()
}

/// Dry-run creates through the API server, both webhooks called for each: a valid
/// Database must come back with the mutating webhook's label, and every fifth one is
/// invalid and must be refused by the validating webhook.
pub async fn load(client: kube::Client, record: Shared, done: Arc<AtomicBool>, start: Instant) {
    let api = database_objects(&client, LOAD_NAMESPACE);
    let mut sent = 0_u64;
    while !done.load(Ordering::SeqCst) {
        sent += 1;
        let result = if sent.is_multiple_of(5) {
            refused(&api).await
        } else {
            defaulted(&api).await
        };
        with(&record, |r| {
            r.requests += 1;
            if let Err(failure) = result {
                r.failures
                    .push(format!("{}s: {failure}", start.elapsed().as_secs()));
            }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const DRY_RUN: PostParams = PostParams {
    dry_run: true,
    field_manager: None,
};

/// A valid Database comes back with the mutating webhook's label.
async fn defaulted(api: &Api<DynamicObject>) -> Result<(), String> {
    let valid = json!({"engine": "postgres", "version": "16", "storage": "1Gi"});
    match api.create(&DRY_RUN, &database_object("load", &valid)).await {
        Ok(created)
            if created
                .metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key(database_api::constants::labels::NAME)) =>
        {
            Ok(())
        }
        other => Err(format!("a valid create: {}", describe(other))),
    }
}

/// An invalid Database is refused by the validating webhook.
async fn refused(api: &Api<DynamicObject>) -> Result<(), String> {
    let invalid = json!({"engine": "postgres", "version": "12", "storage": "1Gi"});
    match api
        .create(&DRY_RUN, &database_object("load", &invalid))
        .await
    {
        Err(kube::Error::Api(status))
            if status.message.contains("postgres 12 is not supported") =>
        {
            Ok(())
        }
        other => Err(format!("an invalid create: {}", describe(other))),
    }
}

/// A create's answer in one line: the API server's message, or what came back.
fn describe(answer: Result<DynamicObject, kube::Error>) -> String {
    match answer {
        Ok(object) => format!("accepted with labels {:?}", object.metadata.labels),
        Err(kube::Error::Api(status)) => status.message,
        Err(err) => err.to_string(),
    }
}

/// The CronJob: the same command every [`CRON_PERIOD`], one run at a time.
pub async fn cron(
    args: Vec<String>,
    kubeconfig: PathBuf,
    record: Shared,
    done: Arc<AtomicBool>,
    start: Instant,
) {
    while !done.load(Ordering::SeqCst) {
        let result = bootstrap(&args, &kubeconfig).await;
        with(&record, |r| {
            r.runs += 1;
            if let Err(output) = result {
                r.failures.push(format!(
                    "run at {}s failed: {output}",
                    start.elapsed().as_secs()
                ));
            }
        });
        tokio::time::sleep(CRON_PERIOD).await;
    }
}

/// kubelet: the volume follows the Secret [`KUBELET_DELAY`] after it changes. Also
/// records every version of the Secret and of the caBundles.
pub async fn kubelet(
    admin: kube::Client,
    (mut volume, published): (SecretVolume, BTreeMap<String, Vec<u8>>),
    record: Shared,
    done: Arc<AtomicBool>,
    start: Instant,
) -> SecretVolume {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NAMESPACE);
    let mut pending: VecDeque<(Instant, BTreeMap<String, Vec<u8>>)> = VecDeque::new();
    let mut last = Some(published);
    while !done.load(Ordering::SeqCst) {
        let now = start.elapsed().as_secs();
        if let Ok(secret) = secrets.get(SECRET).await {
            let files = serving_files(&secret);
            if last.as_ref() != Some(&files) {
                record_secret(&record, &secret, start);
                pending.push_back((Instant::now() + KUBELET_DELAY, files.clone()));
                last = Some(files);
            }
        }
        if let Ok(pems) = webhook_ca_bundles(
            &admin,
            "database-operator-validating-webhook",
            "database-operator-mutating-webhook",
        )
        .await
        {
            let bundles: Vec<BTreeSet<Vec<u8>>> = pems
                .iter()
                .map(|pem| ders(pem).into_iter().collect())
                .collect();
            with(&record, |r| {
                if r.bundles.last().map(|(_, b)| b) != Some(&bundles) {
                    r.bundles.push((now, bundles));
                }
            });
        }
        while pending
            .front()
            .is_some_and(|(due, _)| *due <= Instant::now())
        {
            if let Some((_, files)) = pending.pop_front() {
                volume.publish(&files);
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    volume
}

/// Reads the certificate the webhook serves from a TLS handshake every 200 ms, checking
/// it as the API server does (for the Service's name, against the CAs the Secret held).
pub async fn observe(port: u16, record: Shared, done: Arc<AtomicBool>, start: Instant) {
    let name =
        rustls::pki_types::ServerName::try_from(format!("{SERVICE_ACCOUNT}.{NAMESPACE}.svc"))
            .expect("name");
    while !done.load(Ordering::SeqCst) {
        let mut roots = rustls::RootCertStore::empty();
        for (_, _, ca) in with(&record, |r| r.secret_versions.clone()) {
            let _ = roots.add(rustls::pki_types::CertificateDer::from(ca));
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
        let handshake = async {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
            let tls = connector.connect(name.clone(), tcp).await?;
            let leaf = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|chain| chain.first())
                .map(|cert| cert.to_vec())
                .unwrap_or_default();
            Ok::<_, std::io::Error>(leaf)
        };
        let result = handshake.await;
        let now = start.elapsed().as_secs();
        with(&record, |r| match result {
            Ok(leaf) if r.served.last().map(|(_, l)| l) != Some(&leaf) => {
                r.served.push((now, leaf));
            }
            Ok(_) => {}
            Err(err) => r.failures.push(format!("handshake at {now}s: {err}")),
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
