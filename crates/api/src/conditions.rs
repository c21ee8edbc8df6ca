//! Condition types, reasons and the rule for updating a list of conditions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub mod reason;

/// Every desired instance is ready.
pub const READY: &str = "Ready";
/// The controller is moving the objects towards the spec.
pub const PROGRESSING: &str = "Progressing";
/// Something needs attention: an invalid spec, a failed write, a refused resize.
pub const DEGRADED: &str = "Degraded";
/// Whether instances replicate each other's data (they do not until replication is set up).
pub const REPLICATED: &str = "Replicated";
/// Reconciliation is paused by the `mycompany.io/paused` annotation.
pub const PAUSED: &str = "Paused";
/// Whether the newest finished backup succeeded.
pub const LAST_BACKUP_SUCCEEDED: &str = "LastBackupSucceeded";
/// Whether a Database created from a dump (`spec.restoreFrom`) has it restored.
pub const RESTORED: &str = "Restored";
/// Whether the exporter's database user is in place (`spec.monitoring.enabled`).
pub const MONITORING_READY: &str = "MonitoringReady";

/// Condition status values.
pub const TRUE: &str = "True";
pub const FALSE: &str = "False";

/// Finds the condition of type `type_`.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Puts `new` into `conditions`, replacing the one of the same type. The transition
/// time is kept when the status did not change, as Kubernetes conventions ask.
pub fn set(conditions: &mut Vec<Condition>, mut new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            if existing.status == new.status {
                new.last_transition_time = existing.last_transition_time.clone();
            }
            *existing = new;
        }
        None => conditions.push(new),
    }
}

/// A condition observed at `generation`, transitioning `now`.
pub fn new(
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if status { TRUE } else { FALSE }.to_owned(),
        reason: reason.to_owned(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: now.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(seconds: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(seconds).expect("valid time"))
    }

    #[test]
    fn an_unchanged_status_keeps_its_transition_time() {
        let mut list = vec![new(
            READY,
            false,
            "Creating",
            "0/1 ready",
            Some(1),
            &time(100),
        )];
        set(
            &mut list,
            new(READY, false, "Creating", "still 0/1", Some(2), &time(200)),
        );
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].last_transition_time, time(100));
        assert_eq!(list[0].message, "still 0/1");
        assert_eq!(list[0].observed_generation, Some(2));
    }

    #[test]
    fn a_flipped_status_takes_the_new_transition_time() {
        let mut list = vec![new(READY, false, "Creating", "", Some(1), &time(100))];
        set(
            &mut list,
            new(READY, true, "AllReplicasReady", "", Some(1), &time(200)),
        );
        assert_eq!(
            find(&list, READY).map(|c| (c.status.as_str(), c.last_transition_time.clone())),
            Some((TRUE, time(200)))
        );
    }

    #[test]
    fn a_new_type_is_appended() {
        let mut list = Vec::new();
        set(&mut list, new(PAUSED, true, "Paused", "", None, &time(1)));
        set(
            &mut list,
            new(READY, true, "AllReplicasReady", "", None, &time(1)),
        );
        assert_eq!(
            list.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(),
            [PAUSED, READY]
        );
    }
}
