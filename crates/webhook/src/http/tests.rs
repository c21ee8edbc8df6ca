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
