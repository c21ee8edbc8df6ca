//! The router in-process (`oneshot`): status codes, body checks and metrics.

use super::*;
use axum::http::Request;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;

fn app() -> Router {
    router(AppState::new(Limits::default()))
}

fn review(spec: &Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "3f1c", "operation": "CREATE",
            "object": {"apiVersion": "mycompany.io/v1", "kind": "Database",
                       "metadata": {"name": "orders-db"}, "spec": spec}}
    }))
    .expect("json")
}

async fn post(
    app: Router,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, Vec<u8>) {
    let mut request = Request::post(path);
    if let Some(content_type) = content_type {
        request = request.header(header::CONTENT_TYPE, content_type);
    }
    let response = app
        .oneshot(request.body(Body::from(body)).expect("request"))
        .await
        .expect("infallible");
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, body.to_vec())
}

#[tokio::test]
async fn a_valid_review_is_answered_with_its_uid() {
    let body = review(&json!({"engine": "postgres", "version": "16", "storage": "10Gi"}));
    let (status, body) = post(app(), VALIDATE_PATH, Some("application/json"), body).await;
    assert_eq!(status, StatusCode::OK);
    let answer: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], "3f1c");
    assert_eq!(answer["response"]["allowed"], true);
}

#[tokio::test]
async fn an_invalid_database_is_denied_with_status_200() {
    let body = review(&json!({"engine": "postgres", "version": "16", "storage": "10G"}));
    let (status, body) = post(
        app(),
        VALIDATE_PATH,
        Some("application/json; charset=utf-8"),
        body,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let answer: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(
        answer["response"]["status"]["message"],
        r#"spec.storage: must be whole gibibytes like "10Gi""#
    );
}

#[tokio::test]
async fn the_mutating_endpoint_answers_with_a_base64_patch() {
    let body = review(&json!({"engine": "postgres", "version": "16", "storage": "10Gi"}));
    let (status, body) = post(app(), MUTATE_PATH, Some("application/json"), body).await;
    assert_eq!(status, StatusCode::OK);
    let answer: Value = serde_json::from_slice(&body).expect("json");
    assert!(answer["response"]["patch"].is_string(), "{answer}");
    assert_eq!(answer["response"]["patchType"], "JSONPatch");
}

#[tokio::test]
async fn a_wrong_content_type_an_empty_body_and_bad_json_are_400() {
    let good = review(&json!({"engine": "postgres", "version": "16", "storage": "10Gi"}));
    let cases: [(Option<&str>, Vec<u8>); 5] = [
        (Some("text/plain"), good.clone()),
        (None, good),
        (Some("application/json"), Vec::new()),
        (Some("application/json"), b"{not json".to_vec()),
        (
            Some("application/json"),
            br#"{"apiVersion":"v1","kind":"Pod"}"#.to_vec(),
        ),
    ];
    for (content_type, body) in cases {
        for path in [VALIDATE_PATH, MUTATE_PATH] {
            let (status, text) = post(app(), path, content_type, body.clone()).await;
            assert_eq!(
                status,
                StatusCode::BAD_REQUEST,
                "{path} {content_type:?}: {}",
                String::from_utf8_lossy(&text)
            );
        }
    }
}

#[tokio::test]
async fn a_body_past_seven_mebibytes_is_413_and_one_just_under_is_read() {
    let too_big = vec![b' '; MAX_BODY_BYTES + 1];
    let (status, _) = post(app(), VALIDATE_PATH, Some("application/json"), too_big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);

    // A legal UPDATE of a large object: padded JSON just under the limit still decodes.
    let mut big = review(&json!({"engine": "postgres", "version": "16", "storage": "10Gi"}));
    big.resize(MAX_BODY_BYTES, b' ');
    let (status, _) = post(app(), VALIDATE_PATH, Some("application/json"), big).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn health_readiness_and_metrics_are_served() {
    let app = app();
    for path in ["/healthz", "/readyz"] {
        let response = app
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).expect("request"))
            .await
            .expect("infallible");
        assert_eq!(response.status(), StatusCode::OK, "{path}");
    }
    let body = review(&json!({"engine": "postgres", "version": "12", "storage": "10Gi"}));
    post(app.clone(), VALIDATE_PATH, Some("application/json"), body).await;
    post(app.clone(), VALIDATE_PATH, Some("text/plain"), Vec::new()).await;
    let response = app
        .oneshot(
            Request::get("/metrics")
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    let text = String::from_utf8(
        response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes()
            .to_vec(),
    )
    .expect("utf-8");
    assert!(
        text.contains(r#"requests_total{endpoint="validate",result="denied"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"requests_total{endpoint="validate",result="rejected"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"denials_total{field="spec.version"} 1"#),
        "{text}"
    );
}

#[tokio::test]
async fn a_get_on_an_admission_path_is_405() {
    let response = app()
        .oneshot(
            Request::get(VALIDATE_PATH)
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(response.status(), StatusCode::METHOD_NOT_ALLOWED);
}

/// What the API server sends for `kubectl scale db orders-db --replicas=N`: an UPDATE of
/// the `scale` subresource whose objects are autoscaling/v1 Scales, not Databases.
fn scale_review(replicas: Option<i32>, selector: Option<&str>) -> Vec<u8> {
    let scale = |replicas: Option<i32>| {
        let mut spec = json!({});
        if let Some(replicas) = replicas {
            spec["replicas"] = json!(replicas);
        }
        let mut status = json!({"replicas": 1});
        if let Some(selector) = selector {
            status["selector"] = json!(selector);
        }
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
               "metadata": {"name": "orders-db", "namespace": "production"},
               "spec": spec, "status": status})
    };
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": "9a7e", "operation": "UPDATE",
            "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "resource": {"group": "mycompany.io", "version": "v1", "resource": "databases"},
            "subResource": "scale",
            "requestKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "requestResource": {"group": "mycompany.io", "version": "v1", "resource": "databases"},
            "requestSubResource": "scale",
            "name": "orders-db", "namespace": "production",
            "object": scale(replicas), "oldObject": scale(Some(1))}
    }))
    .expect("json")
}

async fn answer_of(path: &str, body: Vec<u8>) -> Value {
    let (status, body) = post(app(), path, Some("application/json"), body).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let answer: Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(answer["response"]["uid"], "9a7e", "{answer}");
    answer["response"].clone()
}

#[tokio::test]
async fn a_scale_within_bounds_is_allowed_without_warnings() {
    let answer = answer_of(VALIDATE_PATH, scale_review(Some(3), None)).await;
    assert_eq!(answer, json!({"uid": "9a7e", "allowed": true}));
    let single = answer_of(VALIDATE_PATH, scale_review(Some(1), None)).await;
    assert_eq!(single, json!({"uid": "9a7e", "allowed": true}));
}

#[tokio::test]
async fn a_scale_out_of_bounds_is_denied_naming_spec_replicas() {
    // Zero replicas leave `spec.replicas` out of the Scale (omitempty).
    for replicas in [Some(6), Some(-1), Some(0), None] {
        let answer = answer_of(VALIDATE_PATH, scale_review(replicas, None)).await;
        assert_eq!(answer["allowed"], false, "{replicas:?}: {answer}");
        assert_eq!(
            answer["status"]["message"], "spec.replicas: must be between 1 and 5",
            "{replicas:?}"
        );
    }
}

#[tokio::test]
async fn a_scale_warns_like_the_database_would_when_the_selector_names_the_engine() {
    let selector = "app.kubernetes.io/instance=orders-db,app.kubernetes.io/name=mongodb";
    let answer = answer_of(VALIDATE_PATH, scale_review(Some(4), Some(selector))).await;
    assert_eq!(answer["allowed"], true, "{answer}");
    assert_eq!(
        answer["warnings"],
        json!([
            "spec.replicas is 4: an even number of mongodb members cannot break a tie in an election; prefer an odd number"
        ])
    );
}

#[tokio::test]
async fn the_mutating_endpoint_leaves_a_scale_untouched() {
    let answer = answer_of(MUTATE_PATH, scale_review(Some(3), None)).await;
    assert_eq!(answer, json!({"uid": "9a7e", "allowed": true}));
}
