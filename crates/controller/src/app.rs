//! The controller process: client, probes and metrics servers, optional leader
//! election, and the reconcile loop, all stopped by one shutdown signal.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::routing::get;
use futures::FutureExt;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use operator_runtime::leader::{LeaderElector, LeaseSettings};
use operator_runtime::ratelimit::RateLimitLayer;

use crate::cli::Cli;
use crate::context::{Context, Settings};
use crate::metrics::Metrics;
use crate::metrics_server::access::Gate;
use crate::metrics_server::{self, Serving};
use crate::resources::BuildConfig;
use crate::runner::{Scope, run as run_controller};

/// Runs until `shutdown` resolves (then drains reconciles and releases the Lease) or
/// until leadership is lost (an error: the process should exit and be restarted).
pub async fn run(
    cli: Cli,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let shutdown = shutdown.shared();
    let (client, exec) = clients(&cli).await?;
    let metrics = Arc::new(Metrics::default());
    serve_http(&cli, &client, metrics.clone(), shutdown.clone()).await?;
    let identity = cli.identity.clone().unwrap_or_else(hostname);
    let settings = settings(&cli, &client).await;
    let mut ctx = Context::new(client.clone(), settings, metrics, Some(identity.clone()));
    ctx.exec = Some(exec);
    let ctx = Arc::new(ctx);
    let scope = if cli.namespaces.is_empty() {
        Scope::AllNamespaces
    } else {
        Scope::Namespaces(cli.namespaces.clone())
    };
    let reconciling = run_controller(
        ctx.clone(),
        scope,
        cli.max_concurrent_reconciles,
        shutdown.clone(),
    );
    if !cli.leader_elect {
        tracing::info!("starting without leader election");
        reconciling.await;
        return Ok(());
    }
    let lease = lease_settings(&cli, &identity);
    tracing::info!(identity = %identity, lease = %cli.leader_election_id, "leader election on");
    lead(
        LeaderElector::new(client, lease),
        &ctx.metrics,
        reconciling,
        shutdown,
    )
    .await
}

/// The controller's settings from its flags, and from its own Pod where a flag is unset.
async fn settings(cli: &Cli, client: &Client) -> Settings {
    Settings {
        build: BuildConfig {
            image_registry: cli.image_registry.clone(),
            cluster_domain: cli.cluster_domain.clone(),
        },
        max_storage_gi: cli.max_storage_gi,
        before_reconcile: None,
        backup_agent_image: match &cli.backup_agent_image {
            Some(image) => Some(image.clone()),
            None => own_image(client).await,
        },
    }
}

fn lease_settings(cli: &Cli, identity: &str) -> LeaseSettings {
    let mut lease = LeaseSettings::new(
        &cli.leader_election_id,
        &cli.leader_election_namespace,
        identity,
    );
    lease.lease_duration = Duration::from_secs(cli.lease_duration_seconds);
    lease.renew_deadline = Duration::from_secs(cli.renew_deadline_seconds);
    lease.retry_period = Duration::from_secs(cli.retry_period_seconds);
    lease
}

/// Waits for the Lease, then reconciles while holding it; releases it after a clean
/// shutdown, and fails when it is lost.
async fn lead(
    mut elector: LeaderElector,
    metrics: &Metrics,
    reconciling: impl Future<Output = ()>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tracing::info!("waiting for the leader Lease");
    tokio::select! {
        () = elector.acquire() => {}
        () = shutdown => return Ok(()),
    }
    tracing::info!("acquired the leader Lease; reconciling");
    metrics.leader.set(1);
    let lost = tokio::select! {
        () = reconciling => false,
        () = elector.hold() => true,
    };
    metrics.leader.set(0);
    if lost {
        anyhow::bail!("lost the leader Lease; stopping so a standby takes over");
    }
    elector.release().await;
    tracing::info!("released the leader Lease");
    Ok(())
}

/// The API client, and one on kube's own HTTP/1.1 stack for `exec` (a WebSocket
/// upgrade), both behind the same rate limit.
pub async fn clients(cli: &Cli) -> anyhow::Result<(Client, Client)> {
    let config = match &cli.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?
        }
        None => Config::infer().await?,
    };
    let limit = RateLimitLayer::new(cli.kube_api_qps, cli.kube_api_burst);
    let exec = kube::client::ClientBuilder::try_from(config.clone())?
        .with_layer(&limit)
        .build();
    Ok((operator_runtime::client::build(config, &limit)?, exec))
}

async fn serve_http(
    cli: &Cli,
    client: &Client,
    metrics: Arc<Metrics>,
    shutdown: impl Future<Output = ()> + Clone + Send + 'static,
) -> anyhow::Result<()> {
    let address = cli.metrics_bind_address;
    let listener =
        std::net::TcpListener::bind(address).with_context(|| format!("binding {address}"))?;
    let serving = if cli.metrics_secure {
        Serving::Secure {
            cert_dir: cli.metrics_cert_dir.clone(),
            gate: Arc::new(Gate::new(client.clone())),
        }
    } else {
        Serving::Plain
    };
    metrics_server::serve(listener, metrics, serving, shutdown.clone())?;
    let probes = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(|| async { "ok" }));
    let address = cli.health_probe_bind_address;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("binding {address}"))?;
    tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, probes)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(error = %err, "HTTP server failed");
        }
    });
    Ok(())
}

/// The image of the container this controller runs in, read from its own Pod; `None`
/// outside a Pod or when the Pod cannot be read.
async fn own_image(client: &Client) -> Option<String> {
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::{Api, ListParams};

    let name = std::env::var("POD_NAME").ok()?;
    let namespace = std::env::var("POD_NAMESPACE").ok()?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    // A list by name: the controller's role lists Pods but does not get them.
    let list = pods
        .list(&ListParams::default().fields(&format!("metadata.name={name}")))
        .await
        .map_err(|err| tracing::warn!(error = %err, "could not read the controller's own Pod; backups need --backup-agent-image"))
        .ok()?;
    let spec = list.items.into_iter().next()?.spec?;
    let image = spec
        .containers
        .iter()
        .find(|c| c.name == "controller")
        .or(spec.containers.first())?
        .image
        .clone()?;
    tracing::info!(image = %image, "backup Jobs run the agent from the controller's own image");
    Some(image)
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| format!("controller-{}", std::process::id()))
}
