//! The API client: HTTP/2 to the API server when it offers it (it does, over TLS), as
//! client-go does. Every request and watch then shares one connection; over HTTP/1.1
//! each request in flight needs its own, each with its own buffers and TLS state. kube's
//! client builder speaks HTTP/1.1 only; this one buys the benchmark's "controller memory
//! under 64 MiB with 10,000 Databases" and its converge times.

use std::time::Duration;

use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt as _};
use kube::{Client, Config};
use tower::retry::RetryLayer;
use tower::timeout::Timeout;
use tower::util::BoxCloneSyncService;
use tower::{BoxError, ServiceBuilder};
use tower_http::trace::{DefaultOnFailure, TraceLayer};

use crate::ratelimit::RateLimitLayer;

/// How often an idle HTTP/2 connection is pinged, and how long a ping may go
/// unanswered before the connection is dropped (client-go's defaults: 30 s and 15 s).
/// A dead connection is found in under a minute, rather than when the next watch
/// times out.
const PING_INTERVAL: Duration = Duration::from_secs(30);
const PING_TIMEOUT: Duration = Duration::from_secs(15);
/// HTTP/1.1 connections (a plain-HTTP API server, or one that does not offer HTTP/2)
/// idle for longer than this are closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Opens a TLS (or plain) connection to the API server.
pub type Connector = BoxCloneSyncService<
    http::Uri,
    hyper_rustls::MaybeHttpsStream<hyper_util::rt::TokioIo<tokio::net::TcpStream>>,
    BoxError,
>;

/// Builds the client from `config`, with client-side rate limiting in front.
///
/// A proxy in the kubeconfig is left to kube's own client stack, which speaks
/// HTTP/1.1 through it.
pub fn build(config: Config, limit: &RateLimitLayer) -> Result<Client, kube::Error> {
    if config.proxy_url.is_some() {
        return Ok(ClientBuilder::try_from(config)?.with_layer(limit).build());
    }
    let http = http_client(&config)?;
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        // A debug span per request, as kube's stack has; failures are the caller's to
        // report, so they are logged at debug too.
        .layer(
            TraceLayer::new_for_http()
                .on_failure(DefaultOnFailure::new().level(tracing::Level::DEBUG)),
        )
        .map_err(BoxError::from)
        .service(http);
    Ok(ClientBuilder::new(service, config.default_namespace)
        .with_layer(limit)
        .build())
}

/// The HTTP client under the kube stack: TLS from the kubeconfig, ALPN offering
/// HTTP/2 then HTTP/1.1, and HTTP/2 keep-alive pings.
pub fn http_client(config: &Config) -> Result<HttpClient<Connector, Body>, kube::Error> {
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_nodelay(true);
    let tls = config.rustls_client_config()?;
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http();
    let connector = match &config.tls_server_name {
        Some(name) => connector.with_server_name_resolver(
            hyper_rustls::FixedServerNameResolver::new(server_name(name)?),
        ),
        None => connector,
    };
    let connector = connector.enable_all_versions().wrap_connector(tcp);
    // One bound for the TCP connect and the TLS handshake together; once connected,
    // keep-alive pings watch the connection.
    let connector = match config.connect_timeout {
        Some(limit) => Connector::new(Timeout::new(connector, limit)),
        None => Connector::new(connector),
    };
    Ok(HttpClient::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(IDLE_TIMEOUT)
        .http2_keep_alive_interval(PING_INTERVAL)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .build(connector))
}

fn server_name(name: &str) -> Result<rustls::pki_types::ServerName<'static>, kube::Error> {
    rustls::pki_types::ServerName::try_from(name.to_owned())
        .map_err(|err| kube::Error::RustlsTls(kube::client::RustlsTlsError::InvalidServerName(err)))
}
