//! What acceptance tests share, so that a test file holds its scenario and nothing it
//! would otherwise copy from another: waiting until something holds ([`wait`]), a
//! control plane with the CRDs and a namespace ([`cluster`]), kubectl ([`kubectl`]),
//! Database objects ([`fixtures`]), the operator's command line ([`operator`]), and the
//! steps of the real tier's scenarios ([`real_tier`], [`failover`]), a writer to read
//! back ([`buffer`]), and requests that must be refused ([`refusal`]).

pub mod buffer;
pub mod cluster;
pub mod failover;
pub mod fixtures;
pub mod kubectl;
pub mod operator;
pub mod real_tier;
pub mod refusal;
pub mod wait;

pub use cluster::Cluster;
pub use wait::{WAIT, Wait, eventually};
