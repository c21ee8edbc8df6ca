//! The `Database` custom resource (`mycompany.io/v1`): its types, the constants the
//! controller and the webhook share, and the pure rules over the types.
//!
//! This crate has no client: everything here is data and pure functions, so the
//! controller and the webhook can both call it and stay in agreement.

pub mod backup;
pub mod conditions;
pub mod constants;
mod database;
pub mod defaults;
pub mod exposure;
pub mod monitoring;
pub mod parameters;
pub mod quantity;
pub mod replication;
pub mod storage;
pub mod upgrade;
pub mod validation;
pub mod versions;

pub use database::{
    Binding, DEFAULT_REPLICAS, Database, DatabaseSpec, DatabaseStatus, DeletionPolicy, Engine,
    MAX_REPLICAS, MIN_REPLICAS, Phase,
};
