//! Which instance (Pod) of a Database a command acts on, from what its status reports:
//! the primary, or one named by the user, refused with the instances there are.

use database_api::Database;
use database_api::replication::InstanceStatus;
use kube::ResourceExt;

fn reported(db: &Database) -> &[InstanceStatus] {
    db.status.as_ref().map_or(&[], |s| s.instances.as_slice())
}

/// The instances as a reader wants them listed: `orders-0, orders-1`.
pub fn listing(db: &Database) -> String {
    let names: Vec<&str> = reported(db).iter().map(|i| i.name.as_str()).collect();
    if names.is_empty() {
        "none reported yet".to_owned()
    } else {
        names.join(", ")
    }
}

/// The primary's Pod, or why there is none.
pub fn primary(db: &Database) -> Result<&str, String> {
    let status = db.status.as_ref();
    status
        .and_then(|s| s.primary.as_deref())
        .filter(|p| !p.is_empty())
        .ok_or_else(|| {
            let phase = status.map_or("Pending", |s| crate::words::phase(s.phase));
            format!(
                "{} has no primary yet (phase {phase}); status.primary names it once an instance takes writes",
                db.name_any()
            )
        })
}

/// Whether `pod` is an instance the status reports.
pub fn is_reported(db: &Database, pod: &str) -> bool {
    reported(db).iter().any(|i| i.name == pod)
}

/// Whether `pod` is named as the StatefulSet names the Database's Pods:
/// `<database>-<ordinal>`.
pub fn is_pod_name_of(db: &Database, pod: &str) -> bool {
    pod.strip_prefix(&db.name_any())
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|ordinal| !ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
pub(crate) mod fixtures {
    use database_api::Database;
    use serde_json::{Value, json};

    /// Database `orders` (postgres, 3 replicas) in `shop` with `status`.
    pub fn database(status: &Value) -> Database {
        serde_json::from_value(json!({
            "apiVersion": "mycompany.io/v1", "kind": "Database",
            "metadata": {"name": "orders", "namespace": "shop"},
            "spec": {"engine": "postgres", "version": "17", "storage": "1Gi", "replicas": 3},
            "status": status,
        }))
        .expect("a Database")
    }

    /// `orders` Running with `orders-0` the primary and `orders-1` its replica.
    pub fn replicated() -> Database {
        database(&json!({
            "phase": "Running", "primary": "orders-0",
            "instances": [
                {"name": "orders-0", "role": "Primary", "ready": true},
                {"name": "orders-1", "role": "Replica", "ready": true, "lagBytes": 0},
            ],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{database, replicated};
    use super::*;
    use serde_json::json;

    #[test]
    fn the_primary_is_the_one_the_status_names() {
        assert_eq!(primary(&replicated()), Ok("orders-0"));
    }

    #[test]
    fn no_primary_yet_says_so_with_the_phase() {
        let creating = database(&json!({"phase": "Creating"}));
        assert_eq!(
            primary(&creating),
            Err("orders has no primary yet (phase Creating); status.primary names it once an instance takes writes".to_owned())
        );
        let mut fresh = creating;
        fresh.status = None;
        assert!(primary(&fresh).unwrap_err().contains("(phase Pending)"));
    }

    #[test]
    fn instances_are_listed_by_name() {
        assert_eq!(listing(&replicated()), "orders-0, orders-1");
        assert_eq!(listing(&database(&json!({}))), "none reported yet");
    }

    #[test]
    fn pod_names_of_the_statefulset_are_recognised() {
        let db = replicated();
        assert!(is_pod_name_of(&db, "orders-4"));
        for other in ["orders", "orders-", "orders-x", "orders-db-0", "users-0"] {
            assert!(!is_pod_name_of(&db, other), "{other}");
        }
        assert!(is_reported(&db, "orders-1"));
        assert!(!is_reported(&db, "orders-4"));
    }
}
