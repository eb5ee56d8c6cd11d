//! Rate limits (step 1): a token bucket per endpoint (`rate_limit` in `[[endpoint]]`) and one
//! per provider, shared by every endpoint of that adapter (`[[provider]]`). A request takes one
//! token from each bucket that applies, or none: a request refused by one bucket leaves the
//! other's token in place. Buckets live in this process; several receivers each allow the
//! whole limit.
//!
//! Each bucket is GCRA (the generic cell rate algorithm, as in `governor`): one instant per
//! bucket, the time at which it will be full again. Written here rather than taken from
//! `governor` because two buckets must be taken together or not at all, which its API (no
//! peek, no refund) cannot do.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::config::{EndpointConfig, ProviderConfig, RateLimit};

/// Which bucket refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitScope {
    Endpoint,
    Provider,
}

impl LimitScope {
    /// The `scope` label of `wharf_rate_limited_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitScope::Endpoint => "endpoint",
            LimitScope::Provider => "provider",
        }
    }
}

/// A refusal: which bucket was empty (the endpoint's when both were) and how long until every
/// bucket the request needs has a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limited {
    pub scope: LimitScope,
    pub retry_after: Duration,
}

impl Limited {
    /// `Retry-After` in whole seconds: rounded up, at least 1.
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_nanos().div_ceil(1_000_000_000).max(1) as u64
    }
}

/// Every bucket of this process, fixed at start.
pub struct RateLimits {
    endpoints: HashMap<String, Bucket>,
    providers: HashMap<String, Bucket>,
    /// The origin of every bucket's schedule.
    started: Instant,
}

struct Bucket {
    /// The time one token takes to come back: 1 s / `per_second`.
    interval: Duration,
    /// How far the schedule may run ahead of now with a token still left: `burst - 1`
    /// intervals.
    tolerance: Duration,
    /// When the bucket will be full again, since `RateLimits::started` (at or before now: full).
    full_at: Mutex<Duration>,
}

impl Bucket {
    fn new(limit: RateLimit) -> Self {
        // `per_second` is validated at start (at least 0.001), so the interval is bounded.
        let interval = Duration::from_secs_f64(1.0 / limit.per_second);
        Self {
            interval,
            tolerance: interval * limit.burst.saturating_sub(1),
            full_at: Mutex::new(Duration::ZERO),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Duration> {
        self.full_at.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How long until a token is left, given when the bucket will be full; zero: one is now.
    fn wait(&self, full_at: Duration, now: Duration) -> Duration {
        full_at.saturating_sub(now).saturating_sub(self.tolerance)
    }

    /// The bucket's schedule after one token is taken at `now`.
    fn take(&self, full_at: Duration, now: Duration) -> Duration {
        full_at.max(now) + self.interval
    }
}

impl RateLimits {
    pub fn new(endpoints: &[EndpointConfig], providers: &[ProviderConfig]) -> Self {
        Self {
            endpoints: endpoints
                .iter()
                .filter_map(|e| Some((e.id.clone(), Bucket::new(e.rate_limit?))))
                .collect(),
            providers: providers
                .iter()
                .map(|p| (p.adapter.clone(), Bucket::new(p.rate_limit)))
                .collect(),
            started: Instant::now(),
        }
    }

    /// Takes a token from the endpoint's bucket and from its adapter's, or from neither.
    pub fn try_take(&self, endpoint_id: &str, adapter: &str) -> Result<(), Limited> {
        self.try_take_with(endpoint_id, adapter, || self.started.elapsed())
    }

    /// `try_take` with the clock read once both buckets are held, so the time compared is
    /// never older than a schedule another request wrote.
    fn try_take_with(
        &self,
        endpoint_id: &str,
        adapter: &str,
        now: impl FnOnce() -> Duration,
    ) -> Result<(), Limited> {
        // Always the endpoint's first, then the provider's: one lock order, no deadlock.
        let mut held: Vec<(LimitScope, &Bucket, MutexGuard<'_, Duration>)> = [
            (LimitScope::Endpoint, self.endpoints.get(endpoint_id)),
            (LimitScope::Provider, self.providers.get(adapter)),
        ]
        .into_iter()
        .filter_map(|(scope, bucket)| bucket.map(|b| (scope, b, b.lock())))
        .collect();
        if held.is_empty() {
            return Ok(());
        }
        let now = now();
        let mut refused: Option<Limited> = None;
        for (scope, bucket, full_at) in &held {
            let wait = bucket.wait(**full_at, now);
            if !wait.is_zero() {
                let first = refused.map_or(*scope, |r| r.scope);
                let longest = refused.map_or(wait, |r| r.retry_after.max(wait));
                refused = Some(Limited {
                    scope: first,
                    retry_after: longest,
                });
            }
        }
        if let Some(limited) = refused {
            return Err(limited);
        }
        for (_, bucket, full_at) in &mut held {
            **full_at = bucket.take(**full_at, now);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(endpoint: Option<(f64, u32)>, provider: Option<(f64, u32)>) -> RateLimits {
        let limit = |(per_second, burst)| RateLimit { per_second, burst };
        let mut l = RateLimits::new(&[], &[]);
        if let Some(e) = endpoint {
            l.endpoints.insert("e".into(), Bucket::new(limit(e)));
        }
        if let Some(p) = provider {
            l.providers.insert("a".into(), Bucket::new(limit(p)));
        }
        l
    }

    fn at(l: &RateLimits, ms: u64) -> Result<(), Limited> {
        l.try_take_with("e", "a", || Duration::from_millis(ms))
    }

    #[test]
    fn a_burst_then_one_token_per_interval() {
        let l = limits(Some((10.0, 3)), None);
        for _ in 0..3 {
            at(&l, 0).unwrap();
        }
        let refused = at(&l, 0).unwrap_err();
        assert_eq!(refused.scope, LimitScope::Endpoint);
        assert_eq!(refused.retry_after, Duration::from_millis(100));
        assert_eq!(refused.retry_after_secs(), 1);
        assert_eq!(
            at(&l, 99).unwrap_err().retry_after,
            Duration::from_millis(1)
        );
        at(&l, 100).unwrap();
        at(&l, 150).unwrap_err();
        // After a quiet spell the bucket is full again, never fuller.
        for _ in 0..3 {
            at(&l, 10_000).unwrap();
        }
        at(&l, 10_000).unwrap_err();
    }

    #[test]
    fn retry_after_is_rounded_up_to_whole_seconds() {
        let l = limits(Some((1.0, 1)), None);
        at(&l, 0).unwrap();
        let refused = at(&l, 999).unwrap_err();
        assert_eq!(refused.retry_after, Duration::from_millis(1));
        assert_eq!(refused.retry_after_secs(), 1);
        // A schedule 3 s ahead (three taken at once at 1/s): at 0.5 s the next token is 2.5 s
        // away, answered as 3.
        let l = limits(Some((1.0, 1)), None);
        let bucket = &l.endpoints["e"];
        let mut full_at = bucket.lock();
        for _ in 0..3 {
            *full_at = bucket.take(*full_at, Duration::ZERO);
        }
        drop(full_at);
        assert_eq!(at(&l, 500).unwrap_err().retry_after_secs(), 3);
    }

    #[test]
    fn fractional_rates_refill_slower_than_one_a_second() {
        let l = limits(Some((0.5, 1)), None);
        at(&l, 0).unwrap();
        let refused = at(&l, 0).unwrap_err();
        assert_eq!(refused.retry_after, Duration::from_secs(2));
        assert_eq!(refused.retry_after_secs(), 2);
        at(&l, 1999).unwrap_err();
        at(&l, 2000).unwrap();
    }

    #[test]
    fn a_refusal_by_one_bucket_takes_nothing_from_the_other() {
        // The endpoint allows one, the provider three.
        let l = limits(Some((1.0, 1)), Some((1.0, 3)));
        at(&l, 0).unwrap();
        assert_eq!(at(&l, 0).unwrap_err().scope, LimitScope::Endpoint);
        assert_eq!(at(&l, 0).unwrap_err().scope, LimitScope::Endpoint);
        // Two provider tokens are left for the provider's other endpoints.
        let other = |ms| l.try_take_with("other", "a", || Duration::from_millis(ms));
        other(0).unwrap();
        other(0).unwrap();
        let refused = other(0).unwrap_err();
        assert_eq!(refused.scope, LimitScope::Provider);
        // And the provider refusing leaves the endpoint's token: at 1 s the endpoint has one
        // again and the provider one; taking it here then leaves none for `other`.
        at(&l, 1000).unwrap();
        other(1000).unwrap_err();
    }

    #[test]
    fn both_empty_names_the_endpoint_and_waits_for_the_later() {
        let l = limits(Some((10.0, 1)), Some((1.0, 1)));
        at(&l, 0).unwrap();
        let refused = at(&l, 0).unwrap_err();
        assert_eq!(refused.scope, LimitScope::Endpoint);
        assert_eq!(refused.retry_after, Duration::from_secs(1));
    }

    #[test]
    fn unlimited_endpoints_and_providers_always_pass() {
        let l = limits(None, None);
        for _ in 0..1000 {
            at(&l, 0).unwrap();
        }
    }
}
