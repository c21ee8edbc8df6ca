//! Judging a change through the `scale` subresource (`kubectl scale`, an autoscaler).
//!
//! The API server sends an autoscaling/v1 `Scale`, not the Database, and the webhook has
//! no API client to read the Database with, so only the rules that need nothing but the
//! replica count are applied: the bounds, and the warnings about extra instances. The
//! engine is known only when the Scale's `status.selector` names it (the controller
//! writes `app.kubernetes.io/name=<engine>` there); then the engine's own warnings come
//! too, worded exactly as for the Database.

use database_api::constants::labels;
use database_api::validation::{FieldError, Outcome, replica_warnings};
use database_api::{Engine, MAX_REPLICAS, MIN_REPLICAS};
use k8s_openapi::api::autoscaling::v1::Scale;
use serde_json::Value;

/// The name of the subresource this module judges.
pub const SUBRESOURCE: &str = "scale";

/// The replica rules of `database_api::validation` applied to a Scale. A malformed Scale
/// is refused with the field it breaks.
pub fn judge(object: &Value) -> Outcome {
    let scale: Scale = match serde_path_to_error::deserialize(object) {
        Ok(scale) => scale,
        Err(err) => {
            let path = err.path().to_string();
            return Outcome {
                errors: vec![FieldError::new(path, err.into_inner().to_string())],
                warnings: Vec::new(),
            };
        }
    };
    // A Scale leaves out `spec.replicas` when it is 0.
    let replicas = scale.spec.and_then(|spec| spec.replicas).unwrap_or(0);
    let engine = scale
        .status
        .and_then(|status| status.selector)
        .and_then(|selector| engine_in(&selector));
    replica_rules(replicas, engine)
}

/// The engine a label selector like `app.kubernetes.io/name=mongodb,...` names.
fn engine_in(selector: &str) -> Option<Engine> {
    selector.split(',').find_map(|requirement| {
        let (key, value) = requirement.split_once('=')?;
        (key.trim() == labels::NAME)
            .then(|| Engine::ALL.into_iter().find(|e| e.as_str() == value.trim()))
            .flatten()
    })
}

/// `database_api::validation`'s replica rules, with the engine when it is known; a test
/// below holds the two together.
fn replica_rules(replicas: i32, engine: Option<Engine>) -> Outcome {
    let mut outcome = Outcome::default();
    if !(MIN_REPLICAS..=MAX_REPLICAS).contains(&replicas) {
        outcome.errors.push(FieldError::new(
            "spec.replicas",
            format!("must be between {MIN_REPLICAS} and {MAX_REPLICAS}"),
        ));
        return outcome;
    }
    outcome.warnings = replica_warnings(replicas, engine);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use database_api::validation::{Limits, validate};
    use database_api::{Database, DatabaseSpec};
    use serde_json::json;

    /// What `validate` says about the replicas of a Database of `engine`.
    fn database_rules(engine: Engine, replicas: i32) -> Outcome {
        // From JSON, so that fields with defaults need not be spelled out here.
        let spec: DatabaseSpec = serde_json::from_value(json!({
            "engine": engine, "version": "", "storage": "", "replicas": replicas
        }))
        .expect("a spec");
        let db = Database::new("orders-db", spec);
        let outcome = validate(&db, &Limits::default());
        Outcome {
            errors: outcome
                .errors
                .into_iter()
                .filter(|e| e.path == "spec.replicas")
                .collect(),
            warnings: outcome
                .warnings
                .into_iter()
                .filter(|w| w.starts_with("spec.replicas"))
                .collect(),
        }
    }

    #[test]
    fn with_the_engine_known_a_scale_gets_what_the_database_would() {
        for engine in Engine::ALL {
            for replicas in -1..=7 {
                assert_eq!(
                    replica_rules(replicas, Some(engine)),
                    database_rules(engine, replicas),
                    "{engine} {replicas}"
                );
            }
        }
    }

    #[test]
    fn without_the_engine_the_bounds_are_the_same_and_nothing_is_warned() {
        for replicas in -1..=7 {
            let outcome = replica_rules(replicas, None);
            assert_eq!(
                outcome.errors,
                database_rules(Engine::Postgres, replicas).errors
            );
            assert!(outcome.warnings.is_empty(), "{:?}", outcome.warnings);
        }
    }

    #[test]
    fn the_engine_is_read_from_the_name_label_of_the_selector() {
        let selector = "app.kubernetes.io/instance=a, app.kubernetes.io/name=mysql";
        assert_eq!(engine_in(selector), Some(Engine::Mysql));
        assert_eq!(engine_in("app.kubernetes.io/instance=mongodb"), None);
        assert_eq!(engine_in("app.kubernetes.io/name=oracle"), None);
        assert_eq!(engine_in(""), None);
    }

    #[test]
    fn a_malformed_scale_names_the_field() {
        let outcome = judge(&json!({"spec": {"replicas": "three"}}));
        assert_eq!(outcome.errors.len(), 1);
        assert_eq!(outcome.errors[0].path, "spec.replicas");
    }
}
