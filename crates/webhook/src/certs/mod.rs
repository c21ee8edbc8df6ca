//! Certificates for the webhook without cert-manager: `webhook certs bootstrap` creates a
//! self-signed CA and a serving certificate for the Service, keeps them in a
//! `kubernetes.io/tls` Secret, and writes the CA into both webhook configurations.

mod bootstrap;
mod issue;
mod verify;

pub use bootstrap::{BootstrapError, BootstrapOptions, Outcome, bootstrap};
pub use issue::{Bundle, issue, service_dns_names};
pub use verify::{RENEW_BEFORE, check};
