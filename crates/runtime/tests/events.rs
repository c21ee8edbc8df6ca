//! The event publisher against a real API server: a repeated notice becomes a series on
//! one Event, a different note a new Event.

// Publishing notices and reading the series back is one scenario, told in one function.
#![allow(clippy::too_many_lines)]

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use operator_runtime::events::{EventType, Notice, Publisher, Reporter};
use testenv::Options;
use testenv::toolkit::Cluster;

const NAMESPACE: &str = "shop";

fn notice(note: &str) -> Notice {
    Notice {
        type_: EventType::Warning,
        reason: "ReconcileFailed".to_owned(),
        note: note.to_owned(),
    }
}

#[tokio::test]
async fn repeats_fold_into_a_series_and_new_notes_make_new_events() {
    let cluster = Cluster::start(Options::default(), &[], NAMESPACE).await;
    let publisher = Publisher::new(
        cluster.client.clone(),
        Reporter {
            controller: "database-controller".to_owned(),
            instance: "test".to_owned(),
        },
    );
    let regarding = ObjectReference {
        api_version: Some("mycompany.io/v1".to_owned()),
        kind: Some("Database".to_owned()),
        namespace: Some(NAMESPACE.to_owned()),
        name: Some("orders".to_owned()),
        uid: Some("0b5e7a51-0000-4000-8000-000000000001".to_owned()),
        ..ObjectReference::default()
    };
    for _ in 0..3 {
        publisher
            .publish(&notice("cannot reach the API"), &regarding)
            .await
            .expect("published");
    }
    publisher
        .publish(&notice("something else"), &regarding)
        .await
        .expect("published");

    let list = cluster
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .expect("events listed");
    let mut seen: Vec<(String, Option<i32>)> = list
        .items
        .iter()
        .map(|e| {
            (
                e.note.clone().unwrap_or_default(),
                e.series.as_ref().map(|s| s.count),
            )
        })
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            ("cannot reach the API".to_owned(), Some(3)),
            ("something else".to_owned(), None),
        ]
    );
    let first = list
        .items
        .iter()
        .find(|e| e.series.is_some())
        .expect("the repeated event");
    assert_eq!(first.reason.as_deref(), Some("ReconcileFailed"));
    assert_eq!(first.type_.as_deref(), Some("Warning"));
    assert_eq!(
        first.reporting_controller.as_deref(),
        Some("database-controller")
    );
    assert_eq!(first.reporting_instance.as_deref(), Some("test"));
    assert_eq!(first.regarding.as_ref(), Some(&regarding));
}
