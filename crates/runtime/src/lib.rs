//! The generic parts of a Kubernetes controller, apart from any one resource: the work
//! queue and the dispatcher that runs reconciles from it ([`controller`]), watches and
//! their retry policy ([`watch`]), leader election on a Lease ([`leader`]), Kubernetes
//! Events ([`events`]), the API client with its rate limit ([`client`],
//! [`ratelimit`]), readable API errors ([`errors`]) and logs and traces
//! ([`telemetry`]).
//!
//! Each part kube-runtime already has is kept here only where a benchmark target of the
//! operator needs it; its module doc names the target.

pub mod client;
pub mod controller;
pub mod errors;
pub mod events;
pub mod leader;
pub mod metrics;
pub mod queue;
pub mod ratelimit;
pub mod telemetry;
pub mod tls;
pub mod watch;

pub use controller::{Action, Controller};
