//! Leader election on a `coordination.k8s.io` Lease, with client-go's protocol and
//! timings: two replicas may run, one reconciles. The holder renews every retry period;
//! a standby takes over once it has seen no renewal for a whole lease duration
//! (measured on its own clock, so clock skew between nodes does not matter). A holder
//! that cannot renew within the renew deadline stops leading at once (fail-stop), and a
//! clean shutdown releases the Lease so a standby takes over on its next try.
//!
//! kube-runtime has no leader election, and no benchmark target depends on this one. It
//! is kept over kube-lease-manager (which follows kube's releases) for one property: that
//! crate decides a Lease has expired from the times written in it, so clocks that differ
//! between nodes by more than its grace period can let two replicas lead at once, where
//! client-go's protocol, kept here, only ever compares times read on one clock.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::time::Instant;

use crate::errors::{is_already_exists, is_conflict};

#[derive(Clone, Debug)]
pub struct LeaseSettings {
    pub name: String,
    pub namespace: String,
    /// Who this replica is (the Pod name in a cluster).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaseSettings {
    /// The Lease `namespace/name`, with client-go's default timings.
    pub fn new(name: &str, namespace: &str, identity: &str) -> Self {
        Self {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            identity: identity.to_owned(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// The last Lease record seen, and when this replica first saw it.
struct Observed {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    seen_at: Instant,
}

pub struct LeaderElector {
    api: Api<Lease>,
    settings: LeaseSettings,
    observed: Option<Observed>,
}

impl LeaderElector {
    pub fn new(client: kube::Client, settings: LeaseSettings) -> Self {
        Self {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            observed: None,
        }
    }

    /// Waits until this replica holds the Lease.
    pub async fn acquire(&mut self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(err) => {
                    tracing::debug!(error = %crate::errors::api_message(&err), "lease not acquired");
                }
            }
            tokio::time::sleep(self.settings.retry_period).await;
        }
    }

    /// Renews the Lease until a renewal fails for longer than the renew deadline.
    /// Returns only when leadership is lost.
    pub async fn hold(&mut self) {
        let mut last_renewal = Instant::now();
        loop {
            tokio::time::sleep(self.settings.retry_period).await;
            // A renewal stuck on a dead connection must not outlast the deadline: once
            // the Lease expires, a standby may lead.
            let left = self
                .settings
                .renew_deadline
                .saturating_sub(last_renewal.elapsed());
            match tokio::time::timeout(left, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => last_renewal = Instant::now(),
                Ok(Ok(false)) => return,
                Ok(Err(err)) => {
                    tracing::warn!(error = %crate::errors::api_message(&err), "lease renewal failed");
                }
                Err(_) => tracing::warn!("lease renewal got no answer by the renew deadline"),
            }
            if last_renewal.elapsed() >= self.settings.renew_deadline {
                return;
            }
        }
    }

    /// Gives the Lease up so a standby can take it at once.
    pub async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.api.get_opt(&self.settings.name).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.settings.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now());
        if let Err(err) = self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
        {
            tracing::warn!(error = %crate::errors::api_message(&err), "could not release the lease");
        }
    }

    /// One round of the protocol: `Ok(true)` while this replica holds the Lease.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.settings.name).await? else {
            return self.create().await;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let expired = self.observe(holder.clone(), spec);
        let identity = self.settings.identity.clone();
        if holder.as_ref().is_some_and(|h| *h != identity) && !expired {
            return Ok(false);
        }
        if holder.as_deref() != Some(identity.as_str()) {
            spec.acquire_time = Some(now());
            spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
        }
        spec.holder_identity = Some(identity);
        spec.lease_duration_seconds = Some(self.duration_seconds());
        spec.renew_time = Some(now());
        // `replace` carries the resourceVersion read above: a concurrent writer wins and
        // this round reports not-leader instead of two holders.
        match self
            .api
            .replace(&self.settings.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(true),
            Err(err) if is_conflict(&err) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Creates the Lease held by this replica; `Ok(false)` when another created it first.
    async fn create(&self) -> Result<bool, kube::Error> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.settings.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.settings.identity.clone()),
                lease_duration_seconds: Some(self.duration_seconds()),
                acquire_time: Some(now()),
                renew_time: Some(now()),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(err) if is_already_exists(&err) => Ok(false),
            Err(err) => Err(err),
        }
    }

    /// Notes the record if it changed since last seen; whether it has gone a whole
    /// lease duration without a change, on this replica's clock.
    fn observe(&mut self, holder: Option<String>, spec: &LeaseSpec) -> bool {
        let changed = self
            .observed
            .as_ref()
            .is_none_or(|o| o.holder != holder || o.renew_time != spec.renew_time);
        if changed {
            self.observed = Some(Observed {
                holder,
                renew_time: spec.renew_time.clone(),
                seen_at: Instant::now(),
            });
        }
        let record_duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.settings.lease_duration, Duration::from_secs);
        self.observed
            .as_ref()
            .is_none_or(|o| o.seen_at.elapsed() > record_duration)
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.settings.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An API server that accepts requests and never answers, like a dead connection.
    fn silent_client() -> kube::Client {
        let service = tower::service_fn(|_: http::Request<kube::client::Body>| {
            futures::future::pending::<Result<http::Response<kube::client::Body>, std::io::Error>>()
        });
        kube::Client::new(service, "default")
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewal_that_never_answers_ends_leadership_at_the_renew_deadline() {
        let settings = LeaseSettings::new("leader", "default", "me");
        let deadline = settings.renew_deadline;
        let mut elector = LeaderElector::new(silent_client(), settings);
        let started = Instant::now();
        tokio::time::timeout(Duration::from_secs(120), elector.hold())
            .await
            .expect("hold gives up leadership instead of waiting on the request");
        assert_eq!(started.elapsed(), deadline);
    }
}
