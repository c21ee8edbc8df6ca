//! A scripted API server for reconcile decision paths: a [`kube::Client`] whose requests
//! never leave the process. It holds objects by path, as the test put them there or as
//! writes left them: a read finds them (or a 404, or an empty list), a create stores,
//! a patch merges (JSON patch, merge patch or apply, without field ownership), a delete
//! removes. A rule the test set for a method and path answers instead. Every request is
//! recorded, so a test asserts on what the reconcile wrote.
//!
//! It stands in for the API server only where the decision under test is the
//! controller's own; anything the API server decides (validation, admission, field
//! ownership, garbage collection) is tested against the real one.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http::{Method, Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use kube::client::Body;
use serde_json::{Value, json};

/// One request as the scripted server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: Method,
    /// The path without the query.
    pub path: String,
    pub query: String,
    /// The body, parsed; `Value::Null` when it had none.
    pub body: Value,
}

impl Recorded {
    /// Whether this request changed something.
    pub fn is_write(&self) -> bool {
        self.method != Method::GET
    }
}

type Rules = HashMap<(Method, String), (StatusCode, Value)>;

/// The scripted server: its rules, the objects it holds, and what it received.
#[derive(Clone, Default)]
pub struct ScriptedApiServer {
    rules: Arc<Mutex<Rules>>,
    objects: Arc<Mutex<BTreeMap<String, Value>>>,
    received: Arc<Mutex<Vec<Recorded>>>,
}

impl ScriptedApiServer {
    pub fn new() -> Self {
        Self::default()
    }

    /// A client whose every request this server answers.
    pub fn client(&self) -> kube::Client {
        let server = self.clone();
        let service = tower::service_fn(move |request: Request<Body>| {
            let server = server.clone();
            async move { Ok::<_, Infallible>(server.answer(request).await) }
        });
        kube::Client::new(service, "default")
    }

    /// Answers `method` on `path` (no query) with `status` and `body` from now on.
    pub fn on(&self, method: Method, path: &str, status: u16, body: Value) -> &Self {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if let Ok(mut rules) = self.rules.lock() {
            rules.insert((method, path.to_owned()), (status, body));
        }
        self
    }

    /// Holds `object` at `path` (the object's own path, with its name).
    pub fn holds(&self, path: &str, object: Value) -> &Self {
        if let Ok(mut objects) = self.objects.lock() {
            objects.insert(path.to_owned(), stored(object));
        }
        self
    }

    /// The object held at `path`, as the writes so far left it.
    pub fn object(&self, path: &str) -> Option<Value> {
        self.objects.lock().ok()?.get(path).cloned()
    }

    /// Every request so far, in the order received.
    pub fn requests(&self) -> Vec<Recorded> {
        self.received.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The writes so far, in the order received.
    pub fn writes(&self) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(Recorded::is_write)
            .collect()
    }

    /// The writes to paths that contain `fragment`.
    pub fn writes_to(&self, fragment: &str) -> Vec<Recorded> {
        self.writes()
            .into_iter()
            .filter(|r| r.path.contains(fragment))
            .collect()
    }

    async fn answer(&self, request: Request<Body>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let bytes = body
            .collect()
            .await
            .map(http_body_util::Collected::to_bytes)
            .unwrap_or_default();
        let content_type = parts
            .headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let recorded = Recorded {
            method: parts.method.clone(),
            path: parts.uri.path().to_owned(),
            query: parts.uri.query().unwrap_or_default().to_owned(),
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        };
        let rule = self.rules.lock().ok().and_then(|rules| {
            rules
                .get(&(recorded.method.clone(), recorded.path.clone()))
                .cloned()
        });
        let (status, answer) = match rule {
            Some(rule) => rule,
            None => self.serve(&recorded, &content_type),
        };
        if let Ok(mut received) = self.received.lock() {
            received.push(recorded);
        }
        let mut response = Response::new(Body::from(answer.to_string().into_bytes()));
        *response.status_mut() = status;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }

    /// What the held objects make of `request`.
    fn serve(&self, request: &Recorded, content_type: &str) -> (StatusCode, Value) {
        let Ok(mut objects) = self.objects.lock() else {
            return (StatusCode::INTERNAL_SERVER_ERROR, Value::Null);
        };
        let path = request.path.as_str();
        // A subresource (`/status`) writes into its object.
        let object_path = path.strip_suffix("/status").unwrap_or(path);
        match request.method {
            Method::GET if is_collection(path) => (StatusCode::OK, list(&objects, path)),
            Method::GET => match objects.get(path) {
                Some(object) => (StatusCode::OK, object.clone()),
                None => refusal(404, "NotFound", path),
            },
            Method::POST => {
                let name = request.body["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default();
                let at = format!("{path}/{name}");
                if objects.contains_key(&at) {
                    return refusal(409, "AlreadyExists", &at);
                }
                let object = stored(request.body.clone());
                objects.insert(at, object.clone());
                (StatusCode::CREATED, object)
            }
            Method::PATCH => {
                let apply = content_type.starts_with("application/apply-patch");
                let Some(mut object) = objects
                    .get(object_path)
                    .cloned()
                    .or_else(|| apply.then(|| stored(request.body.clone())))
                else {
                    return refusal(404, "NotFound", object_path);
                };
                if let Err(problem) = patched(&mut object, &request.body, content_type) {
                    return refusal(422, "Invalid", &problem);
                }
                objects.insert(object_path.to_owned(), object.clone());
                (StatusCode::OK, object)
            }
            Method::PUT => {
                let object = stored(request.body.clone());
                objects.insert(object_path.to_owned(), object.clone());
                (StatusCode::OK, object)
            }
            Method::DELETE => match objects.remove(path) {
                Some(object) => (StatusCode::OK, object),
                None => refusal(404, "NotFound", path),
            },
            _ => refusal(405, "MethodNotAllowed", path),
        }
    }
}

/// `object` changed by `patch` of `content_type`.
fn patched(object: &mut Value, patch: &Value, content_type: &str) -> Result<(), String> {
    if content_type.starts_with("application/json-patch") {
        let operations: json_patch::Patch =
            serde_json::from_value(patch.clone()).map_err(|e| e.to_string())?;
        json_patch::patch(object, &operations).map_err(|e| e.to_string())?;
    } else {
        json_patch::merge(object, patch);
    }
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        let version = metadata
            .get("resourceVersion")
            .and_then(Value::as_str)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        metadata.insert(
            "resourceVersion".to_owned(),
            json!((version + 1).to_string()),
        );
    }
    Ok(())
}

/// The objects held directly under the collection at `path`.
fn list(objects: &BTreeMap<String, Value>, path: &str) -> Value {
    let prefix = format!("{path}/");
    let items: Vec<Value> = objects
        .iter()
        .filter(|(at, _)| {
            at.strip_prefix(&prefix)
                .is_some_and(|rest| !rest.contains('/'))
        })
        .map(|(_, object)| object.clone())
        .collect();
    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"}, "items": items})
}

/// `object` as the API server keeps it: with a uid and a resourceVersion.
fn stored(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata
            .entry("uid")
            .or_insert_with(|| json!("00000000-0000-0000-0000-000000000001"));
        metadata
            .entry("resourceVersion")
            .or_insert_with(|| json!("1"));
    }
    object
}

/// A path names a collection when, after `namespaces/<ns>`, one segment follows
/// (`/api/v1/namespaces/shop/pods`) rather than two.
fn is_collection(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let after_namespace = segments
        .iter()
        .position(|s| *s == "namespaces")
        .map_or(segments.len(), |i| segments.len().saturating_sub(i + 2));
    after_namespace == 1
}

/// A refusal as the API server words it.
fn refusal(code: u16, reason: &str, path: &str) -> (StatusCode, Value) {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": format!("{path}: {reason}"), "reason": reason, "code": code,
    });
    (status, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

    #[tokio::test]
    async fn reads_find_what_writes_left_and_patches_merge() {
        let server = ScriptedApiServer::new();
        let maps: Api<ConfigMap> = Api::namespaced(server.client(), "shop");
        assert!(
            maps.get_opt("absent")
                .await
                .expect("a 404 is None")
                .is_none()
        );
        assert!(
            maps.list(&ListParams::default())
                .await
                .expect("empty")
                .items
                .is_empty()
        );
        let mut map = ConfigMap::default();
        map.metadata.name = Some("made".into());
        let made = maps
            .create(&PostParams::default(), &map)
            .await
            .expect("created");
        assert_eq!(made.metadata.resource_version.as_deref(), Some("1"));
        assert!(
            maps.create(&PostParams::default(), &map).await.is_err(),
            "exists"
        );
        server.holds(
            "/api/v1/namespaces/shop/configmaps/there",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "there"}}),
        );
        assert!(maps.get_opt("there").await.expect("held").is_some());
        assert_eq!(
            maps.list(&ListParams::default())
                .await
                .expect("two")
                .items
                .len(),
            2
        );
        let patch = json!({"data": {"a": "1"}});
        let merged = maps
            .patch("there", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("merged");
        assert_eq!(
            merged.data.and_then(|d| d.get("a").cloned()).as_deref(),
            Some("1")
        );
        assert_eq!(merged.metadata.resource_version.as_deref(), Some("2"));
        let writes = server.writes();
        assert_eq!(writes.len(), 3);
        assert_eq!(writes[0].path, "/api/v1/namespaces/shop/configmaps");
    }
}
