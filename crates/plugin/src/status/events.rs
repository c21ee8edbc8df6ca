//! Which Events `status` shows: the last few events.k8s.io/v1 Events regarding this
//! Database (not an earlier one of the same name), oldest first, so the newest is
//! nearest the prompt.

use database_api::Database;
use database_api::constants::GROUP;
use jiff::Timestamp;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;

/// How many events `status` shows.
pub const SHOWN: usize = 10;

/// The field selector that asks the API server for the events regarding Database
/// `name` only.
pub fn field_selector(name: &str) -> String {
    format!("regarding.kind=Database,regarding.name={name}")
}

/// When `event` last happened: the last of its series, else its (deprecated) last
/// timestamp, else when it was first observed, else when it was written.
pub fn last_seen(event: &Event) -> Option<Timestamp> {
    event
        .series
        .as_ref()
        .map(|s| s.last_observed_time.0)
        .or_else(|| event.deprecated_last_timestamp.as_ref().map(|t| t.0))
        .or_else(|| event.event_time.as_ref().map(|t| t.0))
        .or_else(|| event.metadata.creation_timestamp.as_ref().map(|t| t.0))
}

/// The last [`SHOWN`] of `events` regarding `db`, oldest first. An event naming
/// another uid was about an earlier Database of the same name; one naming another API
/// group is about another kind that happens to be called Database.
pub fn recent(events: Vec<Event>, db: &Database) -> Vec<Event> {
    let name = db.name_any();
    let uid = db.uid();
    let mut about: Vec<Event> = events
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().is_some_and(|r| {
                r.kind.as_deref() == Some("Database")
                    && r.name.as_deref() == Some(name.as_str())
                    && r.api_version
                        .as_deref()
                        .is_none_or(|v| v.split('/').next() == Some(GROUP))
                    && match (r.uid.as_deref(), uid.as_deref()) {
                        (Some(theirs), Some(ours)) => theirs == ours,
                        _ => true,
                    }
            })
        })
        .collect();
    about.sort_by_key(last_seen);
    let skip = about.len().saturating_sub(SHOWN);
    about.split_off(skip)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn db() -> Database {
        serde_json::from_value(json!({
            "apiVersion": "mycompany.io/v1", "kind": "Database",
            "metadata": {"name": "orders", "namespace": "shop", "uid": "u-1"},
            "spec": {"engine": "postgres", "version": "17", "storage": "1Gi"},
        }))
        .unwrap()
    }

    fn event(reason: &str, second: i64, regarding: &serde_json::Value) -> Event {
        let time = Timestamp::from_second(second).unwrap().to_string();
        serde_json::from_value(json!({
            "metadata": {"name": format!("e-{reason}")},
            "eventTime": time,
            "reason": reason,
            "regarding": regarding,
        }))
        .unwrap()
    }

    fn ours() -> serde_json::Value {
        json!({"apiVersion": "mycompany.io/v1", "kind": "Database", "name": "orders", "uid": "u-1"})
    }

    fn reasons(events: &[Event]) -> Vec<&str> {
        events.iter().filter_map(|e| e.reason.as_deref()).collect()
    }

    #[test]
    fn only_events_about_this_database_are_kept_oldest_first() {
        let events = vec![
            event("Later", 300, &ours()),
            event("Earlier", 100, &ours()),
            event("NoUid", 200, &json!({"kind": "Database", "name": "orders"})),
            event(
                "OldDatabase",
                250,
                &json!({"kind": "Database", "name": "orders", "uid": "u-0"}),
            ),
            event(
                "OtherName",
                250,
                &json!({"kind": "Database", "name": "users"}),
            ),
            event(
                "OtherKind",
                250,
                &json!({"kind": "StatefulSet", "name": "orders"}),
            ),
            event(
                "OtherGroup",
                250,
                &json!({"apiVersion": "example.com/v1", "kind": "Database", "name": "orders"}),
            ),
        ];
        assert_eq!(
            reasons(&recent(events, &db())),
            ["Earlier", "NoUid", "Later"]
        );
    }

    #[test]
    fn only_the_newest_ten_are_shown() {
        let events = (0..15)
            .map(|i| event(&format!("E{i}"), 1000 - i, &ours()))
            .collect();
        let shown = recent(events, &db());
        assert_eq!(shown.len(), SHOWN);
        assert_eq!(reasons(&shown).first(), Some(&"E9"));
        assert_eq!(reasons(&shown).last(), Some(&"E0"));
    }

    #[test]
    fn a_series_counts_from_its_last_occurrence() {
        let mut repeated = event("Repeated", 100, &ours());
        repeated.series = Some(k8s_openapi::api::events::v1::EventSeries {
            count: 5,
            last_observed_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                Timestamp::from_second(500).unwrap(),
            ),
        });
        let events = vec![repeated, event("Single", 300, &ours())];
        assert_eq!(reasons(&recent(events, &db())), ["Single", "Repeated"]);
    }

    #[test]
    fn the_selector_names_the_kind_and_the_name() {
        assert_eq!(
            field_selector("orders"),
            "regarding.kind=Database,regarding.name=orders"
        );
    }
}
