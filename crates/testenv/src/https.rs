//! An HTTP/1.1 client over TLS that trusts one CA, for talking to the admission
//! webhook on loopback the way kube-apiserver does: keep-alive connections, ALPN
//! `http/1.1`, TLS 1.2 or 1.3.

use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::Value;

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

/// What went wrong building a client or sending a request.
#[derive(Debug, thiserror::Error)]
pub enum HttpsError {
    #[error("CA certificate: {0}")]
    Ca(String),
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("connecting: {0}")]
    Connect(#[from] std::io::Error),
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    #[error("request: {0}")]
    Request(#[from] hyper::http::Error),
}

impl TlsClient {
    /// TLS 1.3 and 1.2, ALPN `http/1.1`.
    pub fn new(ca_pem: &str) -> Result<Self, HttpsError> {
        Self::with_versions(ca_pem, &[&rustls::version::TLS13, &rustls::version::TLS12])
    }

    pub fn with_versions(
        ca_pem: &str,
        versions: &[&'static rustls::SupportedProtocolVersion],
    ) -> Result<Self, HttpsError> {
        Self::with_config(ca_pem, versions, vec![b"http/1.1".to_vec()])
    }

    pub fn with_config(
        ca_pem: &str,
        versions: &[&'static rustls::SupportedProtocolVersion],
        alpn: Vec<Vec<u8>>,
    ) -> Result<Self, HttpsError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(cert.map_err(|e| HttpsError::Ca(e.to_string()))?)?;
        }
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(versions)?
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = alpn;
        Ok(Self {
            connector: tokio_rustls::TlsConnector::from(Arc::new(config)),
        })
    }

    /// Opens one keep-alive connection to `addr`, checking the certificate for its IP.
    pub async fn connect(&self, addr: SocketAddr) -> Result<Connection, HttpsError> {
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
        let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls)).await?;
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
    ) -> Result<(u16, Vec<u8>), HttpsError> {
        self.sender.ready().await?;
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1");
        if let Some(content_type) = content_type {
            request = request.header("content-type", content_type);
        }
        let request = request.body(Full::new(Bytes::from(body)))?;
        let response = self.sender.send_request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes().to_vec();
        Ok((status, body))
    }

    /// GETs `path`, with `Authorization: Bearer <token>` when a token is given.
    pub async fn get(
        &mut self,
        path: &str,
        token: Option<&str>,
    ) -> Result<(u16, Vec<u8>), HttpsError> {
        self.sender.ready().await?;
        let mut request = hyper::Request::builder()
            .method("GET")
            .uri(path)
            .header("host", "127.0.0.1");
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let response = self
            .sender
            .send_request(request.body(Full::new(Bytes::new()))?)
            .await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes().to_vec();
        Ok((status, body))
    }

    /// POSTs an AdmissionReview body as JSON; the answer is `Null` when it is not JSON.
    pub async fn review(&mut self, path: &str, body: &Value) -> Result<(u16, Value), HttpsError> {
        let bytes = serde_json::to_vec(body).unwrap_or_default();
        let (status, body) = self
            .send("POST", path, Some("application/json"), bytes)
            .await?;
        Ok((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
    }
}

/// An AdmissionReview for `operation` on a Database with `spec`.
pub fn admission_review(uid: &str, operation: &str, spec: &Value) -> Value {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": uid, "operation": operation,
            "object": {"apiVersion": "mycompany.io/v1", "kind": "Database",
                       "metadata": {"name": "orders-db", "namespace": "production"}, "spec": spec}}
    })
}
