use std::time::Duration;

use super::*;
use crate::replication::gtid::GtidSet;

const NOW: i64 = 1_800_000_000;

fn at(seconds_ago: i64) -> Timestamp {
    Timestamp::from_second(NOW - seconds_ago).expect("time")
}

fn primary(ordinal: i32, position: u64) -> Instance {
    Instance {
        name: format!("orders-{ordinal}"),
        ordinal,
        ready: true,
        unready_since: None,
        stopping_until: None,
        label: Some("primary".into()),
        engine: Some(EngineState {
            primary: true,
            position,
            upstream: None,
            streaming: false,
            synchronous: false,
            log_kept_mb: None,
            oldest_log: None,
            history: None,
            replica_set: None,
        }),
    }
}

fn replica(ordinal: i32, position: u64, upstream: &str) -> Instance {
    Instance {
        name: format!("orders-{ordinal}"),
        ordinal,
        ready: true,
        unready_since: None,
        stopping_until: None,
        label: Some("replica".into()),
        engine: Some(EngineState {
            primary: false,
            position,
            upstream: Some(upstream.into()),
            streaming: true,
            synchronous: false,
            log_kept_mb: None,
            oldest_log: None,
            history: None,
            replica_set: None,
        }),
    }
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

fn unready(mut instance: Instance, seconds_ago: i64) -> Instance {
    instance.ready = false;
    instance.unready_since = Some(at(seconds_ago));
    instance.engine = None;
    instance
}

#[test]
fn a_steady_set_needs_nothing() {
    let set = [
        primary(0, 100),
        replica(1, 100, "orders-0"),
        replica(2, 90, "orders-0"),
    ];
    assert_eq!(plan("orders-0", &set, &wanted(3), at(0)), []);
}

#[test]
fn new_instances_get_their_role_labels_once_they_stream() {
    let mut fresh = replica(1, 0, "orders-0");
    fresh.label = None;
    let mut cloning = replica(2, 0, "orders-0");
    cloning.label = None;
    cloning.engine = None;
    let mut new_primary = primary(0, 10);
    new_primary.label = None;
    let steps = plan(
        "orders-0",
        &[new_primary, fresh, cloning],
        &wanted(3),
        at(0),
    );
    assert_eq!(
        steps,
        [
            Step::Label {
                pod: "orders-0".into(),
                role: Some("primary")
            },
            Step::Label {
                pod: "orders-1".into(),
                role: Some("replica")
            },
        ]
    );
}

#[test]
fn a_primary_unready_past_the_bound_hands_over_to_the_most_advanced_replica() {
    let set = [
        unready(primary(0, 100), 31),
        replica(1, 90, "orders-0"),
        replica(2, 95, "orders-0"),
    ];
    assert_eq!(
        plan("orders-0", &set, &wanted(3), at(0)),
        [
            Step::NamePrimary {
                to: "orders-2".into(),
                why: Why::Failover
            },
            Step::Label {
                pod: "orders-0".into(),
                role: None
            },
            Step::Fence {
                pod: "orders-0".into(),
                failed: true
            },
        ]
    );
}

#[test]
fn a_primary_unready_within_the_bound_keeps_its_place() {
    let set = [unready(primary(0, 100), 29), replica(1, 90, "orders-0")];
    let steps = plan("orders-0", &set, &wanted(2), at(0));
    assert!(
        !steps.iter().any(|s| matches!(s, Step::NamePrimary { .. })),
        "{steps:?}"
    );
}

#[test]
fn equal_replicas_hand_over_to_the_lowest_ordinal() {
    let set = [
        unready(primary(0, 100), 60),
        replica(1, 90, "orders-0"),
        replica(2, 90, "orders-0"),
    ];
    assert_eq!(
        plan("orders-0", &set, &wanted(3), at(0))[0],
        Step::NamePrimary {
            to: "orders-1".into(),
            why: Why::Failover
        }
    );
}

#[test]
fn no_ready_replica_means_no_failover() {
    let set = [
        unready(primary(0, 100), 60),
        unready(replica(1, 90, "orders-0"), 60),
    ];
    assert!(plan("orders-0", &set, &wanted(2), at(0)).is_empty());
}

#[test]
fn the_named_primary_is_promoted_only_once_no_old_primary_answers_or_may_still_run() {
    let old = primary(0, 100);
    let named = replica(1, 100, "orders-0");
    let steps = plan("orders-1", &[old.clone(), named.clone()], &wanted(2), at(0));
    assert_eq!(
        steps,
        [
            Step::Label {
                pod: "orders-0".into(),
                role: None
            },
            Step::Fence {
                pod: "orders-0".into(),
                failed: false
            },
        ]
    );
    // Being deleted, its server still answering as a primary.
    let mut terminating = old;
    terminating.stopping_until = Some(at(-50));
    terminating.label = None;
    let steps = plan(
        "orders-1",
        &[terminating.clone(), named.clone()],
        &wanted(2),
        at(0),
    );
    assert!(
        !steps.contains(&Step::Promote {
            pod: "orders-1".into()
        }),
        "{steps:?}"
    );
    // Shutting down: no answer, but its server may still run for its grace period.
    let mut stopping = terminating;
    stopping.engine = None;
    let promote = [Step::Promote {
        pod: "orders-1".into(),
    }];
    assert_eq!(
        plan(
            "orders-1",
            &[stopping.clone(), named.clone()],
            &wanted(2),
            at(0)
        ),
        []
    );
    // Past its grace period it was killed, or its node is lost.
    assert_eq!(
        plan("orders-1", &[stopping, named.clone()], &wanted(2), at(-51)),
        promote
    );
    assert_eq!(plan("orders-1", &[named], &wanted(2), at(0)), promote);
}

#[test]
fn after_a_promotion_the_others_follow_the_new_primary_and_get_their_labels() {
    let mut new_primary = primary(1, 120);
    new_primary.label = None;
    let mut old = replica(0, 100, "orders-1");
    old.label = None;
    let behind = replica(2, 100, "orders-0");
    let steps = plan("orders-1", &[old, new_primary, behind], &wanted(3), at(0));
    assert_eq!(
        steps,
        [
            Step::Label {
                pod: "orders-0".into(),
                role: Some("replica")
            },
            Step::Label {
                pod: "orders-1".into(),
                role: Some("primary")
            },
            Step::Label {
                pod: "orders-2".into(),
                role: None
            },
            Step::Repoint {
                pod: "orders-2".into(),
                primary: "orders-1".into()
            },
        ]
    );
}

#[test]
fn a_switchover_names_a_ready_replica_and_fences_the_old_primary() {
    let set = [
        primary(0, 100),
        replica(1, 100, "orders-0"),
        replica(2, 100, "orders-0"),
    ];
    let mut asked = wanted(3);
    asked.switchover_to = Some("orders-2".into());
    assert_eq!(
        plan("orders-0", &set, &asked, at(0)),
        [
            Step::HandOver {
                from: "orders-0".into(),
                to: "orders-2".into()
            },
            Step::NamePrimary {
                to: "orders-2".into(),
                why: Why::Switchover
            },
            Step::Label {
                pod: "orders-0".into(),
                role: None
            },
            Step::Fence {
                pod: "orders-0".into(),
                failed: false
            },
        ]
    );
    asked.switchover_to = Some("orders-9".into());
    assert!(
        plan("orders-0", &set, &asked, at(0)).is_empty(),
        "no such instance"
    );
}

#[test]
fn scaling_away_the_primary_hands_over_first() {
    let set = [
        replica(0, 100, "orders-2"),
        replica(1, 100, "orders-2"),
        primary(2, 100),
    ];
    assert_eq!(
        plan("orders-2", &set, &wanted(2), at(0))[..2],
        [
            Step::HandOver {
                from: "orders-2".into(),
                to: "orders-0".into()
            },
            Step::NamePrimary {
                to: "orders-0".into(),
                why: Why::ScaleDown
            }
        ]
    );
}

#[test]
fn a_failed_primary_is_replaced_without_a_hand_over() {
    let mut set = [primary(0, 100), replica(1, 100, "orders-0")];
    set[0].ready = false;
    set[0].unready_since = Some(at(0));
    let steps = plan("orders-0", &set, &wanted(2), at(60));
    assert!(
        matches!(
            steps.first(),
            Some(Step::NamePrimary {
                why: Why::Failover,
                ..
            })
        ),
        "{steps:?}"
    );
    assert!(!steps.iter().any(|s| matches!(s, Step::HandOver { .. })));
}

#[test]
fn synchronous_mode_follows_the_spec_and_needs_a_replica() {
    let set = [primary(0, 100), replica(1, 100, "orders-0")];
    let mut sync = wanted(2);
    sync.synchronous = true;
    assert_eq!(
        plan("orders-0", &set, &sync, at(0)),
        [Step::Synchronous {
            pod: "orders-0".into(),
            on: true
        }]
    );
    let mut alone = primary(0, 100);
    alone.engine = Some(EngineState {
        synchronous: true,
        ..alone.engine.clone().expect("engine")
    });
    let mut single = wanted(1);
    single.synchronous = true;
    assert_eq!(
        plan("orders-0", &[alone], &single, at(0)),
        [Step::Synchronous {
            pod: "orders-0".into(),
            on: false
        }],
        "one instance cannot wait for a replica"
    );
}

#[test]
fn an_instance_that_did_not_answer_keeps_its_label() {
    let mut silent = primary(0, 100);
    silent.engine = None;
    let set = [silent, replica(1, 100, "orders-0")];
    let steps = plan("orders-0", &set, &wanted(2), at(0));
    assert!(
        !steps
            .iter()
            .any(|s| matches!(s, Step::Label { pod, .. } if pod == "orders-0")),
        "{steps:?}"
    );
}

/// A mysql instance's history from GTID set texts.
fn history(executed: &str, purged: &str) -> History {
    History {
        executed: GtidSet::parse(executed).expect("executed"),
        purged: GtidSet::parse(purged).expect("purged"),
    }
}

const FIRST: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";
const SECOND: &str = "4e11fa47-71ca-11e1-9e33-c80aa9429562";

/// A mysql set: orders-0 the primary with 100 transactions (the first 20 purged), and
/// orders-1 just started with no source and the given history.
fn mysql_set(replica_executed: &str) -> [Instance; 2] {
    let mut primary = primary(0, 100);
    if let Some(engine) = primary.engine.as_mut() {
        engine.history = Some(history(&format!("{FIRST}:1-100"), &format!("{FIRST}:1-20")));
    }
    let mut restarted = replica(1, 0, "orders-0");
    if let Some(engine) = restarted.engine.as_mut() {
        engine.upstream = None;
        engine.streaming = false;
        engine.history = Some(history(replica_executed, ""));
    }
    [primary, restarted]
}

#[test]
fn a_mysql_instance_whose_history_the_primary_holds_is_repointed() {
    let steps = plan(
        "orders-0",
        &mysql_set(&format!("{FIRST}:1-60")),
        &wanted(2),
        at(0),
    );
    assert!(
        steps.contains(&Step::Repoint {
            pod: "orders-1".into(),
            primary: "orders-0".into()
        }),
        "{steps:?}"
    );
}

#[test]
fn a_mysql_instance_with_transactions_of_its_own_or_missing_purged_ones_is_reseeded() {
    for executed in [
        // A fresh instance's own initialisation, or an old primary's unreplicated writes.
        format!("{FIRST}:1-60,{SECOND}:1-3"),
        format!("{FIRST}:1-101"),
        // Needs transactions the primary no longer has in its log.
        format!("{FIRST}:1-10"),
        String::new(),
    ] {
        let steps = plan("orders-0", &mysql_set(&executed), &wanted(2), at(0));
        assert!(
            steps.contains(&Step::Reseed {
                pod: "orders-1".into(),
                primary: "orders-0".into()
            }),
            "{executed}: {steps:?}"
        );
    }
}

#[test]
fn a_mysql_replica_already_following_is_never_reseeded() {
    // Read a moment after the primary: it applied a transaction the primary's answer did
    // not include yet.
    let [primary, mut following] = mysql_set(&format!("{FIRST}:1-101"));
    if let Some(engine) = following.engine.as_mut() {
        engine.upstream = Some("orders-0".into());
        engine.streaming = true;
    }
    let steps = plan("orders-0", &[primary, following], &wanted(2), at(0));
    assert!(
        !steps.iter().any(|s| matches!(s, Step::Reseed { .. })),
        "{steps:?}"
    );
}

/// A postgres primary at `0x900_0000` whose oldest WAL starts at `oldest`, and its
/// replica at `position`, streaming or not.
fn postgres_log_set(oldest: u64, position: u64, streaming: bool) -> [Instance; 2] {
    let mut primary = primary(0, 0x900_0000);
    if let Some(engine) = primary.engine.as_mut() {
        engine.oldest_log = Some(oldest);
    }
    let mut replica = replica(1, position, "orders-0");
    if let Some(engine) = replica.engine.as_mut() {
        engine.streaming = streaming;
    }
    [primary, replica]
}

#[test]
fn a_postgres_replica_behind_the_primarys_oldest_log_is_cloned_anew() {
    let steps = plan(
        "orders-0",
        &postgres_log_set(0x500_0000, 0x4ff_ffff, false),
        &wanted(2),
        at(0),
    );
    assert!(
        steps.contains(&Step::Reseed {
            pod: "orders-1".into(),
            primary: "orders-0".into()
        }),
        "{steps:?}"
    );
}

#[test]
fn a_postgres_replica_the_primarys_log_still_reaches_or_that_streams_is_kept() {
    for (position, streaming) in [
        // Not streaming for a moment, but the log it needs is still there.
        (0x500_0000, false),
        (0x800_0000, false),
        // Streaming: it fetches as the primary writes, whatever the two answers say.
        (0x100_0000, true),
    ] {
        let steps = plan(
            "orders-0",
            &postgres_log_set(0x500_0000, position, streaming),
            &wanted(2),
            at(0),
        );
        assert!(
            !steps.iter().any(|s| matches!(s, Step::Reseed { .. })),
            "{position:x} {streaming}: {steps:?}"
        );
    }
}

fn keeping_log(mut instance: Instance, megabytes: u64) -> Instance {
    if let Some(engine) = instance.engine.as_mut() {
        engine.log_kept_mb = Some(megabytes);
    }
    instance
}

#[test]
fn a_primary_that_keeps_too_little_log_for_its_replicas_is_told_to_keep_more() {
    let set = [
        keeping_log(primary(0, 100), 0),
        keeping_log(replica(1, 100, "orders-0"), 0),
    ];
    assert_eq!(
        plan("orders-0", &set, &wanted(2), at(0)),
        [Step::KeepLog {
            pod: "orders-0".into(),
            megabytes: 256
        }],
        "the replica's own setting does not matter"
    );
    let kept = [
        keeping_log(primary(0, 100), 256),
        keeping_log(replica(1, 100, "orders-0"), 0),
    ];
    assert_eq!(plan("orders-0", &kept, &wanted(2), at(0)), []);
    assert_eq!(
        plan(
            "orders-0",
            &[keeping_log(primary(0, 100), 0)],
            &wanted(1),
            at(0)
        ),
        [],
        "one instance has no replica to keep log for"
    );
    assert_eq!(
        plan(
            "orders-0",
            &[primary(0, 100), replica(1, 100, "orders-0")],
            &wanted(2),
            at(0)
        ),
        [],
        "an engine that does not report it is left as it is"
    );
}
