//! Serving the router over TLS: HTTP/1.1 only, bounded handshakes and header reads,
//! certificate reload in the background, graceful shutdown.

use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use axum_server::Handle;
use axum_server::accept::NoDelayAcceptor;
use axum_server::tls_rustls::RustlsAcceptor;

use crate::http::{AppState, router};
use crate::tls::{self, CertFiles, TlsError};

/// Longest TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for a request's headers, on a new connection and between keep-alive
/// requests; a client that opens a connection and says nothing is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long open connections may finish their requests after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Where and how to serve.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Folder with `tls.crt` and `tls.key`.
    pub cert_dir: PathBuf,
    /// How often the certificate files are checked for a change.
    pub reload_interval: Duration,
}

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("loading the serving certificate: {0}")]
    Certificate(#[from] TlsError),
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// A bound listener with its certificate loaded, ready to [`Server::run`].
pub struct Server {
    listener: TcpListener,
    config: axum_server::tls_rustls::RustlsConfig,
    loaded: tls::Loaded,
    files: CertFiles,
    options: ServeOptions,
}

impl Server {
    /// Loads the certificate (failing early when it is missing) for `listener`.
    pub fn new(listener: TcpListener, options: ServeOptions) -> Result<Self, ServeError> {
        let files = CertFiles::in_dir(&options.cert_dir);
        let (config, loaded) = tls::load(&files)?;
        Ok(Self {
            listener,
            config,
            loaded,
            files,
            options,
        })
    }

    /// The address being listened on.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `state`'s router until `shutdown` completes, then lets open requests finish.
    pub async fn run(
        self,
        state: AppState,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let reload = tokio::spawn(tls::watch(
            self.config.clone(),
            self.files,
            self.loaded,
            self.options.reload_interval,
        ));
        let handle = Handle::new();
        let stopper = handle.clone();
        tokio::spawn(async move {
            shutdown.await;
            tracing::info!("shutting down");
            stopper.graceful_shutdown(Some(SHUTDOWN_GRACE));
        });
        let mut server = axum_server::from_tcp(self.listener)?
            .acceptor(
                RustlsAcceptor::new(self.config)
                    .handshake_timeout(HANDSHAKE_TIMEOUT)
                    // Without TCP_NODELAY a response written in more than one segment
                    // can wait for the client's delayed ACK: a 40 ms stall.
                    .acceptor(NoDelayAcceptor::new()),
            )
            .handle(handle)
            .http1_only()
            .first_request_timeout(HEADER_READ_TIMEOUT);
        server
            .http_builder()
            .http1()
            .header_read_timeout(HEADER_READ_TIMEOUT);
        let result = server.serve(router(state).into_make_service()).await;
        reload.abort();
        Ok(result?)
    }
}
