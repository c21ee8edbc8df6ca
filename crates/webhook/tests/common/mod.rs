//! Shared by the acceptance tests: the webhook served over real TLS on loopback with a
//! certificate from a test CA, testenv's TLS client that trusts that CA, and the webhook
//! configurations of deploy/webhook pointed at the loopback server.

// Each test binary uses a part of these helpers.
#![allow(dead_code, unused_imports)]

pub mod cluster;
pub mod deploy;
pub mod secret_volume;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use database_api::validation::Limits;
use database_webhook::AppState;
use database_webhook::server::{ServeOptions, Server};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use testenv::TestCa;
pub use testenv::https::{Connection, TlsClient};
use tokio::sync::oneshot;

/// How often the test server checks its certificate files.
pub const RELOAD_INTERVAL: Duration = Duration::from_millis(100);

/// A webhook server on `127.0.0.1:<port>` with a certificate for `127.0.0.1`.
pub struct Webhook {
    pub addr: SocketAddr,
    pub ca: TestCa,
    dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Webhook {
    /// Starts serving; call it inside a tokio runtime.
    pub fn start() -> Self {
        let ca = TestCa::new("webhook-test-ca").expect("test CA");
        let dir = tempfile::tempdir().expect("temp dir");
        let webhook = Self {
            addr: "127.0.0.1:0".parse().expect("address"),
            ca,
            dir,
            stop: None,
            task: None,
        };
        webhook.issue_certificate();
        webhook.serve_on(std::net::TcpListener::bind("127.0.0.1:0").expect("bind"))
    }

    fn serve_on(mut self, listener: std::net::TcpListener) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let server = Server::new(
            listener,
            ServeOptions {
                cert_dir: self.dir.path().to_owned(),
                reload_interval: RELOAD_INTERVAL,
            },
        )
        .expect("server loads its certificate");
        self.addr = server.local_addr().expect("address");
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(async move {
            let shutdown = async move {
                let _ = stopped.await;
            };
            server
                .run(AppState::new(Limits::default()), shutdown)
                .await
                .expect("server runs");
        });
        self.stop = Some(stop);
        self.task = Some(task);
        self
    }

    /// Writes a new serving certificate for 127.0.0.1 into the certificate folder,
    /// replacing each file by a rename as kubelet's atomic Secret update does.
    pub fn issue_certificate(&self) -> String {
        let leaf = self
            .ca
            .issue_server(&["127.0.0.1"])
            .expect("serving certificate");
        write_atomically(&self.cert_dir().join("tls.key"), &leaf.key_pem);
        write_atomically(&self.cert_dir().join("tls.crt"), &leaf.cert_pem);
        leaf.cert_pem
    }

    pub fn cert_dir(&self) -> PathBuf {
        self.dir.path().to_owned()
    }

    pub fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.addr)
    }

    /// Stops serving and waits until the port is closed.
    pub async fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

fn write_atomically(path: &Path, contents: &str) {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, contents).expect("write");
    std::fs::rename(&temporary, path).expect("rename");
}

/// The DER of the first certificate in `pem`.
pub fn der_of(pem: &str) -> Vec<u8> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .expect("a certificate")
        .expect("PEM")
        .to_vec()
}

pub use testenv::https::admission_review as review;
