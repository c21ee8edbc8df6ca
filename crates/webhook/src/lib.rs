//! The validating and defaulting admission webhook for `Database` objects, served over
//! TLS with axum.
//!
//! A thin adapter: the handlers decode the `admission.k8s.io/v1` AdmissionReview, call
//! [`database_api::validation`] and [`database_api::defaults`], and answer. See the
//! crate's README for the defaults it applies and the endpoints it serves.

mod admission;
pub mod certs;
mod http;
pub mod metrics;
pub mod review;
pub mod server;
/// The serving TLS configuration, shared with the controller's metrics endpoint.
pub use operator_runtime::tls;

pub use http::{AppState, MAX_BODY_BYTES, MUTATE_PATH, REQUEST_TIMEOUT, VALIDATE_PATH, router};
