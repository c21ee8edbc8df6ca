//! The TLS configuration: TLS 1.2 and 1.3 with the ring provider, HTTP/1.1 only, and
//! the serving certificate reloaded from its files whenever they change.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate and key cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("no PEM certificate in the certificate file")]
    NoCertificate,
    #[error("parsing PEM: {0}")]
    Pem(#[from] rustls::pki_types::pem::Error),
    #[error("building the TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The certificate and key files, `tls.crt` and `tls.key` in the certificate folder (the
/// names of a `kubernetes.io/tls` Secret mounted as a volume).
#[derive(Clone, Debug)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl CertFiles {
    /// `tls.crt` and `tls.key` in `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        Self {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }

    /// Both files' contents, read together so a change can be noticed by comparing them.
    pub fn read(&self) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|source| TlsError::Read {
                path: path.to_owned(),
                source,
            })
        };
        Ok((read(&self.cert)?, read(&self.key)?))
    }
}

/// A server configuration for `cert_pem` (a chain, leaf first) and `key_pem`. Only TLS
/// 1.3 and 1.2 are offered, and ALPN offers only `http/1.1`: the server speaks HTTP/1.1
/// only, and axum-server's own PEM loaders would also offer `h2`. rustls refuses a key
/// that does not match the certificate, so a half-replaced pair is never served.
pub fn server_config(cert_pem: &[u8], key_pem: &[u8]) -> Result<ServerConfig, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem).collect::<Result<Vec<_>, _>>()?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Loads the files into a reloadable configuration, returning what was loaded so that
/// [`watch`] can tell when it changes.
pub fn load(files: &CertFiles) -> Result<(RustlsConfig, Loaded), TlsError> {
    let (cert, key) = files.read()?;
    let config = server_config(&cert, &key)?;
    Ok((
        RustlsConfig::from_config(Arc::new(config)),
        Loaded { cert, key },
    ))
}

/// The file contents behind the configuration being served.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// Polls the files every `interval` and swaps in a new configuration when their
/// contents change. Contents rather than modification times are compared: kubelet
/// updates a mounted Secret by swapping a symlink, which leaves the files' own times
/// alone. New handshakes get the new certificate; open connections keep theirs, so no
/// request in flight fails. A pair that does not load (half written, key not matching)
/// is tried again at the next poll while the old one keeps being served.
pub async fn watch(config: RustlsConfig, files: CertFiles, mut loaded: Loaded, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let (cert, key) = match files.read() {
            Ok(contents) => contents,
            Err(err) => {
                tracing::warn!(error = %err, "cannot read the serving certificate; keeping the current one");
                continue;
            }
        };
        if cert == loaded.cert && key == loaded.key {
            continue;
        }
        match server_config(&cert, &key) {
            Ok(new) => {
                config.reload_from_config(Arc::new(new));
                loaded = Loaded { cert, key };
                tracing::info!(cert = %files.cert.display(), "reloaded the serving certificate");
            }
            Err(err) => {
                tracing::warn!(error = %err, "the new serving certificate does not load yet; keeping the current one");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (String, String) {
        let ca = testenv::TestCa::new("test").expect("ca");
        let leaf = ca.issue_server(&["127.0.0.1"]).expect("leaf");
        (leaf.cert_pem, leaf.key_pem)
    }

    #[test]
    fn only_tls_1_2_and_1_3_and_only_http_1_1_are_offered() {
        let (cert, key) = pair();
        let config = server_config(cert.as_bytes(), key.as_bytes()).expect("config");
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
        let suites: Vec<_> = config
            .crypto_provider()
            .cipher_suites
            .iter()
            .map(|suite| suite.version().version)
            .collect();
        assert!(suites.contains(&rustls::ProtocolVersion::TLSv1_3));
        assert!(suites.contains(&rustls::ProtocolVersion::TLSv1_2));
        assert!(suites.iter().all(|v| matches!(
            v,
            rustls::ProtocolVersion::TLSv1_2 | rustls::ProtocolVersion::TLSv1_3
        )));
    }

    #[test]
    fn a_key_that_does_not_match_the_certificate_is_refused() {
        let (cert, _) = pair();
        let (_, other_key) = pair();
        assert!(server_config(cert.as_bytes(), other_key.as_bytes()).is_err());
    }

    #[test]
    fn an_empty_or_garbage_file_is_refused() {
        let (cert, key) = pair();
        assert!(matches!(
            server_config(b"", key.as_bytes()),
            Err(TlsError::NoCertificate)
        ));
        assert!(server_config(cert.as_bytes(), b"garbage").is_err());
    }
}
