//! The Database controller: reconciles each `Database` into a StatefulSet, a headless
//! Service, a credentials Secret, a connection Secret and (with several instances) a
//! PodDisruptionBudget, and reports what it sees in the Database's status.

pub mod engine;
pub mod resources;
pub mod context;
pub mod error;
pub mod metrics;
pub mod reconcile;
pub mod runner;
