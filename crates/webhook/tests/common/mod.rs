//! The webhook served over real TLS on loopback with a certificate from a test CA, for
//! the acceptance tests that call it (testenv's TLS client trusts that CA).

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use database_api::validation::Limits;
use database_webhook::AppState;
use database_webhook::server::{ServeOptions, Server};
use testenv::TestCa;
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

    /// Stops serving; the future it returns ends once the port is closed.
    pub fn stop(&mut self) -> impl Future<Output = ()> + use<> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take();
        async move {
            if let Some(task) = task {
                let _ = task.await;
            }
        }
    }
}

impl Drop for Webhook {
    /// Stops serving, without waiting for the port to close.
    fn drop(&mut self) {
        drop(self.stop());
    }
}

fn write_atomically(path: &Path, contents: &str) {
    let temporary = path.with_extension("tmp");
    std::fs::write(&temporary, contents).expect("write");
    std::fs::rename(&temporary, path).expect("rename");
}
