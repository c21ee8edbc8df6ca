//! The HTTP surface: the router of admission, health and metrics endpoints, and the
//! checks every admission body passes before it is decoded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use database_api::validation::Limits;

use crate::admission;
use crate::metrics::{Endpoint, Metrics, Verdict};
use crate::review;

/// Path of the validating webhook (kubebuilder's naming: group with dashes, version, kind).
pub const VALIDATE_PATH: &str = "/validate-mycompany-io-v1-database";
/// Path of the mutating (defaulting) webhook.
pub const MUTATE_PATH: &str = "/mutate-mycompany-io-v1-database";
/// Largest accepted body. An UPDATE review carries the object twice, and an object may
/// be up to etcd's 3 MiB request limit, so axum's 2 MB default would refuse legal reviews.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;
/// Longest time for reading a request and answering it. The API server gives up after
/// the webhook's timeoutSeconds (5) anyway; this bounds slow clients.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    pub limits: Limits,
    pub metrics: Arc<Metrics>,
    pub request_timeout: Duration,
}

impl AppState {
    /// State with `limits`, fresh metrics and the default request timeout.
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            metrics: Arc::new(Metrics::default()),
            request_timeout: REQUEST_TIMEOUT,
        }
    }
}

/// Every endpoint of the webhook server.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(VALIDATE_PATH, post(validate))
        .route(MUTATE_PATH, post(mutate))
        .route("/healthz", get(|| async { "ok" }))
        // Ready as soon as it serves: the certificate is loaded before the listener opens.
        .route("/readyz", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(middleware::from_fn_with_state(state.clone(), timeout))
        .with_state(state)
}

/// Answers 408 when reading the body and answering take longer than the timeout.
async fn timeout(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(state.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => (StatusCode::REQUEST_TIMEOUT, "request timed out\n").into_response(),
    }
}

#[tracing::instrument(name = "validate", skip_all)]
async fn validate(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let started = Instant::now();
    let request = match read(&headers, &body) {
        Ok(request) => request,
        Err(refusal) => {
            return refused(&state, Endpoint::Validate, started, refusal);
        }
    };
    let (response, outcome) = admission::validate(&request, state.limits);
    let verdict = if response.is_allowed() {
        Verdict::Allowed
    } else {
        for error in &outcome.errors {
            state.metrics.denied_field(&error.path);
        }
        Verdict::Denied
    };
    // A denial is news for whoever reads the log; an allowed request is routine (the API
    // server's audit log has them all), and logging each costs a write per request.
    if response.is_allowed() {
        tracing::debug!(
            uid = %request.uid,
            namespace = request.namespace.as_deref().unwrap_or_default(),
            name = %request.name,
            operation = ?request.operation,
            sub_resource = request.sub_resource.as_deref().unwrap_or_default(),
            dry_run = request.dry_run.unwrap_or(false),
            warnings = outcome.warnings.len(),
            "allowed"
        );
    } else {
        tracing::info!(
            uid = %request.uid,
            namespace = request.namespace.as_deref().unwrap_or_default(),
            name = %request.name,
            operation = ?request.operation,
            sub_resource = request.sub_resource.as_deref().unwrap_or_default(),
            dry_run = request.dry_run.unwrap_or(false),
            denied = %outcome.message(),
            "denied"
        );
    }
    answered(&state, Endpoint::Validate, verdict, started, response)
}

#[tracing::instrument(name = "mutate", skip_all)]
async fn mutate(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let started = Instant::now();
    let request = match read(&headers, &body) {
        Ok(request) => request,
        Err(refusal) => return refused(&state, Endpoint::Mutate, started, refusal),
    };
    let response = admission::mutate(&request);
    let verdict = if response.has_patch() {
        Verdict::Patched
    } else {
        Verdict::Allowed
    };
    tracing::debug!(
        uid = %request.uid,
        namespace = request.namespace.as_deref().unwrap_or_default(),
        name = %request.name,
        operation = ?request.operation,
        dry_run = request.dry_run.unwrap_or(false),
        patched = response.has_patch(),
        "defaulted"
    );
    answered(&state, Endpoint::Mutate, verdict, started, response)
}

async fn metrics(State(state): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.metrics.encode(),
    )
        .into_response()
}

/// The body checks: JSON content type, not empty, an `admission.k8s.io/v1` review.
fn read(headers: &HeaderMap, body: &Bytes) -> Result<review::Request, String> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default();
    let media_type = content_type.split(';').next().unwrap_or_default().trim();
    if !media_type.eq_ignore_ascii_case("application/json") {
        return Err(format!(
            "Content-Type must be application/json, got {content_type:?}"
        ));
    }
    if body.is_empty() {
        return Err("the body is empty; expected an AdmissionReview".into());
    }
    review::decode(body).map_err(|err| err.to_string())
}

fn refused(state: &AppState, endpoint: Endpoint, started: Instant, reason: String) -> Response {
    tracing::warn!(?endpoint, %reason, "refused a request that is not an AdmissionReview");
    state
        .metrics
        .observe(endpoint, Verdict::Rejected, started.elapsed());
    (StatusCode::BAD_REQUEST, Body::from(reason + "\n")).into_response()
}

fn answered(
    state: &AppState,
    endpoint: Endpoint,
    verdict: Verdict,
    started: Instant,
    response: review::Response,
) -> Response {
    let body = response.into_review();
    state.metrics.observe(endpoint, verdict, started.elapsed());
    axum::Json(body).into_response()
}

#[cfg(test)]
mod tests;
