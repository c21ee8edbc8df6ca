//! Ready and updated instances counted from the Pods a pass listed. The StatefulSet
//! controller counts the same Pods into the StatefulSet's status, but only on its next
//! sync: a Database that waited for that would show Running one whole pass after its
//! Pods are ready.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

/// The label the StatefulSet controller puts on each Pod: the revision it was made from.
const REVISION_LABEL: &str = "controller-revision-hash";

/// Instances as the Pods show them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    /// Pods running and ready, not being deleted.
    pub ready: i32,
    /// Of those, the Pods made from the StatefulSet's current revision.
    pub updated: i32,
}

/// Counts the Pods of `set` among `pods`: only Pods the StatefulSet controls, within its
/// replicas, running, ready and not being deleted. What the StatefulSet controller has
/// not caught up with yet (a Pod of another StatefulSet of the same name, one past a
/// scale-down) never counts.
pub fn count(set: &StatefulSet, pods: &[Pod]) -> Counted {
    let (Some(uid), Some(spec)) = (set.metadata.uid.as_deref(), set.spec.as_ref()) else {
        return Counted::default();
    };
    let replicas = spec.replicas.unwrap_or(1);
    let update_revision = set
        .status
        .as_ref()
        .and_then(|s| s.update_revision.as_deref());
    let prefix = format!("{}-", set.name_any());
    let mut counted = Counted::default();
    for pod in pods {
        let in_range = pod
            .name_any()
            .strip_prefix(&prefix)
            .and_then(|ordinal| ordinal.parse::<i32>().ok())
            .is_some_and(|ordinal| (0..replicas).contains(&ordinal));
        if !in_range || !controlled_by(pod, uid) || !running_and_ready(pod) {
            continue;
        }
        counted.ready += 1;
        if update_revision.is_some()
            && pod.labels().get(REVISION_LABEL).map(String::as_str) == update_revision
        {
            counted.updated += 1;
        }
    }
    counted
}

fn controlled_by(pod: &Pod, uid: &str) -> bool {
    pod.owner_references()
        .iter()
        .any(|owner| owner.controller == Some(true) && owner.uid == uid)
}

fn running_and_ready(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    pod.metadata.deletion_timestamp.is_none()
        && status.phase.as_deref() == Some("Running")
        && status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{StatefulSetSpec, StatefulSetStatus};
    use k8s_openapi::api::core::v1::{PodCondition, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

    fn set(replicas: i32) -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("db".into()),
                uid: Some("set-uid".into()),
                ..ObjectMeta::default()
            },
            spec: Some(StatefulSetSpec {
                replicas: Some(replicas),
                ..StatefulSetSpec::default()
            }),
            status: Some(StatefulSetStatus {
                update_revision: Some("db-new".into()),
                ..StatefulSetStatus::default()
            }),
        }
    }

    fn pod(name: &str, owner: &str, revision: &str, ready: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([(REVISION_LABEL.to_owned(), revision.to_owned())].into()),
                owner_references: Some(vec![OwnerReference {
                    controller: Some(true),
                    uid: owner.into(),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            status: Some(PodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..PodCondition::default()
                }]),
                ..PodStatus::default()
            }),
            ..Pod::default()
        }
    }

    #[test]
    fn ready_pods_of_the_current_revision_count_as_ready_and_updated() {
        let pods = [
            pod("db-0", "set-uid", "db-new", "True"),
            pod("db-1", "set-uid", "db-old", "True"),
            pod("db-2", "set-uid", "db-new", "False"),
        ];
        assert_eq!(
            count(&set(3), &pods),
            Counted {
                ready: 2,
                updated: 1
            }
        );
    }

    #[test]
    fn pods_the_statefulset_does_not_control_or_no_longer_wants_never_count() {
        let mut going = pod("db-0", "set-uid", "db-new", "True");
        going.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let mut pending = pod("db-1", "set-uid", "db-new", "True");
        if let Some(status) = pending.status.as_mut() {
            status.phase = Some("Pending".into());
        }
        let pods = [
            going,
            pending,
            pod("db-1", "other-uid", "db-new", "True"),
            pod("db-2", "set-uid", "db-new", "True"),
            pod("dbx-0", "set-uid", "db-new", "True"),
        ];
        assert_eq!(count(&set(2), &pods), Counted::default());
    }

    #[test]
    fn without_a_revision_from_the_statefulset_nothing_counts_as_updated() {
        let mut set = set(1);
        set.status = None;
        let pods = [pod("db-0", "set-uid", "db-new", "True")];
        assert_eq!(
            count(&set, &pods),
            Counted {
                ready: 1,
                updated: 0
            }
        );
    }
}
