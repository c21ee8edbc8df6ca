//! The Database controller: reconciles each `Database` into a StatefulSet, a headless
//! Service, a credentials Secret, a connection Secret and (with several instances) a
//! PodDisruptionBudget, and reports what it sees in the Database's status.

pub mod app;
pub mod backup;
pub mod cache;
pub mod cli;
pub mod context;
pub mod engine;
pub mod error;
pub mod exec;
pub mod keys;
pub mod layout;
pub mod metrics;
pub mod metrics_server;
pub mod monitoring;
pub mod objects;
pub mod reconcile;
pub mod replication;
pub mod resources;
pub mod runner;
pub mod upgrade;
pub mod version;
