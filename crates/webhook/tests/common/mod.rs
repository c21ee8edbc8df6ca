//! Shared by the acceptance tests: the webhook served over real TLS on loopback with a
//! certificate from a test CA, a TLS client that trusts that CA, and the webhook
//! configurations of deploy/webhook pointed at the loopback server.

// Each test binary uses a part of these helpers.
#![allow(dead_code)]

pub mod cluster;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use database_api::validation::Limits;
use database_webhook::AppState;
use database_webhook::server::{ServeOptions, Server};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;
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

/// A TLS client that trusts one CA and speaks HTTP/1.1.
#[derive(Clone)]
pub struct TlsClient {
    connector: tokio_rustls::TlsConnector,
}

/// One client connection, kept alive across requests.
pub struct Connection {
    sender: SendRequest<Full<Bytes>>,
    /// The leaf certificate the server presented.
    pub peer_certificate: Vec<u8>,
    /// The negotiated TLS version.
    pub version: Option<rustls::ProtocolVersion>,
}

impl TlsClient {
    pub fn new(ca_pem: &str) -> Self {
        Self::with_versions(ca_pem, &[&rustls::version::TLS13, &rustls::version::TLS12])
    }

    pub fn with_versions(
        ca_pem: &str,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> Self {
        Self::with_config(ca_pem, versions, vec![b"http/1.1".to_vec()])
    }

    pub fn with_config(
        ca_pem: &str,
        versions: &[&'static rustls::SupportedProtocolVersion],
        alpn: Vec<Vec<u8>>,
    ) -> Self {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.expect("CA PEM")).expect("CA certificate");
        }
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(versions)
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = alpn;
        Self {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        }
    }

    pub async fn connect(&self, addr: SocketAddr) -> std::io::Result<Connection> {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        let name = ServerName::IpAddress(addr.ip().into());
        let tls = self.connector.connect(name, tcp).await?;
        let (_, session) = tls.get_ref();
        let peer_certificate = session
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|cert| cert.to_vec())
            .unwrap_or_default();
        let version = session.protocol_version();
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(connection);
        Ok(Connection {
            sender,
            peer_certificate,
            version,
        })
    }
}

impl Connection {
    /// Sends one request and reads the whole answer.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Result<(u16, Vec<u8>), hyper::Error> {
        self.sender.ready().await?;
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1");
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let request = request.body(Full::new(Bytes::from(body))).expect("request");
        let response = self.sender.send_request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes().to_vec();
        Ok((status, body))
    }

    /// POSTs an AdmissionReview body as JSON.
    pub async fn review(&mut self, path: &str, body: &Value) -> Result<(u16, Value), hyper::Error> {
        let (status, body) = self
            .send(
                "POST",
                path,
                Some("application/json"),
                serde_json::to_vec(body).expect("json"),
            )
            .await?;
        Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    }
}

/// The DER of the first certificate in `pem`.
pub fn der_of(pem: &str) -> Vec<u8> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .expect("a certificate")
        .expect("PEM")
        .to_vec()
}

/// An AdmissionReview for `operation` on a Database with `spec`.
pub fn review(uid: &str, operation: &str, spec: &Value) -> Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": uid, "operation": operation,
            "object": {"apiVersion": "mycompany.io/v1", "kind": "Database",
                       "metadata": {"name": "orders-db", "namespace": "production"}, "spec": spec}}
    })
}
