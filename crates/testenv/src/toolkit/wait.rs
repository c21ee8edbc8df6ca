//! Waiting for something to hold: a check polled until it does or a deadline passes,
//! and the test failed naming what it waited for; with the waits tests make most, for
//! an object to appear or to go, and for a StatefulSet to ask for a number of instances.

use std::fmt::{Debug, Display};
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// How long a test waits for the controller or the API server to act, unless the
/// scenario needs longer.
pub const WAIT: Duration = Duration::from_secs(30);

/// How often a wait checks unless told otherwise: often enough that a test does not
/// idle, seldom enough not to load the API server.
const INTERVAL: Duration = Duration::from_millis(100);

/// A wait: what for, for how long at most, and how often to look.
#[derive(Clone, Debug)]
pub struct Wait {
    what: String,
    timeout: Duration,
    interval: Duration,
}

/// Why a wait failed; its `Debug` is the sentence the failed test shows.
struct TimedOut {
    after: Duration,
    /// The last answer of the check, when it gives one.
    last: Option<String>,
}

impl Debug for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "timed out after {:?}", self.after)?;
        if let Some(last) = &self.last {
            write!(f, "; last seen: {last}")?;
        }
        Ok(())
    }
}

impl Wait {
    /// A wait for `what` of at most `timeout`, looking every 100 ms.
    pub fn new(what: impl Into<String>, timeout: Duration) -> Self {
        Self {
            what: what.into(),
            timeout,
            interval: INTERVAL,
        }
    }

    /// Looks every `interval` instead.
    #[must_use]
    pub fn every(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Polls `check` until it gives `Ok`, and returns that; once the deadline has passed,
    /// its last `Err` instead, for the caller to report as it needs.
    pub async fn poll<T, E, F, Fut>(&self, mut check: F) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            match check().await {
                Ok(value) => return Ok(value),
                Err(last) if tokio::time::Instant::now() >= deadline => return Err(last),
                Err(_) => tokio::time::sleep(self.interval).await,
            }
        }
    }

    /// Polls `check` until it gives `Ok`, and returns that; fails the test once the
    /// deadline has passed, with the last `Err` (how far things got).
    pub async fn until_ok<T, E, F, Fut>(&self, check: F) -> T
    where
        E: Display,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        self.poll(check)
            .await
            .map_err(|last| TimedOut {
                after: self.timeout,
                last: Some(last.to_string()),
            })
            .expect(&self.what)
    }

    /// Polls `check` until it gives `Some`, and returns the value; fails the test once
    /// the deadline has passed.
    pub async fn until_some<T, F, Fut>(&self, mut check: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        self.poll(|| {
            let next = check();
            async move { next.await.ok_or(()) }
        })
        .await
        .map_err(|()| TimedOut {
            after: self.timeout,
            last: None,
        })
        .expect(&self.what)
    }

    /// Polls `check` until it holds; fails the test once the deadline has passed.
    pub async fn until<F, Fut>(&self, mut check: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        self.until_some(|| {
            let next = check();
            async move { next.await.then_some(()) }
        })
        .await;
    }
}

/// Polls `check` every 100 ms until it gives `Some`, and returns the value; fails the
/// test after `timeout`, naming `what` it waited for.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    Wait::new(what, timeout).until_some(check).await
}

/// Waits up to [`WAIT`] until `api` has an object `name`, and returns it.
pub async fn wait_for<K>(api: &Api<K>, name: &str) -> K
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    eventually(WAIT, name, || async {
        api.get_opt(name).await.ok().flatten()
    })
    .await
}

/// Waits up to `timeout` until `api` has no object `name` (a failed read counts as
/// not yet).
pub async fn gone<K>(api: &Api<K>, name: &str, timeout: Duration)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let what = format!("{} {name} gone", K::kind(&()));
    eventually(timeout, &what, || async {
        api.get_opt(name).await.ok().filter(Option::is_none)
    })
    .await;
}

/// Waits until StatefulSet `name` asks for `replicas` instances, and returns it.
pub async fn statefulset_with_replicas(
    sets: &Api<StatefulSet>,
    name: &str,
    replicas: i32,
    timeout: Duration,
) -> StatefulSet {
    let what = format!("StatefulSet {name} with {replicas} replicas");
    eventually(timeout, &what, || async {
        sets.get(name)
            .await
            .ok()
            .filter(|s| s.spec.as_ref().and_then(|s| s.replicas) == Some(replicas))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_returns_the_value_once_the_check_gives_it() {
        let mut calls = 0;
        let value = Wait::new("the third call", Duration::from_secs(5))
            .every(Duration::from_millis(1))
            .until_some(|| {
                calls += 1;
                let call = calls;
                async move { (call == 3).then_some(call) }
            })
            .await;
        assert_eq!(value, 3);
    }

    #[tokio::test]
    async fn a_wait_past_its_deadline_gives_back_the_last_answer() {
        let outcome = Wait::new("nothing", Duration::from_millis(30))
            .every(Duration::from_millis(5))
            .poll(|| async { Err::<(), _>("not yet") })
            .await;
        assert_eq!(outcome, Err("not yet"));
    }

    #[tokio::test]
    #[should_panic(expected = "the webhooks: timed out after 30ms; last seen: denied: false")]
    async fn a_wait_past_its_deadline_fails_the_test_naming_what_it_waited_for() {
        Wait::new("the webhooks", Duration::from_millis(30))
            .every(Duration::from_millis(5))
            .until_ok(|| async { Err::<(), _>("denied: false") })
            .await;
    }
}
