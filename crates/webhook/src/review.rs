//! The `admission.k8s.io/v1` AdmissionReview on the wire: the request as the API server
//! sends it, and the response written by hand so that `patch` is base64 as the API
//! server requires (kube's `AdmissionResponse` writes it as an array of numbers,
//! kube-rs/kube#1781).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use database_api::Database;
use database_api::validation::FieldError;
use kube::core::admission::{META_API_VERSION_V1, META_KIND, Operation};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why a body is not an AdmissionReview this webhook can answer; the answer is a 400.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("the body is not JSON of an AdmissionReview: {0}")]
    Json(#[from] serde_json::Error),
    #[error("expected {META_API_VERSION_V1} {META_KIND}, got {api_version} {kind}")]
    WrongType { api_version: String, kind: String },
    #[error("the AdmissionReview has no request")]
    NoRequest,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IncomingReview {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    request: Option<Request>,
}

/// The parts of an AdmissionRequest the webhook reads. The objects stay JSON so that a
/// malformed one is refused with the field it breaks instead of a 400.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Request {
    pub uid: String,
    pub operation: Operation,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub namespace: Option<String>,
    #[serde(default)]
    pub object: Option<Value>,
    #[serde(default)]
    pub old_object: Option<Value>,
    /// The subresource written (`scale`); its objects are then of that subresource's
    /// kind, not Databases.
    #[serde(default)]
    pub sub_resource: Option<String>,
    /// Dry-run requests get the same answer; nothing the webhook does has side effects.
    #[serde(default)]
    pub dry_run: Option<bool>,
}

/// Reads an `admission.k8s.io/v1` AdmissionReview and returns its request.
pub fn decode(body: &[u8]) -> Result<Request, DecodeError> {
    let review: IncomingReview = serde_json::from_slice(body)?;
    if review.api_version != META_API_VERSION_V1 || review.kind != META_KIND {
        return Err(DecodeError::WrongType {
            api_version: review.api_version,
            kind: review.kind,
        });
    }
    review.request.ok_or(DecodeError::NoRequest)
}

/// Reads a Database out of an admission object, naming the field that does not fit.
pub fn database(object: &Value) -> Result<Database, FieldError> {
    serde_path_to_error::deserialize(object).map_err(|err| {
        let path = err.path().to_string();
        FieldError::new(path, err.into_inner().to_string())
    })
}

/// The AdmissionResponse the webhook sends back.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    uid: String,
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    /// Base64 of the JSON patch.
    #[serde(skip_serializing_if = "Option::is_none")]
    patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patch_type: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Status {
    code: u16,
    reason: &'static str,
    message: String,
}

impl Response {
    /// Allows the request with `uid`.
    pub fn allow(uid: &str) -> Self {
        Self {
            uid: uid.to_owned(),
            allowed: true,
            status: None,
            patch: None,
            patch_type: None,
            warnings: Vec::new(),
        }
    }

    /// Refuses the request with `uid`; `message` is what `kubectl` prints after
    /// `admission webhook "..." denied the request:`.
    pub fn deny(uid: &str, message: String) -> Self {
        Self {
            allowed: false,
            status: Some(Status {
                code: 403,
                reason: "Forbidden",
                message,
            }),
            ..Self::allow(uid)
        }
    }

    /// Adds warnings, which `kubectl` prints as `Warning: ...`.
    #[must_use]
    pub fn with_warnings(mut self, warnings: Vec<String>) -> Self {
        self.warnings = warnings;
        self
    }

    /// Adds a JSON patch, encoded as the API server expects: base64 of its JSON.
    #[must_use]
    pub fn with_patch(mut self, patch: &json_patch::Patch) -> Self {
        // A Patch is plain data; serializing it cannot fail, and if it ever did the
        // request would go through unchanged rather than with a broken patch.
        if let Ok(json) = serde_json::to_vec(patch) {
            self.patch = Some(STANDARD.encode(json));
            self.patch_type = Some("JSONPatch");
        }
        self
    }

    /// Whether the request is allowed.
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// Whether a patch is attached.
    pub fn has_patch(&self) -> bool {
        self.patch.is_some()
    }

    /// The whole AdmissionReview to send back.
    pub fn into_review(self) -> Value {
        serde_json::json!({
            "apiVersion": META_API_VERSION_V1,
            "kind": META_KIND,
            "response": self,
        })
    }
}

/// Whether an operation is one the webhook judges; the others are allowed as they are.
pub fn is_create_or_update(operation: &Operation) -> bool {
    matches!(operation, Operation::Create | Operation::Update)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(request: &Value) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request
        }))
        .expect("json")
    }

    #[test]
    fn a_review_from_the_api_server_decodes() {
        let body = review(&json!({
            "uid": "705ab4f5", "operation": "CREATE", "name": "a", "namespace": "ns",
            "kind": {"group": "mycompany.io", "version": "v1", "kind": "Database"},
            "object": {"metadata": {"name": "a"}}, "oldObject": null, "dryRun": true
        }));
        let request = decode(&body).expect("decodes");
        assert_eq!(request.uid, "705ab4f5");
        assert_eq!(request.operation, Operation::Create);
        assert_eq!(request.dry_run, Some(true));
        assert!(request.object.is_some() && request.old_object.is_none());
    }

    #[test]
    fn another_api_version_or_no_request_is_refused() {
        let v1beta1 = br#"{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE"}}"#;
        assert!(matches!(
            decode(v1beta1),
            Err(DecodeError::WrongType { .. })
        ));
        let empty = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#;
        assert!(matches!(decode(empty), Err(DecodeError::NoRequest)));
        assert!(matches!(decode(b"{"), Err(DecodeError::Json(_))));
    }

    #[test]
    fn a_malformed_object_names_the_field() {
        let object = json!({"metadata": {"name": "a"},
            "spec": {"engine": "postgres", "version": "16", "storage": "1Gi", "replicas": "three"}});
        let err = database(&object).expect_err("replicas is not a number");
        assert_eq!(err.path, "spec.replicas");
        assert!(err.message.contains("invalid type"), "{err}");
    }

    #[test]
    fn the_patch_is_base64_of_the_json_patch() {
        let patch: json_patch::Patch =
            serde_json::from_value(json!([{"op": "add", "path": "/spec/replicas", "value": 1}]))
                .expect("patch");
        let review = Response::allow("u").with_patch(&patch).into_review();
        let encoded = review["response"]["patch"].as_str().expect("a string");
        let decoded: Value =
            serde_json::from_slice(&STANDARD.decode(encoded).expect("base64")).expect("json");
        assert_eq!(
            decoded,
            json!([{"op": "add", "path": "/spec/replicas", "value": 1}])
        );
        assert_eq!(review["response"]["patchType"], "JSONPatch");
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(review["kind"], "AdmissionReview");
    }

    #[test]
    fn a_denial_carries_the_message_and_warnings() {
        let review = Response::deny("u", "spec.storage: must be at least 1Gi".into())
            .with_warnings(vec!["w".into()])
            .into_review();
        assert_eq!(
            review["response"],
            json!({"uid": "u", "allowed": false, "warnings": ["w"],
                   "status": {"code": 403, "reason": "Forbidden",
                              "message": "spec.storage: must be at least 1Gi"}})
        );
    }
}
