//! Certificates for the webhook without cert-manager: `webhook certs bootstrap` keeps a
//! self-signed CA and the Service's serving certificate in a `kubernetes.io/tls` Secret,
//! renews them before they expire (rotating the CA with an overlap, see [`plan()`]), and
//! writes the CAs to trust into both webhook configurations.

mod bootstrap;
mod issue;
mod plan;
mod policy;
mod state;
mod verify;

pub use bootstrap::{BootstrapError, BootstrapOptions, Outcome, bootstrap, bootstrap_with};
pub use issue::{Ca, IssueError, Serving, issue_ca, issue_serving, service_dns_names, serving_end};
pub use plan::{Plan, Step, Trusted, plan};
pub use policy::{Renewal, parse_duration};
pub use state::{CA_SWITCHED_AT, NEXT_CA_ADDED_AT, NextCa, Retiring, State};
pub use verify::{check_serving, ders, pem_of, usable_ca, validity};
