//! Who may read `/metrics` when it is served securely: the caller's bearer token is
//! authenticated with a TokenReview and the caller authorised with a
//! SubjectAccessReview for `get` on the non-resource URL `/metrics`, as the API
//! server's own delegated authentication does (and kubebuilder's secure metrics). A
//! decision is kept for a few seconds, so a scrape every few seconds costs the API
//! server two small requests now and then.

use std::collections::HashMap;
use std::hash::{BuildHasher as _, RandomState};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

/// The path and verb a reader must be allowed.
pub const METRICS_PATH: &str = "/metrics";
const VERB: &str = "get";
/// How long a decision is reused.
const KEEP: Duration = Duration::from_secs(10);
/// At most this many tokens' decisions are kept; beyond it the oldest are dropped.
const MAX_KEPT: usize = 1024;

/// What the caller may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// No token, or one the API server does not accept: 401.
    Unauthenticated,
    /// A known user without the right: 403, naming the user.
    Forbidden(String),
}

/// Decides, with the API server, who may read the metrics.
pub struct Gate {
    client: kube::Client,
    hasher: RandomState,
    kept: Mutex<HashMap<u64, (Decision, Instant)>>,
}

impl Gate {
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            hasher: RandomState::new(),
            kept: Mutex::new(HashMap::new()),
        }
    }

    /// The decision for an `Authorization` header's value.
    pub async fn decide(&self, authorization: Option<&str>) -> Decision {
        let Some(token) = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
        else {
            return Decision::Unauthenticated;
        };
        // Only a hash of the token is kept, never the token.
        let key = self.hasher.hash_one(token);
        if let Some(decision) = self.kept(key) {
            return decision;
        }
        let decision = match self.review(token).await {
            Ok(decision) => decision,
            Err(err) => {
                // Not kept: the next scrape asks again.
                tracing::warn!(error = %err, "could not review a metrics reader's token; refusing it");
                return Decision::Unauthenticated;
            }
        };
        self.keep(key, decision.clone());
        decision
    }

    fn kept(&self, key: u64) -> Option<Decision> {
        let kept = self.kept.lock().ok()?;
        kept.get(&key)
            .filter(|(_, at)| at.elapsed() < KEEP)
            .map(|(decision, _)| decision.clone())
    }

    fn keep(&self, key: u64, decision: Decision) {
        if let Ok(mut kept) = self.kept.lock() {
            if kept.len() >= MAX_KEPT {
                kept.retain(|_, (_, at)| at.elapsed() < KEEP);
            }
            if kept.len() < MAX_KEPT {
                kept.insert(key, (decision, Instant::now()));
            }
        }
    }

    async fn review(&self, token: &str) -> Result<Decision, kube::Error> {
        let reviews: Api<TokenReview> = Api::all(self.client.clone());
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let status = reviews
            .create(&PostParams::default(), &review)
            .await?
            .status
            .unwrap_or_default();
        let Some(user) = status.user.filter(|_| status.authenticated == Some(true)) else {
            return Ok(Decision::Unauthenticated);
        };
        let name = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(METRICS_PATH.to_owned()),
                    verb: Some(VERB.to_owned()),
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let allowed = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await?
            .status
            .is_some_and(|s| s.allowed);
        Ok(if allowed {
            Decision::Allowed
        } else {
            Decision::Forbidden(name)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gate whose API server is unreachable: any question to it fails.
    fn gate() -> Gate {
        let config = kube::Config::new("http://127.0.0.1:1".parse().expect("uri"));
        Gate::new(kube::Client::try_from(config).expect("client"))
    }

    #[tokio::test]
    async fn no_bearer_token_is_unauthenticated_without_asking() {
        let gate = gate();
        for header in [None, Some(""), Some("Bearer "), Some("Basic dXNlcjpwYXNz")] {
            assert_eq!(
                gate.decide(header).await,
                Decision::Unauthenticated,
                "{header:?}"
            );
        }
    }

    #[tokio::test]
    async fn a_failed_review_refuses_and_is_not_kept() {
        let gate = gate();
        assert_eq!(
            gate.decide(Some("Bearer abc")).await,
            Decision::Unauthenticated
        );
        assert!(gate.kept.lock().expect("lock").is_empty());
    }
}
