//! Property tests: no body and no Database spec makes the webhook panic or answer with
//! anything but a 400 or a well-formed AdmissionReview carrying the request's uid.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use database_api::validation::Limits;
use database_webhook::{AppState, MUTATE_PATH, VALIDATE_PATH, router};
use http_body_util::BodyExt as _;
use proptest::prelude::*;
use serde_json::{Value, json};
use tower::ServiceExt as _;

fn answer(path: &str, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let request = Request::post(path)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .expect("request");
        let response = router(AppState::new(Limits::default()))
            .oneshot(request)
            .await
            .expect("infallible");
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, bytes.to_vec())
    })
}

/// Arbitrary JSON, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map(".{0,8}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Specs that mix plausible and absurd values for each field.
fn spec() -> impl Strategy<Value = Value> {
    (
        prop_oneof![
            Just(json!("postgres")),
            Just(json!("mysql")),
            Just(json!("mongodb")),
            json_value()
        ],
        prop_oneof![
            "[0-9]{1,3}(\\.[0-9]{1,3}){0,3}".prop_map(Value::from),
            json_value()
        ],
        prop_oneof!["[0-9]{1,25}(Gi|Mi|G)?".prop_map(Value::from), json_value()],
        prop_oneof![any::<i64>().prop_map(Value::from), json_value()],
        prop_oneof![Just(json!("Retain")), Just(json!("Delete")), json_value()],
    )
        .prop_map(|(engine, version, storage, replicas, policy)| {
            json!({"engine": engine, "version": version, "storage": storage,
                   "replicas": replicas, "deletionPolicy": policy})
        })
}

fn review(operation: &str, object: &Value, old: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "p-1", "operation": operation, "object": object, "oldObject": old}
    }))
    .expect("json")
}

fn assert_well_formed(status: StatusCode, body: &[u8]) {
    if status == StatusCode::BAD_REQUEST {
        return;
    }
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(body));
    let answer: Value = serde_json::from_slice(body).expect("JSON answer");
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], "p-1");
    assert!(answer["response"]["allowed"].is_boolean());
    if let Some(patch) = answer["response"].get("patch") {
        assert!(patch.is_string(), "patch must be base64: {patch}");
    }
}

proptest! {
    // Integration tests have no lib.rs beside them to persist failing cases next to.
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_get_a_400_or_a_review(body in prop::collection::vec(any::<u8>(), 0..256)) {
        for path in [VALIDATE_PATH, MUTATE_PATH] {
            let (status, answer) = answer(path, body.clone());
            assert_well_formed(status, &answer);
        }
    }

    #[test]
    fn arbitrary_json_as_the_object_gets_a_well_formed_review(object in json_value(), old in json_value()) {
        for path in [VALIDATE_PATH, MUTATE_PATH] {
            for operation in ["CREATE", "UPDATE"] {
                let (status, answer) = answer(path, review(operation, &object, &old));
                assert_well_formed(status, &answer);
            }
        }
    }

    #[test]
    fn arbitrary_specs_are_judged_without_panicking(new in spec(), old in spec(), name in "[a-zA-Z0-9.-]{0,70}") {
        let object = |spec: &Value| json!({"apiVersion": "mycompany.io/v1", "kind": "Database",
                                           "metadata": {"name": name}, "spec": spec});
        for path in [VALIDATE_PATH, MUTATE_PATH] {
            let (status, answer) = answer(path, review("UPDATE", &object(&new), &object(&old)));
            prop_assert_eq!(status, StatusCode::OK);
            assert_well_formed(status, &answer);
        }
    }
}
