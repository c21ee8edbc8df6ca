use std::time::Duration;

use super::*;
use crate::replication::plan::{EngineState, ReplicaSetView};

fn member(ordinal: i32, primary: bool, members: &[i32]) -> Instance {
    Instance {
        name: format!("orders-{ordinal}"),
        ordinal,
        ready: true,
        unready_since: None,
        stopping_until: None,
        label: Some(if primary { "primary" } else { "replica" }.into()),
        engine: Some(EngineState {
            primary,
            position: 100,
            upstream: (!primary).then(|| "orders-0".into()),
            streaming: !primary,
            synchronous: false,
            log_kept_mb: None,
            oldest_log: None,
            history: None,
            replica_set: Some(ReplicaSetView {
                initiated: true,
                members: members.iter().map(|o| format!("orders-{o}")).collect(),
                version: "7.0.14".into(),
                compatibility: primary.then(|| "7.0".into()),
                recovering: false,
            }),
        }),
    }
}

fn fresh(ordinal: i32) -> Instance {
    let mut instance = member(ordinal, false, &[]);
    instance.label = None;
    if let Some(engine) = instance.engine.as_mut() {
        engine.upstream = None;
        engine.streaming = false;
        engine.replica_set = Some(ReplicaSetView {
            initiated: false,
            members: Vec::new(),
            version: "7.0.14".into(),
            compatibility: None,
            recovering: false,
        });
    }
    instance
}

/// The plan when the topology already records the set's span.
fn planned(named: &str, instances: &[Instance], wanted: &Wanted) -> Vec<Step> {
    let span = instances
        .iter()
        .filter_map(|i| i.engine.as_ref()?.replica_set.as_ref())
        .flat_map(|s| s.members.iter())
        .filter_map(|m| crate::replication::ordinal(m))
        .max()
        .map(|o| o + 1);
    plan(named, span, instances, wanted)
}

fn wanted(replicas: i32) -> Wanted {
    Wanted {
        replicas,
        synchronous: false,
        failover_after: Duration::from_secs(30),
        switchover_to: None,
        log_kept_mb: 256,
    }
}

#[test]
fn a_new_set_is_initiated_on_the_named_instance_once_every_instance_answered() {
    let mut silent = fresh(1);
    silent.engine = None;
    assert_eq!(
        planned("orders-0", &[fresh(0), silent], &wanted(2)),
        [],
        "an instance that did not answer may already hold a configuration"
    );
    assert_eq!(
        planned("orders-0", &[fresh(0), fresh(1)], &wanted(2)),
        [Step::ReplicaSet(ReplicaSetStep::Initiate {
            pod: "orders-0".into()
        })]
    );
}

#[test]
fn instances_join_one_at_a_time_and_the_set_follows_the_spec() {
    let set = [member(0, true, &[0]), fresh(1), fresh(2)];
    assert_eq!(
        planned("orders-0", &set, &wanted(3)),
        [Step::ReplicaSet(ReplicaSetStep::AddMember {
            primary: "orders-0".into(),
            pod: "orders-1".into()
        })]
    );
    let whole = [
        member(0, true, &[0, 1, 2]),
        member(1, false, &[]),
        member(2, false, &[]),
    ];
    assert_eq!(planned("orders-0", &whole, &wanted(3)), []);
}

#[test]
fn members_scaled_away_are_removed_highest_first() {
    let set = [
        member(0, true, &[0, 1, 2, 3, 4]),
        member(1, false, &[]),
        member(2, false, &[]),
        member(3, false, &[]),
        member(4, false, &[]),
    ];
    assert_eq!(
        planned("orders-0", &set, &wanted(2)),
        [Step::ReplicaSet(ReplicaSetStep::RemoveMember {
            primary: "orders-0".into(),
            pod: "orders-4".into()
        })]
    );
}

#[test]
fn a_primary_scaled_away_hands_over_to_a_caught_up_secondary_that_stays() {
    let mut set = [
        member(0, false, &[]),
        member(1, false, &[]),
        member(2, true, &[0, 1, 2]),
    ];
    for instance in &mut set[..2] {
        if let Some(engine) = instance.engine.as_mut() {
            engine.upstream = Some("orders-2".into());
        }
    }
    assert_eq!(
        planned("orders-2", &set, &wanted(2)),
        [Step::ReplicaSet(ReplicaSetStep::HandOver {
            primary: "orders-2".into(),
            to: "orders-0".into(),
            stay_out: vec!["orders-1".into()],
            why: Why::ScaleDown,
        })]
    );
}

#[test]
fn a_switchover_hands_over_to_the_instance_asked_for() {
    let set = [
        member(0, true, &[0, 1, 2]),
        member(1, false, &[]),
        member(2, false, &[]),
    ];
    let mut asked = wanted(3);
    asked.switchover_to = Some("orders-2".into());
    assert_eq!(
        planned("orders-0", &set, &asked),
        [Step::ReplicaSet(ReplicaSetStep::HandOver {
            primary: "orders-0".into(),
            to: "orders-2".into(),
            stay_out: vec!["orders-1".into()],
            why: Why::Switchover,
        })]
    );
    let mut not_ready = set.clone();
    not_ready[2].ready = false;
    assert_eq!(planned("orders-0", &not_ready, &asked), []);
}

#[test]
fn an_election_is_followed_named_first_and_labelled_on_the_next_pass() {
    let mut gone = member(0, true, &[0, 1, 2]);
    gone.stopping_until = Some(jiff::Timestamp::UNIX_EPOCH);
    gone.engine = None;
    let mut set = [gone, member(1, true, &[0, 1, 2]), member(2, false, &[])];
    set[1].label = Some("replica".into());
    assert_eq!(
        planned("orders-0", &set, &wanted(3)),
        [
            Step::NamePrimary {
                to: "orders-1".into(),
                why: Why::Elected
            },
            Step::Label {
                pod: "orders-0".into(),
                role: None
            },
        ]
    );
}

#[test]
fn while_no_single_instance_takes_writes_only_the_named_one_keeps_the_primary_label() {
    let mut set = [
        member(0, false, &[]),
        member(1, false, &[]),
        member(2, false, &[]),
    ];
    set[2].label = Some("primary".into());
    assert_eq!(
        planned("orders-0", &set, &wanted(3)),
        [Step::Label {
            pod: "orders-2".into(),
            role: None
        }]
    );
    let two = [
        member(0, true, &[0, 1]),
        member(1, true, &[0, 1]),
        member(2, false, &[]),
    ];
    assert_eq!(
        planned("orders-0", &two, &wanted(3)),
        [Step::Label {
            pod: "orders-1".into(),
            role: None
        }],
        "two answering as primary for a moment: only the named one keeps the label"
    );
}

#[test]
fn sync_mode_sets_the_majority_write_concern() {
    let set = [member(0, true, &[0, 1]), member(1, false, &[])];
    let mut sync = wanted(2);
    sync.synchronous = true;
    assert_eq!(
        planned("orders-0", &set, &sync),
        [Step::Synchronous {
            pod: "orders-0".into(),
            on: true
        }]
    );
}

#[test]
fn the_span_of_the_members_is_recorded_so_the_statefulset_keeps_their_instances() {
    let set = [
        member(0, true, &[0, 1, 2]),
        member(1, false, &[]),
        member(2, false, &[]),
    ];
    assert_eq!(
        plan("orders-0", Some(5), &set, &wanted(3)),
        [Step::ReplicaSet(ReplicaSetStep::RecordMembersSpan {
            span: 3
        })]
    );
    assert_eq!(plan("orders-0", Some(3), &set, &wanted(3)), []);
    // Scaling to 1: orders-2 leaves first; the span shrinks on a later pass.
    assert_eq!(
        plan("orders-0", Some(3), &set, &wanted(1)),
        [Step::ReplicaSet(ReplicaSetStep::RemoveMember {
            primary: "orders-0".into(),
            pod: "orders-2".into()
        })]
    );
}

fn runs(instance: &mut Instance, version: &str, compatibility: Option<&str>) {
    if let Some(view) = instance
        .engine
        .as_mut()
        .and_then(|e| e.replica_set.as_mut())
    {
        view.version = version.into();
        view.compatibility = compatibility.map(str::to_owned);
    }
}

#[test]
fn the_compatibility_version_rises_once_every_member_runs_the_new_series() {
    let mut primary = member(0, true, &[0, 1]);
    let mut secondary = member(1, false, &[]);
    runs(&mut primary, "8.0.4", Some("7.0"));
    runs(&mut secondary, "7.0.14", None);
    let steps = planned(
        "orders-0",
        &[primary.clone(), secondary.clone()],
        &wanted(2),
    );
    assert!(
        !steps.iter().any(|s| matches!(
            s,
            Step::ReplicaSet(ReplicaSetStep::RaiseCompatibility { .. })
        )),
        "one member still runs 7.0: {steps:?}"
    );
    runs(&mut secondary, "8.0.4", None);
    let steps = planned(
        "orders-0",
        &[primary.clone(), secondary.clone()],
        &wanted(2),
    );
    assert!(
        steps.contains(&Step::ReplicaSet(ReplicaSetStep::RaiseCompatibility {
            primary: "orders-0".into(),
            from: "7.0".into(),
            to: "8.0".into(),
        })),
        "{steps:?}"
    );
    secondary.ready = false;
    let steps = planned("orders-0", &[primary.clone(), secondary], &wanted(2));
    assert!(
        !steps.iter().any(|s| matches!(
            s,
            Step::ReplicaSet(ReplicaSetStep::RaiseCompatibility { .. })
        )),
        "a member not ready: {steps:?}"
    );
    runs(&mut primary, "8.0.4", Some("8.0"));
    let steps = planned("orders-0", &[primary], &wanted(1));
    assert!(
        !steps.iter().any(|s| matches!(
            s,
            Step::ReplicaSet(ReplicaSetStep::RaiseCompatibility { .. })
        )),
        "already raised: {steps:?}"
    );
}

/// Member `ordinal` recovering with its last write at `position`.
fn recovering(ordinal: i32, position: u64) -> Instance {
    let mut instance = member(ordinal, false, &[]);
    if let Some(engine) = instance.engine.as_mut() {
        engine.position = position;
        engine.upstream = None;
        engine.streaming = false;
        if let Some(view) = engine.replica_set.as_mut() {
            view.recovering = true;
        }
    }
    instance
}

fn primary_keeping_oplog_from(oldest: u64) -> Instance {
    let mut primary = member(0, true, &[0, 1, 2]);
    if let Some(engine) = primary.engine.as_mut() {
        engine.position = 500;
        engine.oldest_log = Some(oldest);
    }
    primary
}

/// The Pods the plan for a set of three, with `third` as `orders-2`, copies anew.
fn reseeded(third: Instance, replicas: i32) -> Vec<String> {
    let set = [
        primary_keeping_oplog_from(200),
        member(1, false, &[]),
        third,
    ];
    planned("orders-0", &set, &wanted(replicas))
        .into_iter()
        .filter_map(|step| match step {
            Step::Reseed { pod, primary } if primary == "orders-0" => Some(pod),
            _ => None,
        })
        .collect()
}

#[test]
fn a_member_behind_the_primarys_oldest_oplog_entry_is_copied_anew() {
    assert_eq!(reseeded(recovering(2, 199), 3), ["orders-2"]);
}

#[test]
fn a_member_the_oplog_still_reaches_or_that_reads_or_copies_is_left_alone() {
    assert_eq!(reseeded(recovering(2, 200), 3), Vec::<String>::new());

    let mut reading = member(2, false, &[]);
    if let Some(engine) = reading.engine.as_mut() {
        engine.position = 100;
    }
    assert_eq!(reseeded(reading, 3), Vec::<String>::new());

    let mut copying = recovering(2, 0);
    if let Some(view) = copying.engine.as_mut().and_then(|e| e.replica_set.as_mut()) {
        view.recovering = false;
    }
    assert_eq!(reseeded(copying, 3), Vec::<String>::new());

    assert_eq!(
        reseeded(recovering(2, 100), 2),
        Vec::<String>::new(),
        "a member leaving the set is removed, not copied"
    );
}
