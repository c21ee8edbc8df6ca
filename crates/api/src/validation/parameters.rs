//! Rules for `spec.parameters`: every name in the engine's table and not owned by the
//! operator, every value one safe line, and no setting given twice under two spellings.

use std::collections::BTreeMap;

use super::Outcome;
use crate::DatabaseSpec;
use crate::parameters::{Refusal, canonical, setting, value_problem};

pub(super) fn check(spec: &DatabaseSpec, outcome: &mut Outcome) {
    let Some(parameters) = &spec.parameters else {
        return;
    };
    let engine = spec.engine;
    let mut spellings: BTreeMap<String, &str> = BTreeMap::new();
    for (name, value) in parameters {
        let path = format!("spec.parameters.{name}");
        match setting(engine, name) {
            Err(Refusal::Owned(why)) => outcome.error(
                &path,
                format!("is set by the operator ({why}) and cannot be given"),
            ),
            Err(Refusal::Unknown) => outcome.error(
                &path,
                format!("is not among the {engine} settings the operator accepts (the README lists them)"),
            ),
            Ok(entry) => {
                if let Some(problem) = value_problem(engine, value) {
                    outcome.error(&path, format!("the value {problem}"));
                } else if let Some(problem) = entry.kind.problem(value) {
                    outcome.error(&path, format!("the value {value:?} {problem}"));
                }
            }
        }
        if let Some(other) = spellings.insert(canonical(engine, name), name) {
            outcome.error(
                &path,
                format!("is the same setting as spec.parameters.{other}; give it once"),
            );
        }
    }
}

/// postgres settings a standby must keep at least as high as its primary's.
const STANDBY_FLOORS: [&str; 4] = [
    "max_connections",
    "max_worker_processes",
    "max_locks_per_transaction",
    "max_prepared_transactions",
];

/// Warns when an update lowers a postgres setting a standby needs at least as high as
/// its primary: the rollout restarts the replicas first.
pub(super) fn check_update(old: &DatabaseSpec, new: &DatabaseSpec, outcome: &mut Outcome) {
    if new.engine != crate::Engine::Postgres || new.replicas < 2 {
        return;
    }
    let value = |spec: &DatabaseSpec, name: &str| {
        spec.parameters
            .as_ref()?
            .get(name)?
            .trim()
            .parse::<u64>()
            .ok()
    };
    for name in STANDBY_FLOORS {
        if let (Some(before), Some(after)) = (value(old, name), value(new, name))
            && after < before
        {
            outcome.warn(format!(
                "spec.parameters.{name} goes down from {before} to {after}: the replicas restart first, and a standby may stop replaying until its primary runs with the lower value too; lowering it with one instance avoids that"
            ));
        }
    }
}
