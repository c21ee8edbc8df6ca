//! `switchover NAME --to POD`: asks the operator to make another instance the primary,
//! through the annotation it watches for that. The operator does the work (fences the
//! old primary, promotes the new one, re-points the others); the plugin only checks
//! that the request names an instance that can take over, so a typo fails here with
//! the instances listed instead of as a Warning event later.

use database_api::Database;
use database_api::replication::SWITCHOVER_ANNOTATION;
use kube::ResourceExt;

use crate::cluster::Target;
use crate::database;
use crate::error::Error;
use crate::instances;

/// Why a switchover of `db` to `to` cannot be asked for, if it cannot.
pub fn refusal(db: &Database, to: &str) -> Option<String> {
    let name = db.name_any();
    if !instances::is_reported(db, to) {
        return Some(format!(
            "{to} is not an instance of {name} (instances: {})",
            instances::listing(db)
        ));
    }
    if instances::primary(db).is_ok_and(|primary| primary == to) {
        return Some(format!("{to} is already the primary of {name}"));
    }
    None
}

/// Checks the request against the Database's status, then annotates it.
pub async fn run(target: &Target, name: &str, to: &str) -> Result<String, Error> {
    let db = database::get(target, name).await?;
    if let Some(reason) = refusal(&db, to) {
        return Err(Error::SwitchoverRefused {
            database: name.to_owned(),
            reason,
        });
    }
    database::annotate(target, name, SWITCHOVER_ANNOTATION, Some(to)).await?;
    Ok(format!(
        "Switchover of {name} to {to} requested ({SWITCHOVER_ANNOTATION}={to}).\n\
         The operator moves the primary; `kubectl database status {name}` shows it.\n"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instances::fixtures::{database, replicated};
    use serde_json::json;

    #[test]
    fn a_replica_may_become_the_primary() {
        assert_eq!(refusal(&replicated(), "orders-1"), None);
    }

    #[test]
    fn a_pod_that_is_not_an_instance_is_refused_with_the_instances_named() {
        assert_eq!(
            refusal(&replicated(), "orders-7").as_deref(),
            Some("orders-7 is not an instance of orders (instances: orders-0, orders-1)")
        );
    }

    #[test]
    fn the_current_primary_is_refused() {
        assert_eq!(
            refusal(&replicated(), "orders-0").as_deref(),
            Some("orders-0 is already the primary of orders")
        );
    }

    #[test]
    fn a_database_reporting_no_instances_refuses_every_pod() {
        let creating = database(&json!({"phase": "Creating"}));
        assert_eq!(
            refusal(&creating, "orders-0").as_deref(),
            Some("orders-0 is not an instance of orders (instances: none reported yet)")
        );
    }
}
