//! `cargo xtask demo`: the whole product on one machine. A full local control plane, the
//! CRD and webhook configurations from `deploy/`, a throw-away CA for the webhook, the
//! webhook and the controller as local processes, and the samples from `deploy/samples`
//! running until every Database is Running. Ctrl-C stops it all.
//!
//! `--real` runs the same on a real node (kubelet, containerd, kube-proxy, CoreDNS),
//! where one Database per engine runs its real server from the locally built images.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::bail;
use database_api::{Database, Phase};
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use testenv::process::Process;
use testenv::{ControlPlane, Options, free_port};

use crate::local_webhook::LocalWebhook;

const NAMESPACE: &str = "demo";
const TIMEOUT: Duration = Duration::from_secs(180);

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Exit once every sample is Running instead of waiting for Ctrl-C (for CI).
    #[arg(long)]
    pub exit_when_ready: bool,
    /// Run real database servers on a real node (needs root; see the README).
    #[arg(long)]
    pub real: bool,
}

/// One Database per engine at a version the locally built images serve.
const REAL_SAMPLES: &str = "apiVersion: mycompany.io/v1
kind: Database
metadata: {name: sample-postgres}
spec: {engine: postgres, version: \"17\", storage: 1Gi}
---
apiVersion: mycompany.io/v1
kind: Database
metadata: {name: sample-mysql}
spec: {engine: mysql, version: \"9.7\", storage: 1Gi}
---
apiVersion: mycompany.io/v1
kind: Database
metadata: {name: sample-mongodb}
spec: {engine: mongodb, version: \"6.0\", storage: 1Gi, deletionPolicy: Delete}
";

pub fn run(args: &DemoArgs) -> anyhow::Result<()> {
    if args.real {
        crate::control_plane::ensure_built(crate::control_plane::Tier::Real)?;
        crate::images::ensure_built(&[])?;
    } else {
        crate::control_plane::ensure_built(crate::control_plane::Tier::Full)?;
    }
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
    let plane = start_plane(args.real).await?;
    let root = crate::workspace_root();
    let demo_dir = root.join("target/demo");
    std::fs::create_dir_all(&demo_dir)?;
    let kubeconfig = demo_dir.join("kubeconfig");
    std::fs::copy(plane.kubeconfig(), &kubeconfig)?;
    let client = plane.client().await?;

    install_crd(&plane, &root)?;

    println!("demo: issuing a certificate for the webhook and starting it");
    let bin = root.join("target/debug");
    let webhook = LocalWebhook::spawn(&plane, &bin)?;
    webhook.wait_ready(Duration::from_secs(30)).await?;
    webhook.register(&client).await?;

    let _controller = start_controller(&plane, &bin)?;
    apply_samples(&plane, args.real, &demo_dir, &root).await?;

    wait_until_running(&client).await?;
    println!(
        "\ndemo: every sample is Running ({:.0?} after start)\n",
        started.elapsed()
    );
    print!("{}", kubectl(&plane, &["get", "db", "-A", "-o", "wide"])?);
    if args.real {
        print_real_hints(&kubeconfig, plane.dir());
    } else {
        print_hints(&kubeconfig, plane.dir());
    }
    if args.exit_when_ready {
        return Ok(());
    }
    println!("\nPress Ctrl-C to stop everything.");
    tokio::signal::ctrl_c().await?;
    println!("demo: stopping");
    Ok(())
}

/// Starts the full control plane, with a real node serving every local image when
/// `real`, or with kwok otherwise.
async fn start_plane(real: bool) -> anyhow::Result<ControlPlane> {
    if real {
        println!(
            "demo: starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and a real node"
        );
        let images: Vec<&str> = testenv::images::all().map(|r| r.id).collect();
        Ok(ControlPlane::start(Options::real(&images)).await?)
    } else {
        println!(
            "demo: starting etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok"
        );
        Ok(ControlPlane::start(Options::full()).await?)
    }
}

/// Applies the CRD from `deploy/crd` and waits until the API server serves it.
fn install_crd(plane: &ControlPlane, root: &std::path::Path) -> anyhow::Result<()> {
    println!("demo: installing the CRD from deploy/crd");
    kubectl(
        plane,
        &[
            "apply",
            "--server-side",
            "-k",
            &root.join("deploy/crd").display().to_string(),
        ],
    )?;
    kubectl(
        plane,
        &[
            "wait",
            "--for=condition=Established",
            "crd/databases.mycompany.io",
            "--timeout=60s",
        ],
    )?;
    Ok(())
}

/// Starts the controller from `bin` as a local process; it runs until dropped.
fn start_controller(plane: &ControlPlane, bin: &std::path::Path) -> anyhow::Result<Process> {
    println!("demo: starting the controller");
    let controller_args = vec![
        format!("--kubeconfig={}", plane.kubeconfig().display()),
        format!("--metrics-bind-address=127.0.0.1:{}", free_port()?),
        format!("--health-probe-bind-address=127.0.0.1:{}", free_port()?),
        "--log-format=plain".to_owned(),
    ];
    Ok(Process::spawn(
        "controller",
        &bin.join("controller"),
        &controller_args,
        plane.dir(),
    )?)
}

/// Creates the demo namespace and applies the samples into it: one Database per engine
/// when `real`, `deploy/samples` otherwise. Prints kubectl's answer.
async fn apply_samples(
    plane: &ControlPlane,
    real: bool,
    demo_dir: &std::path::Path,
    root: &std::path::Path,
) -> anyhow::Result<()> {
    kubectl(plane, &["create", "namespace", NAMESPACE])?;
    let samples = if real {
        println!("demo: applying one Database per engine in namespace {NAMESPACE}");
        let file = demo_dir.join("samples.yaml");
        std::fs::write(&file, REAL_SAMPLES)?;
        vec!["-f".to_owned(), file.display().to_string()]
    } else {
        println!("demo: applying deploy/samples in namespace {NAMESPACE}");
        vec![
            "-k".to_owned(),
            root.join("deploy/samples").display().to_string(),
        ]
    };
    // The API server picks up new webhook configurations through an informer: retry
    // until the webhook answers.
    let applied = retry(|| {
        let mut apply = vec!["apply", "-n", NAMESPACE];
        apply.extend(samples.iter().map(String::as_str));
        kubectl_output(plane, &apply)
    })
    .await?;
    // The webhook's warnings (e.g. an end-of-life version) come on stderr.
    print!("{}{}", applied.0, applied.1);
    Ok(())
}

fn print_real_hints(kubeconfig: &std::path::Path, logs: &std::path::Path) {
    println!(
        "\nTry it (in another terminal):
  export KUBECONFIG={kubeconfig}
  kubectl get db,pods,pvc -n {NAMESPACE}
  kubectl exec -it sample-postgres-0 -n {NAMESPACE} -- psql -U postgres
  kubectl run client -n {NAMESPACE} --rm -it --image=postgres:17 --restart=Never \\
    --env=URI=$(kubectl get secret sample-postgres-connection -n {NAMESPACE} -o jsonpath='{{.data.uri}}' | base64 -d) -- sh -c 'psql \"$URI\"'
  kubectl patch db sample-postgres -n {NAMESPACE} --type=merge -p '{{\"spec\":{{\"storage\":\"2Gi\"}}}}'
  kubectl delete pod sample-postgres-0 -n {NAMESPACE}   # the new size reaches the server on restart
Logs: {logs}/controller.log, {logs}/webhook.log, and the node's in {logs}/node",
        kubeconfig = kubeconfig.display(),
        logs = logs.display(),
    );
}

fn print_hints(kubeconfig: &std::path::Path, logs: &std::path::Path) {
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
        logs = logs.display(),
    );
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
