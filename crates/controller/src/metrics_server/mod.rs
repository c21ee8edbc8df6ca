//! The `/metrics` endpoint: plain HTTP by default, or with `--metrics-secure` HTTPS
//! (TLS 1.2 and 1.3) that only callers the API server authenticates and authorises may
//! read (see [`access`]). The certificate comes from `--metrics-cert-dir` (`tls.crt`,
//! `tls.key`, reloaded when they change) or, without one, is a self-signed one made
//! at start that does not expire.

pub mod access;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum_server::tls_rustls::RustlsConfig;
use operator_runtime::tls::{self, CertFiles, TlsError};

use crate::metrics::Metrics;
use access::{Decision, Gate, METRICS_PATH};

/// How often the certificate files are read again.
const RELOAD_EVERY: Duration = Duration::from_secs(10);
/// How long a closing server waits for scrapes in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How the endpoint is served.
pub enum Serving {
    Plain,
    /// HTTPS with the certificate in `cert_dir` (self-signed without one), reading
    /// allowed by `gate`.
    Secure {
        cert_dir: Option<PathBuf>,
        gate: Arc<Gate>,
    },
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the metrics certificate does not load: {0}")]
    Tls(#[from] TlsError),
    #[error("making a self-signed metrics certificate failed: {0}")]
    SelfSigned(#[from] rcgen::Error),
    #[error("serving the metrics failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Serves `/metrics` on `listener` until `shutdown`, on the current Tokio runtime;
/// returns once it is listening.
pub fn serve(
    listener: std::net::TcpListener,
    metrics: Arc<Metrics>,
    serving: Serving,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let app = Router::new().route(
        METRICS_PATH,
        get(move || std::future::ready(encoded(&metrics))),
    );
    listener.set_nonblocking(true)?;
    match serving {
        Serving::Plain => {
            let listener = tokio::net::TcpListener::from_std(listener)?;
            tokio::spawn(async move {
                if let Err(err) = axum::serve(listener, app)
                    .with_graceful_shutdown(shutdown)
                    .await
                {
                    tracing::error!(error = %err, "the metrics server failed");
                }
            });
        }
        Serving::Secure { cert_dir, gate } => {
            let config = tls_config(cert_dir)?;
            let app = app.layer(middleware::from_fn_with_state(gate, only_allowed));
            let handle = axum_server::Handle::new();
            let stopper = handle.clone();
            tokio::spawn(async move {
                shutdown.await;
                stopper.graceful_shutdown(Some(SHUTDOWN_GRACE));
            });
            let server = axum_server::from_tcp_rustls(listener, config)?.handle(handle);
            tokio::spawn(async move {
                if let Err(err) = server.serve(app.into_make_service()).await {
                    tracing::error!(error = %err, "the metrics server failed");
                }
            });
        }
    }
    Ok(())
}

fn encoded(metrics: &Metrics) -> impl IntoResponse + use<> {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.encode(),
    )
}

/// Lets a request through only when the API server says its caller may read.
async fn only_allowed(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match gate.decide(authorization).await {
        Decision::Allowed => next.run(request).await,
        Decision::Unauthenticated => (
            StatusCode::UNAUTHORIZED,
            "Unauthorized: send a bearer token the Kubernetes API server accepts.\n",
        )
            .into_response(),
        Decision::Forbidden(user) => (
            StatusCode::FORBIDDEN,
            format!("Forbidden: {user} may not get {METRICS_PATH}; bind it to the metrics-reader ClusterRole.\n"),
        )
            .into_response(),
    }
}

/// The files' configuration, watched for changes, or a self-signed one.
fn tls_config(cert_dir: Option<PathBuf>) -> Result<RustlsConfig, ServeError> {
    if let Some(dir) = cert_dir {
        let files = CertFiles::in_dir(&dir);
        let (config, loaded) = tls::load(&files)?;
        tokio::spawn(tls::watch(config.clone(), files, loaded, RELOAD_EVERY));
        return Ok(config);
    }
    let names = vec!["localhost".to_owned()];
    let certified = rcgen::generate_simple_self_signed(names)?;
    let config = tls::server_config(
        certified.cert.pem().as_bytes(),
        certified.signing_key.serialize_pem().as_bytes(),
    )?;
    Ok(RustlsConfig::from_config(Arc::new(config)))
}
