//! The webhook binary as a local process serving a certificate from a throw-away CA, and
//! the webhook configurations from `deploy/webhook` pointed at it by URL (a Service
//! cannot be reached without a Pod network). Shared by the demo and the benchmark.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use testenv::process::Process;
use testenv::{ControlPlane, TestCa, free_port};

/// The field manager for configurations applied by xtask.
const FIELD_MANAGER: &str = "database-xtask";

pub struct LocalWebhook {
    /// Held so the webhook stops when this is dropped.
    _process: Process,
    pub port: u16,
    pub ca: TestCa,
}

impl LocalWebhook {
    /// Issues a certificate for 127.0.0.1 and starts `bin_dir/webhook` serving it.
    pub fn spawn(plane: &ControlPlane, bin_dir: &Path) -> anyhow::Result<Self> {
        let ca = TestCa::new("database-local-webhook-ca")?;
        let serving = ca.issue_server(&["127.0.0.1", "localhost"])?;
        let cert_dir = plane.dir().join("webhook-certs");
        std::fs::create_dir_all(&cert_dir)?;
        std::fs::write(cert_dir.join("tls.crt"), &serving.cert_pem)?;
        std::fs::write(cert_dir.join("tls.key"), &serving.key_pem)?;
        let port = free_port()?;
        let args = vec![
            format!("--bind-address=127.0.0.1:{port}"),
            format!("--cert-dir={}", cert_dir.display()),
            "--log-format=plain".to_owned(),
        ];
        let process = Process::spawn("webhook", &bin_dir.join("webhook"), &args, plane.dir())?;
        Ok(Self {
            _process: process,
            port,
            ca,
        })
    }

    pub fn addr(&self) -> std::net::SocketAddr {
        std::net::SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Waits until `/readyz` answers 200 over TLS; returns how long that took.
    pub async fn wait_ready(&self, timeout: Duration) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let client = testenv::https::TlsClient::new(self.ca.cert_pem())?;
        loop {
            if let Ok(mut connection) = client.connect(self.addr()).await
                && let Ok((200, _)) = connection.send("GET", "/readyz", None, Vec::new()).await
            {
                return Ok(started.elapsed());
            }
            if started.elapsed() > timeout {
                bail!("the webhook was not ready within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// Applies both configurations from `deploy/webhook`, pointed at this webhook.
    pub async fn register(&self, client: &Client) -> anyhow::Result<()> {
        let ca_bundle = ByteString(self.ca.cert_pem().as_bytes().to_vec());
        let port = self.port;
        let local = |config: &mut WebhookClientConfig| {
            let path = config
                .service
                .as_ref()
                .and_then(|s| s.path.clone())
                .unwrap_or_default();
            config.service = None;
            config.url = Some(format!("https://127.0.0.1:{port}{path}"));
            config.ca_bundle = Some(ca_bundle.clone());
        };
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let (mut validating, mut mutating) = configurations()?;
        for webhook in validating.webhooks.iter_mut().flatten() {
            local(&mut webhook.client_config);
        }
        let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
        api.patch(&validating.name_any(), &params, &Patch::Apply(&validating))
            .await?;
        for webhook in mutating.webhooks.iter_mut().flatten() {
            local(&mut webhook.client_config);
        }
        let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
        api.patch(&mutating.name_any(), &params, &Patch::Apply(&mutating))
            .await?;
        Ok(())
    }

    /// The validating and the mutating path, as `deploy/webhook` registers them.
    pub fn paths() -> anyhow::Result<[String; 2]> {
        let (validating, mutating) = configurations()?;
        let path = |config: Option<&WebhookClientConfig>| {
            config
                .and_then(|c| c.service.as_ref())
                .and_then(|s| s.path.clone())
                .context("a webhook in deploy/webhook has no service path")
        };
        Ok([
            path(
                validating
                    .webhooks
                    .as_ref()
                    .and_then(|w| w.first())
                    .map(|w| &w.client_config),
            )?,
            path(
                mutating
                    .webhooks
                    .as_ref()
                    .and_then(|w| w.first())
                    .map(|w| &w.client_config),
            )?,
        ])
    }

    /// Deletes both configurations again.
    pub async fn unregister(client: &Client) -> anyhow::Result<()> {
        let (validating, mutating) = configurations()?;
        Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .delete(&validating.name_any(), &DeleteParams::default())
            .await?;
        Api::<MutatingWebhookConfiguration>::all(client.clone())
            .delete(&mutating.name_any(), &DeleteParams::default())
            .await?;
        Ok(())
    }
}

/// Both webhook configurations as `deploy/webhook` has them.
fn configurations() -> anyhow::Result<(ValidatingWebhookConfiguration, MutatingWebhookConfiguration)>
{
    let dir = crate::workspace_root().join("deploy/webhook");
    Ok((
        read_yaml(&dir.join("validating.yaml"))?,
        read_yaml(&dir.join("mutating.yaml"))?,
    ))
}

fn read_yaml<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}
