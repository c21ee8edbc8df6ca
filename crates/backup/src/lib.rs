//! The backup agent's library: an S3 client ([`s3`]) and the stores dumps stream into
//! and out of ([`store`]). The `backup-agent` binary runs it in a backup or restore
//! Job, beside the engine's own dump or restore tool.

pub mod agent;
pub mod s3;
pub mod store;
