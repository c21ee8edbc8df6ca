//! The `webhook` binary: serves the admission webhook over TLS, or with
//! `certs bootstrap` prepares its certificates without cert-manager.

use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use database_api::validation::{DEFAULT_MAX_STORAGE_GI, Limits};
use database_webhook::AppState;
use database_webhook::certs::{self, BootstrapOptions, Renewal};
use database_webhook::server::{ServeOptions, Server};
use operator_runtime::telemetry::{self, LogFormat};

#[derive(Parser)]
#[command(
    name = "webhook",
    version,
    about = "Validating and defaulting admission webhook for Database objects"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    serve: ServeArgs,
    /// Log line format.
    #[arg(long, env = "WEBHOOK_LOG_FORMAT", value_enum, default_value_t = LogFormat::Json, global = true)]
    log_format: LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Certificate management without cert-manager.
    Certs {
        #[command(subcommand)]
        command: CertsCommand,
    },
}

#[derive(Subcommand)]
enum CertsCommand {
    /// Create a CA and serving certificate in a kubernetes.io/tls Secret, or renew them
    /// when due (the CA with an overlap), and write the CAs to trust into both webhook
    /// configurations. Meant to run on a schedule; it writes nothing when nothing is due.
    Bootstrap(BootstrapArgs),
}

#[derive(Args)]
struct ServeArgs {
    /// Address the TLS server listens on.
    #[arg(long, env = "WEBHOOK_BIND_ADDRESS", default_value = "0.0.0.0:9443")]
    bind_address: SocketAddr,
    /// Folder holding tls.crt and tls.key; they are reloaded when they change.
    #[arg(
        long,
        env = "WEBHOOK_CERT_DIR",
        default_value = "/tmp/k8s-webhook-server/serving-certs"
    )]
    cert_dir: PathBuf,
    /// Largest spec.storage accepted, in gibibytes.
    #[arg(long, env = "WEBHOOK_MAX_STORAGE_GI", default_value_t = DEFAULT_MAX_STORAGE_GI)]
    max_storage_gi: u64,
    /// Seconds between checks of the certificate files for a change.
    #[arg(long, env = "WEBHOOK_CERT_RELOAD_SECONDS", default_value_t = 5)]
    cert_reload_seconds: u64,
}

#[derive(Args)]
struct BootstrapArgs {
    /// Namespace of the webhook's Service and Secret.
    #[arg(long, env = "WEBHOOK_NAMESPACE")]
    namespace: String,
    /// Name of the webhook's Service; the certificate names SVC.NS.svc[.cluster.local].
    #[arg(
        long,
        env = "WEBHOOK_SERVICE",
        default_value = "database-operator-webhook"
    )]
    service: String,
    /// Name of the kubernetes.io/tls Secret to keep the CA and certificate in.
    #[arg(long, env = "WEBHOOK_SECRET", default_value = "webhook-server-cert")]
    secret: String,
    /// ValidatingWebhookConfiguration to write the caBundle into.
    #[arg(
        long,
        env = "WEBHOOK_VALIDATING_CONFIG",
        default_value = "database-operator-validating-webhook"
    )]
    validating_config: String,
    /// MutatingWebhookConfiguration to write the caBundle into.
    #[arg(
        long,
        env = "WEBHOOK_MUTATING_CONFIG",
        default_value = "database-operator-mutating-webhook"
    )]
    mutating_config: String,
    /// How long a new CA is valid: a number and s, m, h or d.
    #[arg(long, env = "WEBHOOK_CA_VALIDITY", default_value = "3650d", value_parser = certs::parse_duration)]
    ca_validity: Duration,
    /// How long a new serving certificate is valid (never past its CA).
    #[arg(long, env = "WEBHOOK_SERVING_VALIDITY", default_value = "365d", value_parser = certs::parse_duration)]
    serving_validity: Duration,
    /// Renew a certificate once less than this share (percent) of its validity is left:
    /// the serving certificate by the same CA, the CA by a new one.
    #[arg(long, env = "WEBHOOK_RENEW_BEFORE_PERCENTAGE", default_value_t = 33,
          value_parser = clap::value_parser!(u8).range(1..=99))]
    renew_before_percentage: u8,
    /// How long each step of a CA rotation waits: a new CA is trusted this long before
    /// it signs the served certificate, and the old one still this long after. Longer
    /// than kubelet takes to update a Secret volume, plus --cert-reload-seconds.
    #[arg(long, env = "WEBHOOK_CA_OVERLAP", default_value = "1h", value_parser = certs::parse_duration)]
    ca_overlap: Duration,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // One crypto provider for the whole process, before anything builds a TLS config.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    // Logs, and OTLP traces when OTEL_EXPORTER_OTLP_ENDPOINT is set, as the controller.
    let _telemetry = telemetry::init(cli.log_format, "database-webhook")?;
    match cli.command {
        None => serve(cli.serve).await,
        Some(Command::Certs {
            command: CertsCommand::Bootstrap(args),
        }) => bootstrap(args).await,
    }
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let listener = TcpListener::bind(args.bind_address)
        .with_context(|| format!("binding {}", args.bind_address))?;
    let server = Server::new(
        listener,
        ServeOptions {
            cert_dir: args.cert_dir,
            reload_interval: Duration::from_secs(args.cert_reload_seconds.max(1)),
        },
    )?;
    tracing::info!(address = %args.bind_address, max_storage_gi = args.max_storage_gi, "serving");
    let state = AppState::new(Limits {
        max_storage_gi: args.max_storage_gi,
    });
    server.run(state, shutdown_signal()).await?;
    Ok(())
}

async fn bootstrap(args: BootstrapArgs) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("connecting to the API server")?;
    let outcome = certs::bootstrap_with(
        &client,
        &BootstrapOptions {
            namespace: args.namespace,
            service: args.service,
            secret: args.secret,
            validating_config: args.validating_config,
            mutating_config: args.mutating_config,
        },
        &Renewal {
            ca_validity: args.ca_validity,
            serving_validity: args.serving_validity,
            renew_before_percentage: args.renew_before_percentage,
            ca_overlap: args.ca_overlap,
        },
    )
    .await?;
    let steps: Vec<String> = outcome.steps.iter().map(ToString::to_string).collect();
    tracing::info!(
        ?steps,
        configurations_written = outcome.configurations_written,
        "bootstrap done"
    );
    Ok(())
}

/// Completes on SIGTERM (what kubelet sends) or Ctrl-C.
async fn shutdown_signal() {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        () = terminate => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
