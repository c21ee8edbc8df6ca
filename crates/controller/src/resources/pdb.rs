//! The PodDisruptionBudget that keeps voluntary disruptions to one instance at a time
//! once a Database has more than one.

use database_api::Database;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::meta::{object_meta, selector_labels};

/// The budget for `db`, or `None` for a single instance, where a budget would only
/// block node drains without protecting anything.
pub fn build_pdb(db: &Database) -> Option<PodDisruptionBudget> {
    (db.spec.replicas > 1).then(|| PodDisruptionBudget {
        metadata: object_meta(db, db.name_any()),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(selector_labels(db)),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::fixtures::database;
    use database_api::Engine;

    #[test]
    fn a_single_instance_gets_no_budget() {
        assert!(build_pdb(&database(Engine::Postgres, "16", 1)).is_none());
    }

    #[test]
    fn several_instances_allow_one_disruption_at_a_time() {
        let pdb = build_pdb(&database(Engine::Postgres, "16", 3)).expect("budget");
        let spec = pdb.spec.expect("spec");
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(
            spec.selector.and_then(|s| s.match_labels).expect("labels")["app.kubernetes.io/name"],
            "postgres"
        );
    }
}
