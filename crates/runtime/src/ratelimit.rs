//! Client-side rate limiting (QPS and burst, as client-go has): a token bucket in front
//! of the API client, so a burst of reconciles cannot flood the API server. No benchmark
//! target needs it; it is here because kube has no client-side limit and a controller
//! that runs beside other clients of the API server should have one.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

/// A token bucket: `burst` tokens, refilled at `qps` per second.
#[derive(Debug)]
pub struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    updated: Instant,
}

impl Bucket {
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        Self {
            qps: qps.max(0.001),
            burst,
            tokens: burst,
            updated: Instant::now(),
        }
    }

    /// Takes one token, or says how long until one is available.
    pub fn try_take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

#[derive(Clone)]
pub struct RateLimitLayer {
    bucket: Arc<Mutex<Bucket>>,
}

impl RateLimitLayer {
    pub fn new(qps: f64, burst: u32) -> Self {
        Self {
            bucket: Arc::new(Mutex::new(Bucket::new(qps, burst))),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            sleep: None,
            permitted: false,
        }
    }
}

/// Waits in `poll_ready` for a token; kube's client buffers requests in front of its
/// service stack, so every request goes through here one at a time.
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<Mutex<Bucket>>,
    sleep: Option<Pin<Box<Sleep>>>,
    permitted: bool,
}

impl<S, R> Service<R> for RateLimit<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        while !self.permitted {
            if let Some(sleep) = self.sleep.as_mut() {
                if sleep.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.sleep = None;
            }
            let taken = match self.bucket.lock() {
                Ok(mut bucket) => bucket.try_take(Instant::now()),
                // A poisoned lock only means another request panicked: let this one through.
                Err(_) => Ok(()),
            };
            match taken {
                Ok(()) => self.permitted = true,
                Err(wait) => self.sleep = Some(Box::pin(tokio::time::sleep(wait))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_allows_a_burst_then_paces_at_qps() {
        let start = Instant::now();
        let mut bucket = Bucket::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(bucket.try_take(start), Ok(()));
        }
        let wait = bucket.try_take(start).expect_err("burst spent");
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        assert_eq!(bucket.try_take(start + Duration::from_millis(100)), Ok(()));
    }

    #[test]
    fn tokens_never_exceed_the_burst() {
        let start = Instant::now();
        let mut bucket = Bucket::new(100.0, 2);
        let later = start + Duration::from_secs(60);
        assert_eq!(bucket.try_take(later), Ok(()));
        assert_eq!(bucket.try_take(later), Ok(()));
        assert!(bucket.try_take(later).is_err());
    }
}
