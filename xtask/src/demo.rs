//! `cargo xtask demo`: the whole product on one machine. A full local control plane, the
//! CRD and webhook configurations from `deploy/`, a throw-away CA for the webhook, the
//! webhook and the controller as local processes, and the samples from `deploy/samples`
//! running until every Database is Running. Ctrl-C stops it all.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use database_api::{Database, Phase};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use testenv::process::Process;
use testenv::{ControlPlane, Options, TestCa, free_port};

const NAMESPACE: &str = "demo";
const TIMEOUT: Duration = Duration::from_secs(180);

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Exit once every sample is Running instead of waiting for Ctrl-C (for CI).
    #[arg(long)]
    pub exit_when_ready: bool,
}

pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    crate::control_plane::ensure_built()?;
    println!("demo: building the controller and the webhook");
    let status = Command::new(env!("CARGO"))
        .current_dir(crate::workspace_root())
        .args([
            "build",
            "--locked",
            "-p",
            "database-controller",
            "-p",
            "database-webhook",
            "--bins",
        ])
        .status()?;
    if !status.success() {
        bail!("cargo build failed");
    }
    // One thread: the components are tied to the thread that started them.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(demo(args))
}

async fn demo(args: &DemoArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    println!(
        "demo: starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok"
    );
    let plane = ControlPlane::start(Options::full()).await?;
    let root = crate::workspace_root();
    let demo_dir = root.join("target/demo");
    std::fs::create_dir_all(&demo_dir)?;
    let kubeconfig = demo_dir.join("kubeconfig");
    std::fs::copy(plane.kubeconfig(), &kubeconfig)?;
    let client = plane.client().await?;

    println!("demo: installing the CRD from deploy/crd");
    kubectl(
        &plane,
        &[
            "apply",
            "--server-side",
            "-k",
            &root.join("deploy/crd").display().to_string(),
        ],
    )?;
    kubectl(
        &plane,
        &[
            "wait",
            "--for=condition=Established",
            "crd/databases.mycompany.io",
            "--timeout=60s",
        ],
    )?;

    println!("demo: issuing a certificate for the webhook and starting it");
    let ca = TestCa::new("database-demo-ca")?;
    let serving = ca.issue_server(&["127.0.0.1", "localhost"])?;
    let cert_dir = plane.dir().join("webhook-certs");
    std::fs::create_dir_all(&cert_dir)?;
    std::fs::write(cert_dir.join("tls.crt"), &serving.cert_pem)?;
    std::fs::write(cert_dir.join("tls.key"), &serving.key_pem)?;
    let webhook_port = free_port()?;
    let bin = root.join("target/debug");
    let webhook_args = vec![
        format!("--bind-address=127.0.0.1:{webhook_port}"),
        format!("--cert-dir={}", cert_dir.display()),
        "--log-format=plain".to_owned(),
    ];
    let _webhook = Process::spawn("webhook", &bin.join("webhook"), &webhook_args, plane.dir())?;
    wait_for_port(webhook_port).await?;
    register_webhooks(
        &client,
        &root.join("deploy/webhook"),
        webhook_port,
        ca.cert_pem(),
    )
    .await?;

    println!("demo: starting the controller");
    let controller_args = vec![
        format!("--kubeconfig={}", plane.kubeconfig().display()),
        format!("--metrics-bind-address=127.0.0.1:{}", free_port()?),
        format!("--health-probe-bind-address=127.0.0.1:{}", free_port()?),
        "--log-format=plain".to_owned(),
    ];
    let _controller = Process::spawn(
        "controller",
        &bin.join("controller"),
        &controller_args,
        plane.dir(),
    )?;

    println!("demo: applying deploy/samples in namespace {NAMESPACE}");
    kubectl(&plane, &["create", "namespace", NAMESPACE])?;
    let samples = root.join("deploy/samples").display().to_string();
    // The API server picks up new webhook configurations through an informer: retry
    // until the webhook answers.
    let applied =
        retry(|| kubectl_output(&plane, &["apply", "-n", NAMESPACE, "-k", &samples])).await?;
    // The webhook's warnings (e.g. replicas that do not replicate) come on stderr.
    print!("{}{}", applied.0, applied.1);

    wait_until_running(&client).await?;
    println!(
        "\ndemo: every sample is Running ({:.0?} after start)\n",
        started.elapsed()
    );
    print!("{}", kubectl(&plane, &["get", "db", "-A", "-o", "wide"])?);
    println!(
        "\nTry it (in another terminal):
  export KUBECONFIG={kubeconfig}
  kubectl get db -A -w
  kubectl scale db sample-postgres -n {NAMESPACE} --replicas=3
  kubectl patch db sample-mysql -n {NAMESPACE} --type=merge -p '{{\"spec\":{{\"version\":\"9.1\"}}}}'
  kubectl patch db sample-postgres -n {NAMESPACE} --type=merge -p '{{\"spec\":{{\"version\":\"12\"}}}}'   # refused by the webhook
  kubectl get secret sample-postgres-connection -n {NAMESPACE} -o jsonpath='{{.data.uri}}' | base64 -d
  kubectl delete db sample-mongodb -n {NAMESPACE}
Logs: {logs}/controller.log and {logs}/webhook.log",
        kubeconfig = kubeconfig.display(),
        logs = plane.dir().display(),
    );
    if args.exit_when_ready {
        return Ok(());
    }
    println!("\nPress Ctrl-C to stop everything.");
    tokio::signal::ctrl_c().await?;
    println!("demo: stopping");
    Ok(())
}

/// Applies the webhook configurations from `deploy/webhook`, pointed at the local
/// webhook by URL (a Service cannot be reached without a Pod network) and trusting `ca`.
async fn register_webhooks(client: &Client, dir: &Path, port: u16, ca: &str) -> anyhow::Result<()> {
    let ca_bundle = ByteString(ca.as_bytes().to_vec());
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
    let params = PatchParams::apply("database-demo").force();
    let mut validating: ValidatingWebhookConfiguration = read_yaml(&dir.join("validating.yaml"))?;
    for webhook in validating.webhooks.iter_mut().flatten() {
        local(&mut webhook.client_config);
    }
    let api: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    api.patch(&validating.name_any(), &params, &Patch::Apply(&validating))
        .await?;
    let mut mutating: MutatingWebhookConfiguration = read_yaml(&dir.join("mutating.yaml"))?;
    for webhook in mutating.webhooks.iter_mut().flatten() {
        local(&mut webhook.client_config);
    }
    let api: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    api.patch(&mutating.name_any(), &params, &Patch::Apply(&mutating))
        .await?;
    Ok(())
}

fn read_yaml<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

async fn wait_until_running(client: &Client) -> anyhow::Result<()> {
    let api: Api<Database> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let list = api.list(&ListParams::default()).await?;
        let pending: Vec<String> = list
            .items
            .iter()
            .filter(|db| db.status.as_ref().is_none_or(|s| s.phase != Phase::Running))
            .map(|db| {
                format!(
                    "{} ({:?})",
                    db.name_any(),
                    db.status.as_ref().map(|s| s.phase)
                )
            })
            .collect();
        if !list.items.is_empty() && pending.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("samples not Running after {TIMEOUT:?}: {pending:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn kubectl(plane: &ControlPlane, args: &[&str]) -> anyhow::Result<String> {
    Ok(kubectl_output(plane, args)?.0)
}

/// Runs kubectl; on success returns its stdout and stderr.
fn kubectl_output(plane: &ControlPlane, args: &[&str]) -> anyhow::Result<(String, String)> {
    let output = plane.kubectl()?.args(args).output()?;
    if !output.status.success() {
        bail!(
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok((
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

async fn retry<T>(mut attempt: impl FnMut() -> anyhow::Result<T>) -> anyhow::Result<T> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match attempt() {
            Ok(value) => return Ok(value),
            Err(err) if Instant::now() < deadline => {
                tracing::debug!(error = %err, "retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(err) => return Err(err),
        }
    }
}

async fn wait_for_port(port: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        if Instant::now() > deadline {
            bail!("nothing listens on 127.0.0.1:{port}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
