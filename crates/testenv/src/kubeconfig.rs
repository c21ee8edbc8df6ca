//! Kubeconfig files for the local control plane.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::pki::CertifiedKey;

/// A kubeconfig with one cluster, one user (client certificate) and one context.
pub fn render(server: &str, ca_pem: &str, user: &str, credentials: &CertifiedKey) -> String {
    let ca = STANDARD.encode(ca_pem);
    let cert = STANDARD.encode(&credentials.cert_pem);
    let key = STANDARD.encode(&credentials.key_pem);
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
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: testenv
  context:
    cluster: testenv
    user: {user}
current-context: testenv
"
    )
}

/// A kubeconfig whose user authenticates with a bearer token.
pub fn render_token(server: &str, ca_pem: &str, user: &str, token: &str) -> String {
    let ca = STANDARD.encode(ca_pem);
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
    token: {token}
contexts:
- name: testenv
  context:
    cluster: testenv
    user: {user}
current-context: testenv
"
    )
}
