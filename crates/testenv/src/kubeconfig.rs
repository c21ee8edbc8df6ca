//! Kubeconfig files for the local control plane.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::pki::CertifiedKey;

/// How a kubeconfig's user proves who it is.
pub enum Credentials<'a> {
    ClientCertificate(&'a CertifiedKey),
    Token(&'a str),
}

/// A kubeconfig with one cluster, one user and one context.
pub fn render(server: &str, ca_pem: &str, user: &str, credentials: &Credentials<'_>) -> String {
    let ca = STANDARD.encode(ca_pem);
    let auth = match credentials {
        Credentials::ClientCertificate(key) => format!(
            "    client-certificate-data: {}\n    client-key-data: {}",
            STANDARD.encode(&key.cert_pem),
            STANDARD.encode(&key.key_pem)
        ),
        Credentials::Token(token) => format!("    token: {token}"),
    };
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {user}
  user:
{auth}
contexts:
- name: testenv
  context:
    cluster: testenv
    user: {user}
current-context: testenv
"
    )
}
