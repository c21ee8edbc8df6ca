//! Rules for the fields that shape the instances' Pods and the client Service:
//! resources, storage class, scheduling, Pod metadata and the Service's annotations.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, NodeAffinity, NodeSelectorTerm, PodAffinityTerm, ResourceRequirements, Toleration,
    TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

use super::Outcome;
use super::names::{is_dns_subdomain, label_value_problem, qualified_name_problem};
use crate::DatabaseSpec;
use crate::constants::labels;
use crate::quantity;

/// The smallest memory limit any engine starts in.
pub const MIN_MEMORY_LIMIT: &str = "256Mi";
/// Label keys the operator sets on its Pods; a user's label may not replace them.
const OPERATOR_LABELS: [&str; 5] = [
    labels::NAME,
    labels::INSTANCE,
    labels::VERSION,
    labels::COMPONENT,
    labels::MANAGED_BY,
];
/// The operator's own label and annotation prefix.
const OPERATOR_PREFIX: &str = "mycompany.io/";

pub(super) fn check(spec: &DatabaseSpec, outcome: &mut Outcome) {
    if let Some(resources) = &spec.resources {
        check_resources(resources, outcome);
    }
    for (path, name) in [
        ("spec.storageClassName", &spec.storage_class_name),
        ("spec.priorityClassName", &spec.priority_class_name),
    ] {
        if let Some(name) = name
            && !is_dns_subdomain(name)
        {
            outcome.error(
                path,
                "must be a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters), as the name of a cluster object",
            );
        }
    }
    if let Some(selector) = &spec.node_selector {
        check_labels("spec.nodeSelector", selector, outcome);
    }
    for (index, toleration) in spec.tolerations.iter().flatten().enumerate() {
        check_toleration(&format!("spec.tolerations[{index}]"), toleration, outcome);
    }
    if let Some(affinity) = &spec.affinity {
        check_affinity(affinity, outcome);
    }
    for (index, constraint) in spec
        .topology_spread_constraints
        .iter()
        .flatten()
        .enumerate()
    {
        check_spread(
            &format!("spec.topologySpreadConstraints[{index}]"),
            constraint,
            outcome,
        );
    }
    if let Some(metadata) = &spec.pod_metadata {
        check_labels("spec.podMetadata.labels", &metadata.labels, outcome);
        for key in metadata.labels.keys() {
            if OPERATOR_LABELS.contains(&key.as_str()) || key.starts_with(OPERATOR_PREFIX) {
                outcome.error(
                    &format!("spec.podMetadata.labels.{key}"),
                    "is a label the operator sets on its Pods (they are selected by it) and cannot be given",
                );
            }
        }
        check_annotation_keys(
            "spec.podMetadata.annotations",
            &metadata.annotations,
            outcome,
        );
    }
    if let Some(service) = &spec.service {
        check_annotation_keys("spec.service.annotations", &service.annotations, outcome);
    }
}

fn check_resources(resources: &ResourceRequirements, outcome: &mut Outcome) {
    if resources.claims.as_ref().is_some_and(|c| !c.is_empty()) {
        outcome.error(
            "spec.resources.claims",
            "is not supported: the instances use no dynamic resources",
        );
    }
    let empty = BTreeMap::new();
    let requests = resources.requests.as_ref().unwrap_or(&empty);
    let limits = resources.limits.as_ref().unwrap_or(&empty);
    for (kind, map) in [("requests", requests), ("limits", limits)] {
        for (key, value) in map {
            let path = format!("spec.resources.{kind}.{key}");
            if !(matches!(key.as_str(), "cpu" | "memory" | "ephemeral-storage")
                || key.starts_with("hugepages-"))
            {
                outcome.error(
                    &path,
                    "is not a resource the instances use: give cpu, memory, ephemeral-storage or hugepages-<size>",
                );
            } else if quantity::parse(&value.0).is_none() {
                outcome.error(
                    &path,
                    format!(
                        "{:?} is not a quantity: write it like \"500m\", \"2\", \"512Mi\" or \"4Gi\"",
                        value.0
                    ),
                );
            }
        }
    }
    for (key, request) in requests {
        let (Some(request_value), Some(limit)) = (
            quantity::parse(&request.0),
            limits.get(key).map(|l| l.0.as_str()),
        ) else {
            continue;
        };
        if quantity::parse(limit).is_some_and(|l| request_value > l) {
            outcome.error(
                &format!("spec.resources.requests.{key}"),
                format!("{} must not exceed the limit, {limit}", request.0),
            );
        }
    }
    let minimum = quantity::bytes(MIN_MEMORY_LIMIT).unwrap_or_default();
    if let Some(limit) = limits.get("memory")
        && quantity::bytes(&limit.0).is_some_and(|l| l < minimum)
    {
        outcome.error(
            "spec.resources.limits.memory",
            format!("must be at least {MIN_MEMORY_LIMIT}: no engine starts in less"),
        );
    }
}

fn check_labels(path: &str, labels: &BTreeMap<String, String>, outcome: &mut Outcome) {
    for (key, value) in labels {
        if let Some(problem) = qualified_name_problem(key) {
            outcome.error(&format!("{path}.{key}"), format!("the key {problem}"));
        }
        if let Some(problem) = label_value_problem(value) {
            outcome.error(&format!("{path}.{key}"), format!("the value {problem}"));
        }
    }
}

fn check_annotation_keys(
    path: &str,
    annotations: &BTreeMap<String, String>,
    outcome: &mut Outcome,
) {
    for key in annotations.keys() {
        if let Some(problem) = qualified_name_problem(key) {
            outcome.error(&format!("{path}.{key}"), format!("the key {problem}"));
        } else if key.starts_with(OPERATOR_PREFIX) {
            outcome.error(
                &format!("{path}.{key}"),
                "is under mycompany.io/, which the operator keeps for its own annotations",
            );
        }
    }
}

fn check_toleration(path: &str, toleration: &Toleration, outcome: &mut Outcome) {
    let operator = toleration.operator.as_deref().unwrap_or("Equal");
    match operator {
        "Exists" if toleration.value.as_deref().is_some_and(|v| !v.is_empty()) => {
            outcome.error(
                &format!("{path}.value"),
                "must be empty when operator is Exists",
            );
        }
        "Equal" if toleration.key.as_deref().unwrap_or("").is_empty() => outcome.error(
            &format!("{path}.operator"),
            "must be Exists when key is empty (an empty key with Exists tolerates every taint)",
        ),
        "Equal" | "Exists" => {}
        _ => outcome.error(&format!("{path}.operator"), "must be Equal or Exists"),
    }
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !matches!(effect, "" | "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
        outcome.error(
            &format!("{path}.effect"),
            "must be NoSchedule, PreferNoSchedule or NoExecute (or empty for all three)",
        );
    }
    if toleration.toleration_seconds.is_some() && effect != "NoExecute" {
        outcome.error(
            &format!("{path}.tolerationSeconds"),
            "applies only with effect NoExecute",
        );
    }
}

fn check_spread(path: &str, constraint: &TopologySpreadConstraint, outcome: &mut Outcome) {
    if constraint.max_skew < 1 {
        outcome.error(&format!("{path}.maxSkew"), "must be at least 1");
    }
    if constraint.topology_key.is_empty() {
        outcome.error(&format!("{path}.topologyKey"), "must name a node label");
    }
    if !matches!(
        constraint.when_unsatisfiable.as_str(),
        "DoNotSchedule" | "ScheduleAnyway"
    ) {
        outcome.error(
            &format!("{path}.whenUnsatisfiable"),
            "must be DoNotSchedule or ScheduleAnyway",
        );
    }
    if let Some(selector) = &constraint.label_selector {
        check_selector(&format!("{path}.labelSelector"), selector, outcome);
    }
}

fn check_affinity(affinity: &Affinity, outcome: &mut Outcome) {
    if let Some(node) = &affinity.node_affinity {
        check_node_affinity(node, outcome);
    }
    check_pod_affinities(affinity, outcome);
}

/// The node affinity's required terms, then its preferred ones with their weights.
fn check_node_affinity(node: &NodeAffinity, outcome: &mut Outcome) {
    if let Some(required) = &node.required_during_scheduling_ignored_during_execution {
        for (index, term) in required.node_selector_terms.iter().enumerate() {
            check_node_term(
                &format!(
                    "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{index}]"
                ),
                term,
                outcome,
            );
        }
    }
    for (index, preferred) in node
        .preferred_during_scheduling_ignored_during_execution
        .iter()
        .flatten()
        .enumerate()
    {
        let path = format!(
            "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{index}]"
        );
        check_weight(&path, preferred.weight, outcome);
        check_node_term(
            &format!("{path}.preference"),
            &preferred.preference,
            outcome,
        );
    }
}

/// The pod affinity's and anti-affinity's required terms, then their preferred ones with
/// their weights.
fn check_pod_affinities(affinity: &Affinity, outcome: &mut Outcome) {
    let pod_rules = [
        (
            "podAffinity",
            affinity.pod_affinity.as_ref().map(|a| {
                (
                    &a.required_during_scheduling_ignored_during_execution,
                    &a.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
        (
            "podAntiAffinity",
            affinity.pod_anti_affinity.as_ref().map(|a| {
                (
                    &a.required_during_scheduling_ignored_during_execution,
                    &a.preferred_during_scheduling_ignored_during_execution,
                )
            }),
        ),
    ];
    for (kind, rules) in pod_rules {
        let Some((required, preferred)) = rules else {
            continue;
        };
        for (index, term) in required.iter().flatten().enumerate() {
            check_pod_term(
                &format!(
                    "spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{index}]"
                ),
                term,
                outcome,
            );
        }
        for (index, weighted) in preferred.iter().flatten().enumerate() {
            let path = format!(
                "spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{index}]"
            );
            check_weight(&path, weighted.weight, outcome);
            check_pod_term(
                &format!("{path}.podAffinityTerm"),
                &weighted.pod_affinity_term,
                outcome,
            );
        }
    }
}

fn check_weight(path: &str, weight: i32, outcome: &mut Outcome) {
    if !(1..=100).contains(&weight) {
        outcome.error(&format!("{path}.weight"), "must be between 1 and 100");
    }
}

fn check_node_term(path: &str, term: &NodeSelectorTerm, outcome: &mut Outcome) {
    let requirements = term
        .match_expressions
        .iter()
        .flatten()
        .map(|r| ("matchExpressions", r))
        .chain(
            term.match_fields
                .iter()
                .flatten()
                .map(|r| ("matchFields", r)),
        );
    for (index, (kind, requirement)) in requirements.enumerate() {
        let path = format!("{path}.{kind}[{index}]");
        let values = requirement.values.as_ref().map_or(0, Vec::len);
        let problem = match requirement.operator.as_str() {
            "In" | "NotIn" if values == 0 => Some("needs at least one value with In and NotIn"),
            "Exists" | "DoesNotExist" if values > 0 => {
                Some("takes no values with Exists and DoesNotExist")
            }
            "Gt" | "Lt" if values != 1 => Some("needs exactly one value with Gt and Lt"),
            "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => None,
            _ => Some("operator must be In, NotIn, Exists, DoesNotExist, Gt or Lt"),
        };
        if let Some(problem) = problem {
            outcome.error(&path, problem);
        }
    }
}

fn check_pod_term(path: &str, term: &PodAffinityTerm, outcome: &mut Outcome) {
    if term.topology_key.is_empty() {
        outcome.error(&format!("{path}.topologyKey"), "must name a node label");
    }
    if let Some(selector) = &term.label_selector {
        check_selector(&format!("{path}.labelSelector"), selector, outcome);
    }
}

fn check_selector(path: &str, selector: &LabelSelector, outcome: &mut Outcome) {
    if let Some(labels) = &selector.match_labels {
        check_labels(&format!("{path}.matchLabels"), labels, outcome);
    }
    for (index, requirement) in selector.match_expressions.iter().flatten().enumerate() {
        let values = requirement.values.as_ref().map_or(0, Vec::len);
        let problem = match requirement.operator.as_str() {
            "In" | "NotIn" if values == 0 => Some("needs at least one value with In and NotIn"),
            "Exists" | "DoesNotExist" if values > 0 => {
                Some("takes no values with Exists and DoesNotExist")
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => None,
            _ => Some("operator must be In, NotIn, Exists or DoesNotExist"),
        };
        if let Some(problem) = problem {
            outcome.error(&format!("{path}.matchExpressions[{index}]"), problem);
        }
    }
}
