//! `status` as text: a Database and its recent events in, one screen out. Pure, so
//! every line is tested without a cluster; the clock is an argument for the same reason.

use std::fmt::Write as _;

use database_api::backup::BackupsStatus;
use database_api::constants::PAUSED_ANNOTATION;
use database_api::replication::InstanceStatus;
use database_api::{Database, DatabaseStatus, conditions};
use jiff::Timestamp;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;

use super::age::{age, moment};
use super::events::last_seen;
use super::table::table;
use crate::words::{phase, role};

/// Shown where a field has no value yet.
const NONE: &str = "<none>";

/// The whole `status` screen of `db` with its `events` (oldest first), as at `now`.
pub fn render(db: &Database, events: &[Event], now: Timestamp) -> String {
    let empty = DatabaseStatus::default();
    let status = db.status.as_ref().unwrap_or(&empty);
    [
        summary(db, status),
        section("INSTANCES", &instances(&status.instances)),
        section("BACKUPS", &backups(db, status, now)),
        section("CONDITIONS", &conditions_table(&status.conditions, now)),
        section("RECENT EVENTS", &events_table(events, now)),
    ]
    .join("\n")
}

/// A heading over its body.
fn section(title: &str, body: &str) -> String {
    format!("{title}\n{body}")
}

/// `label: value` lines with the values lined up.
fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(l, _)| l.len()).max().unwrap_or(0) + 3;
    let mut out = String::new();
    for (label, value) in pairs {
        let label = format!("{label}:");
        let _ = writeln!(out, "{label:<width$}{value}");
    }
    out
}

fn summary(db: &Database, status: &DatabaseStatus) -> String {
    let mut pairs = vec![
        ("Name", db.name_any()),
        ("Namespace", db.namespace().unwrap_or_default()),
        ("Engine", format!("{} {}", db.spec.engine, db.spec.version)),
        ("Phase", phase(status.phase).to_owned()),
    ];
    if let Some(message) = status.message.as_deref().filter(|m| !m.is_empty()) {
        pairs.push(("Message", one_line(message)));
    }
    pairs.extend([
        ("Endpoint", or_none(status.endpoint.as_deref())),
        ("Primary", or_none(status.primary.as_deref())),
        (
            "Instances",
            format!("{}/{} ready", status.replicas, db.spec.replicas),
        ),
    ]);
    if crate::pause::is_paused(db) {
        pairs.push((
            "Paused",
            format!("yes: the operator changes nothing ({PAUSED_ANNOTATION})"),
        ));
    }
    fields(&pairs)
}

fn instances(instances: &[InstanceStatus]) -> String {
    if instances.is_empty() {
        return "No instances reported yet.\n".to_owned();
    }
    let rows: Vec<[String; 4]> = instances
        .iter()
        .map(|i| {
            [
                i.name.clone(),
                role(i.role).to_owned(),
                i.ready.to_string(),
                lag(i),
            ]
        })
        .collect();
    table(["NAME", "ROLE", "READY", "LAG"], &rows)
}

/// A replica's lag in the engine's own unit: bytes of WAL (postgres), transactions
/// (mysql), seconds (mongodb); `-` where there is none to tell.
fn lag(instance: &InstanceStatus) -> String {
    let measured = [
        (instance.lag_bytes, "byte"),
        (instance.lag_transactions, "transaction"),
        (instance.lag_seconds, "second"),
    ];
    measured
        .into_iter()
        .find_map(|(value, unit)| value.map(|n| count(n, unit)))
        .unwrap_or_else(|| "-".to_owned())
}

/// `n` `unit`s, singular for one.
fn count(n: i64, unit: &str) -> String {
    if n == 1 {
        format!("1 {unit}")
    } else {
        format!("{n} {unit}s")
    }
}

fn backups(db: &Database, status: &DatabaseStatus, now: Timestamp) -> String {
    let empty = BackupsStatus::default();
    let backups = status.backups.as_deref().unwrap_or(&empty);
    let schedule = db.spec.backup.as_ref().map_or_else(
        || "none".to_owned(),
        |b| {
            let suspended = if b.suspend { " (suspended)" } else { "" };
            format!("{}{suspended}", b.schedule)
        },
    );
    let when = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
        t.map_or_else(|| NONE.to_owned(), |t| moment(t.0, now))
    };
    let last_result = conditions::find(&status.conditions, conditions::LAST_BACKUP_SUCCEEDED)
        .map_or_else(
            || "no backup has finished yet".to_owned(),
            |c| {
                let result = if c.status == conditions::TRUE {
                    "succeeded"
                } else {
                    "failed"
                };
                let mut text = format!(
                    "{result} ({}, {} ago)",
                    c.reason,
                    age(c.last_transition_time.0, now)
                );
                if !c.message.is_empty() {
                    text.push_str(": ");
                    text.push_str(&one_line(&c.message));
                }
                text
            },
        );
    fields(&[
        ("Schedule", schedule),
        ("Last succeeded", or_none(backups.last_succeeded.as_deref())),
        ("Last scheduled", when(backups.last_scheduled.as_ref())),
        ("Next scheduled", when(backups.next_scheduled.as_ref())),
        ("Last backup", last_result),
    ])
}

fn conditions_table(conditions: &[Condition], now: Timestamp) -> String {
    if conditions.is_empty() {
        return "No conditions reported yet.\n".to_owned();
    }
    let rows: Vec<[String; 5]> = conditions
        .iter()
        .map(|c| {
            [
                c.type_.clone(),
                c.status.clone(),
                c.reason.clone(),
                age(c.last_transition_time.0, now),
                one_line(&c.message),
            ]
        })
        .collect();
    table(["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], &rows)
}

fn events_table(events: &[Event], now: Timestamp) -> String {
    if events.is_empty() {
        return "No recent events.\n".to_owned();
    }
    let rows: Vec<[String; 4]> = events
        .iter()
        .map(|e| {
            [
                last_seen(e).map_or_else(|| NONE.to_owned(), |t| age(t, now)),
                e.type_.clone().unwrap_or_default(),
                e.reason.clone().unwrap_or_default(),
                one_line(e.note.as_deref().unwrap_or_default()),
            ]
        })
        .collect();
    table(["AGE", "TYPE", "REASON", "NOTE"], &rows)
}

/// A message on one line, so a table row stays one row.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn or_none(value: Option<&str>) -> String {
    value.filter(|v| !v.is_empty()).unwrap_or(NONE).to_owned()
}

#[cfg(test)]
mod tests;
