//! The two admission decisions, from a decoded request to a response: validate with
//! `database_api::validation`, default with `database_api::defaults`.

mod scale;

use database_api::validation::{self, Limits, Outcome};
use database_api::{Database, defaults};
use kube::core::admission::Operation;
use serde_json::Value;

use crate::review::{self, Request, Response};

/// Validates a CREATE (the object alone), an UPDATE (against the old object) or an
/// UPDATE through the scale subresource (the replica rules alone). A malformed object
/// is refused with the field it breaks. Other subresources are not judged.
pub fn validate(request: &Request, limits: Limits) -> (Response, Outcome) {
    let outcome = match (
        &request.operation,
        &request.object,
        request.sub_resource.as_deref(),
    ) {
        (Operation::Create | Operation::Update, Some(object), None) => judge(
            &request.operation,
            object,
            request.old_object.as_ref(),
            limits,
        ),
        (Operation::Update, Some(object), Some(scale::SUBRESOURCE)) => scale::judge(object),
        _ => Outcome::default(),
    };
    let response = if outcome.is_allowed() {
        Response::allow(&request.uid)
    } else {
        Response::deny(&request.uid, outcome.message())
    };
    (response.with_warnings(outcome.warnings.clone()), outcome)
}

fn judge(operation: &Operation, object: &Value, old: Option<&Value>, limits: Limits) -> Outcome {
    let new = match review::database(object) {
        Ok(new) => new,
        Err(error) => {
            return Outcome {
                errors: vec![error],
                warnings: Vec::new(),
            };
        }
    };
    // An old object that no longer reads as a Database (stored before a rule existed)
    // cannot be compared with; the new object is still held to every rule.
    let old: Option<Database> = old.and_then(|old| review::database(old).ok());
    match (operation, old) {
        (Operation::Update, Some(old)) => validation::validate_update(&old, &new, &limits),
        _ => validation::validate(&new, &limits),
    }
}

/// Fills in the defaults of absent fields as a JSON patch; never refuses (validation
/// does that) and never changes a value the user wrote. A subresource's object (a
/// Scale) is not a Database and has nothing to default.
pub fn mutate(request: &Request) -> Response {
    let allow = Response::allow(&request.uid);
    if !review::is_create_or_update(&request.operation) || request.sub_resource.is_some() {
        return allow;
    }
    let Some(original) = &request.object else {
        return allow;
    };
    let mut defaulted = original.clone();
    if defaults::apply_to_object(&mut defaulted).is_empty() {
        return allow;
    }
    allow.with_patch(&json_patch::diff(original, &defaulted))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use database_api::constants::labels;
    use serde_json::json;

    fn request(operation: &str, object: &Value, old: Option<&Value>) -> Request {
        review::decode(
            &serde_json::to_vec(&json!({
                "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": "u-1", "operation": operation, "object": object, "oldObject": old}
            }))
            .expect("json"),
        )
        .expect("a review")
    }

    fn db(spec: &Value) -> Value {
        json!({"apiVersion": "mycompany.io/v1", "kind": "Database",
               "metadata": {"name": "orders-db", "namespace": "production"}, "spec": spec})
    }

    fn answer(response: Response) -> Value {
        response.into_review()["response"].clone()
    }

    #[test]
    fn a_valid_create_is_allowed_with_the_request_uid() {
        let object = db(&json!({"engine": "postgres", "version": "16.4", "storage": "10Gi"}));
        let (response, _) = validate(&request("CREATE", &object, None), Limits::default());
        assert_eq!(answer(response), json!({"uid": "u-1", "allowed": true}));
    }

    #[test]
    fn an_invalid_create_is_denied_with_every_broken_rule() {
        let object =
            db(&json!({"engine": "postgres", "version": "12", "storage": "0Gi", "replicas": 7}));
        let (response, outcome) = validate(&request("CREATE", &object, None), Limits::default());
        let message = answer(response)["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(outcome.errors.len(), 3, "{message}");
        for field in ["spec.version", "spec.storage", "spec.replicas"] {
            assert!(message.contains(field), "{message}");
        }
    }

    #[test]
    fn an_engine_change_is_denied_by_the_webhook_itself() {
        let old = db(&json!({"engine": "postgres", "version": "16", "storage": "10Gi"}));
        let new = db(&json!({"engine": "mysql", "version": "8.4", "storage": "10Gi"}));
        let (response, _) = validate(&request("UPDATE", &new, Some(&old)), Limits::default());
        let answer = answer(response);
        assert_eq!(answer["allowed"], false);
        assert_eq!(
            answer["status"]["message"],
            "spec.engine: is immutable: it was postgres and cannot become mysql"
        );
    }

    #[test]
    fn a_malformed_object_is_denied_naming_the_field() {
        let object = db(&json!({"engine": "oracle", "version": "19", "storage": "10Gi"}));
        let (response, _) = validate(&request("CREATE", &object, None), Limits::default());
        let message = answer(response)["status"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            message.starts_with("spec.engine: unknown variant `oracle`"),
            "{message}"
        );
    }

    #[test]
    fn warnings_are_returned_with_an_allowed_request() {
        let object =
            db(&json!({"engine": "mongodb", "version": "7.0", "storage": "10Gi", "replicas": 2}));
        let (response, _) = validate(&request("CREATE", &object, None), Limits::default());
        let answer = answer(response);
        assert_eq!(answer["allowed"], true);
        assert_eq!(
            answer["warnings"].as_array().map(Vec::len),
            Some(1),
            "{answer}"
        );
    }

    #[test]
    fn the_patch_adds_exactly_the_missing_defaults() {
        let object = db(&json!({"engine": "postgres", "version": "16", "storage": "10Gi"}));
        let response = answer(mutate(&request("CREATE", &object, None)));
        let patch = STANDARD
            .decode(response["patch"].as_str().expect("base64 string"))
            .expect("base64");
        let patch: json_patch::Patch = serde_json::from_slice(&patch).expect("a JSON patch");
        let mut patched = object.clone();
        json_patch::patch(&mut patched, &patch).expect("applies");
        assert_eq!(patched["spec"]["replicas"], 1);
        assert_eq!(patched["spec"]["deletionPolicy"], "Retain");
        assert_eq!(patched["metadata"]["labels"][labels::NAME], "postgres");
        assert_eq!(patched["spec"]["storage"], "10Gi");
    }

    #[test]
    fn a_complete_object_gets_no_patch() {
        let mut object = db(
            &json!({"engine": "mysql", "version": "8.4", "storage": "1Gi",
                                    "replicas": 2, "deletionPolicy": "Delete"}),
        );
        object["metadata"]["labels"] = json!({labels::NAME: "mysql"});
        let response = answer(mutate(&request("CREATE", &object, None)));
        assert_eq!(response, json!({"uid": "u-1", "allowed": true}));
    }

    #[test]
    fn a_label_key_with_a_slash_is_escaped_in_the_patch_path() {
        let mut object = db(
            &json!({"engine": "mysql", "version": "8.4", "storage": "1Gi",
                                    "replicas": 1, "deletionPolicy": "Retain"}),
        );
        object["metadata"]["labels"] = json!({"team": "a"});
        let response = answer(mutate(&request("UPDATE", &object, Some(&object))));
        let patch: Value = serde_json::from_slice(
            &STANDARD
                .decode(response["patch"].as_str().expect("patch"))
                .expect("base64"),
        )
        .expect("json");
        assert_eq!(
            patch,
            json!([{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "mysql"}])
        );
    }

    #[test]
    fn a_dry_run_gets_the_same_answer() {
        let object = db(&json!({"engine": "postgres", "version": "12", "storage": "10Gi"}));
        let mut dry = request("CREATE", &object, None);
        dry.dry_run = Some(true);
        let wet = request("CREATE", &object, None);
        assert_eq!(
            answer(validate(&dry, Limits::default()).0),
            answer(validate(&wet, Limits::default()).0)
        );
        assert_eq!(answer(mutate(&dry)), answer(mutate(&wet)));
    }

    #[test]
    fn deletes_and_connects_are_allowed_untouched() {
        let object = db(&json!({"engine": "postgres", "version": "12", "storage": "10Gi"}));
        for operation in ["DELETE", "CONNECT"] {
            let req = request(operation, &object, None);
            assert_eq!(answer(validate(&req, Limits::default()).0)["allowed"], true);
            assert_eq!(answer(mutate(&req)), json!({"uid": "u-1", "allowed": true}));
        }
    }
}
