//! Rate limits, in two places. At the edge, a bucket per client address (`ClientLimits`,
//! `[server] client_rate_per_second`/`client_rate_burst`, the address as `ClientInfo` reports
//! it after `trusted_proxies`): checked before the body is read, and spent by every request
//! that does not verify, so it counts what strangers send, a flood from one address is 429
//! before it costs a body read or a guest call, and a provider's own traffic never spends it. After
//! verification, and only for a verified request, a token bucket per endpoint (`rate_limit` in
//! `[[endpoint]]`) and one per provider, shared by every endpoint of that adapter
//! (`[[provider]]`): what a stranger sends never spends the provider's allowance. A verified
//! request takes one token from each of those that applies, or none: a request refused by one
//! bucket leaves the other's token in place. Buckets live in this process; several receivers
//! each allow the whole limit.
//!
//! Each bucket is GCRA (the generic cell rate algorithm, as in `governor`): one instant per
//! bucket, the time at which it will be full again. Written here rather than taken from
//! `governor` because two buckets must be taken together or not at all, which its API (no
//! peek, no refund) cannot do.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::config::{EndpointConfig, ProviderConfig, RateLimit};
use crate::support::metrics::Metrics;

/// The most client addresses tracked at once (about 3 MiB). Past it, buckets that are full
/// again are dropped (a full bucket is the same as none), then, if that frees too little, those
/// nearest to full: a flood of distinct addresses costs bounded memory, and what it evicts is
/// only forgiven, never charged.
const MAX_CLIENTS: usize = 1 << 16;

/// Which bucket refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitScope {
    /// The client address's, before the body was read.
    Client,
    Endpoint,
    Provider,
}

impl LimitScope {
    /// The `scope` label of `wharf_rate_limited_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            LimitScope::Client => "client",
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

/// The endpoints' and providers' buckets: the providers' fixed at start, the endpoints'
/// carried over by a live reload (`with_endpoints`).
pub struct RateLimits {
    endpoints: HashMap<String, Arc<Bucket>>,
    providers: HashMap<String, Arc<Bucket>>,
    /// The origin of every bucket's schedule.
    started: Instant,
}

/// A rate: how a schedule advances and how far it may run ahead.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Rate {
    /// The time one token takes to come back: 1 s / `per_second`.
    interval: Duration,
    /// How far the schedule may run ahead of now with a token still left: `burst - 1`
    /// intervals.
    tolerance: Duration,
}

impl Rate {
    fn new(limit: RateLimit) -> Self {
        // `per_second` is validated at start (at least 0.001), so the interval is bounded.
        let interval = Duration::from_secs_f64(1.0 / limit.per_second);
        Self {
            interval,
            tolerance: interval * limit.burst.saturating_sub(1),
        }
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

struct Bucket {
    rate: Rate,
    /// When the bucket will be full again, since `RateLimits::started` (at or before now: full).
    full_at: Mutex<Duration>,
}

impl Bucket {
    fn new(limit: RateLimit) -> Self {
        Self {
            rate: Rate::new(limit),
            full_at: Mutex::new(Duration::ZERO),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Duration> {
        self.full_at.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One bucket per client address, all at one rate; an address without an entry is full.
pub struct ClientLimits {
    rate: Rate,
    full_at: Mutex<HashMap<IpAddr, Duration>>,
    /// The origin of every bucket's schedule.
    started: Instant,
}

impl ClientLimits {
    /// Every client address limited to `limit` (`[server] client_rate_per_second`, `..._burst`).
    pub fn new(limit: RateLimit) -> Self {
        Self {
            rate: Rate::new(limit),
            full_at: Mutex::default(),
            started: Instant::now(),
        }
    }

    /// The bucket an address draws on: an IPv6 client by its /64 (one host commonly holds a
    /// whole /64, and would otherwise have a bucket per address), an IPv4 one by itself.
    fn key(addr: IpAddr) -> IpAddr {
        match addr.to_canonical() {
            IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & !(u128::MAX >> 64))),
            v4 => v4,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<IpAddr, Duration>> {
        self.full_at.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the address's bucket has a token, before the body is read; takes none. A
    /// refusal is counted under `endpoint_id`.
    pub fn check(&self, addr: IpAddr, endpoint_id: &str, metrics: &Metrics) -> Result<(), Limited> {
        self.check_at(addr, self.started.elapsed())
            .map_err(|limited| refused(limited, endpoint_id, metrics))
    }

    /// Takes a token for a request that did not verify, even past empty: requests that passed
    /// `check` together each pay, and the address waits until they are paid for.
    pub fn charge(&self, addr: IpAddr) {
        self.charge_at(addr, self.started.elapsed());
    }

    fn check_at(&self, addr: IpAddr, now: Duration) -> Result<(), Limited> {
        let full_at = self.lock().get(&Self::key(addr)).copied();
        let wait = self.rate.wait(full_at.unwrap_or(Duration::ZERO), now);
        if wait.is_zero() {
            return Ok(());
        }
        Err(Limited {
            scope: LimitScope::Client,
            retry_after: wait,
        })
    }

    fn charge_at(&self, addr: IpAddr, now: Duration) {
        let key = Self::key(addr);
        let mut map = self.lock();
        if map.len() >= MAX_CLIENTS && !map.contains_key(&key) {
            shrink(&mut map, now);
        }
        let full_at = map.entry(key).or_insert(Duration::ZERO);
        *full_at = self.rate.take(*full_at, now);
    }
}

/// A refusal, counted in `wharf_rate_limited_total` by the bucket that refused.
fn refused(limited: Limited, endpoint_id: &str, metrics: &Metrics) -> Limited {
    metrics.rate_limited(endpoint_id, limited.scope.as_str());
    limited
}

/// Makes room for new addresses: drops every bucket that is full again, then, while more than
/// seven eighths of `MAX_CLIENTS` remain, those nearest to full (an address flooding runs
/// furthest ahead, so it is the last dropped). Each call frees at least an eighth, so its cost
/// is spread over as many new addresses.
fn shrink(map: &mut HashMap<IpAddr, Duration>, now: Duration) {
    map.retain(|_, full_at| *full_at > now);
    let keep = MAX_CLIENTS - MAX_CLIENTS / 8;
    if map.len() > keep {
        let mut schedules: Vec<Duration> = map.values().copied().collect();
        let cut = schedules.len() - keep;
        let (_, threshold, _) = schedules.select_nth_unstable(cut);
        let threshold = *threshold;
        map.retain(|_, full_at| *full_at > threshold);
    }
}

impl RateLimits {
    pub fn new(endpoints: &[EndpointConfig], providers: &[ProviderConfig]) -> Self {
        Self {
            endpoints: endpoints
                .iter()
                .filter_map(|e| Some((e.id.clone(), Arc::new(Bucket::new(e.rate_limit?)))))
                .collect(),
            providers: providers
                .iter()
                .map(|p| (p.adapter.clone(), Arc::new(Bucket::new(p.rate_limit))))
                .collect(),
            started: Instant::now(),
        }
    }

    /// The same limits for a new endpoint list (a live config reload): the providers' buckets
    /// and each endpoint's whose rate did not change are shared, tokens spent and all, so a
    /// reload never refills a bucket; a new or changed limit starts full.
    pub fn with_endpoints(&self, endpoints: &[EndpointConfig]) -> Self {
        let endpoints = endpoints
            .iter()
            .filter_map(|e| {
                let rate = Rate::new(e.rate_limit?);
                let bucket = match self.endpoints.get(&e.id) {
                    Some(old) if old.rate == rate => Arc::clone(old),
                    _ => Arc::new(Bucket::new(e.rate_limit?)),
                };
                Some((e.id.clone(), bucket))
            })
            .collect();
        Self {
            endpoints,
            providers: self.providers.clone(),
            started: self.started,
        }
    }

    /// `try_take` for a request that has just been verified, its refusal counted.
    pub fn charge_verified(
        &self,
        endpoint: &EndpointConfig,
        metrics: &Metrics,
    ) -> Result<(), Limited> {
        self.try_take(&endpoint.id, &endpoint.adapter)
            .map_err(|limited| refused(limited, &endpoint.id, metrics))
    }

    /// Takes a token from the endpoint's bucket and from its adapter's, or from neither: for
    /// a verified request only.
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
            (
                LimitScope::Endpoint,
                self.endpoints.get(endpoint_id).map(|b| &**b),
            ),
            (
                LimitScope::Provider,
                self.providers.get(adapter).map(|b| &**b),
            ),
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
            let wait = bucket.rate.wait(**full_at, now);
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
            **full_at = bucket.rate.take(**full_at, now);
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
            l.endpoints
                .insert("e".into(), Arc::new(Bucket::new(limit(e))));
        }
        if let Some(p) = provider {
            l.providers
                .insert("a".into(), Arc::new(Bucket::new(limit(p))));
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
            *full_at = bucket.rate.take(*full_at, Duration::ZERO);
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

    fn clients(per_second: f64, burst: u32) -> ClientLimits {
        ClientLimits::new(RateLimit { per_second, burst })
    }

    #[test]
    fn each_client_address_has_its_own_bucket_ipv6_by_its_64() {
        let c = clients(1.0, 2);
        let charge = |addr: &str| c.charge_at(addr.parse().unwrap(), Duration::ZERO);
        let check = |addr: &str, ms| c.check_at(addr.parse().unwrap(), Duration::from_millis(ms));
        // A check takes nothing.
        for _ in 0..10 {
            check("203.0.113.1", 0).unwrap();
        }
        charge("203.0.113.1");
        check("203.0.113.1", 0).unwrap();
        charge("203.0.113.1");
        let refused = check("203.0.113.1", 0).unwrap_err();
        assert_eq!(refused.scope, LimitScope::Client);
        assert_eq!(refused.retry_after, Duration::from_secs(1));
        // The same address written as IPv4-mapped IPv6 is the same client.
        check("::ffff:203.0.113.1", 0).unwrap_err();
        check("203.0.113.2", 0).unwrap();
        charge("2001:db8::1");
        charge("2001:db8::ffff");
        check("2001:db8::2", 0).unwrap_err();
        check("2001:db8:0:1::1", 0).unwrap();
        check("203.0.113.1", 1000).unwrap();
    }

    #[test]
    fn requests_that_passed_the_check_together_each_pay() {
        let c = clients(1.0, 2);
        let addr: IpAddr = "203.0.113.1".parse().unwrap();
        // Ten failures that were checked at once: the address waits for all of them.
        for _ in 0..10 {
            c.charge_at(addr, Duration::ZERO);
        }
        let refused = c.check_at(addr, Duration::ZERO).unwrap_err();
        assert_eq!(refused.retry_after, Duration::from_secs(9));
        c.check_at(addr, Duration::from_millis(8999)).unwrap_err();
        c.check_at(addr, Duration::from_secs(9)).unwrap();
    }

    #[test]
    fn a_flood_of_distinct_addresses_keeps_the_map_bounded_and_the_busiest_tracked() {
        let c = clients(1.0, 1);
        let flooder: IpAddr = "198.51.100.7".parse().unwrap();
        // Its schedule runs an hour ahead: the last bucket a sweep would drop.
        c.lock().insert(flooder, Duration::from_secs(3600));
        // Addresses that are never full again in this window (1 s refill, 0.2 s of requests):
        // a sweep must evict those nearest to full.
        for i in 0..(3 * MAX_CLIENTS as u32) {
            let addr = IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            c.charge_at(addr, Duration::from_millis(u64::from(i) / 1000));
            assert!(c.lock().len() <= MAX_CLIENTS);
        }
        assert!(c.check_at(flooder, Duration::from_secs(300)).is_err());
    }

    #[test]
    fn a_reload_keeps_an_unchanged_endpoints_spent_tokens_and_starts_a_changed_one_full() {
        let limit = |per_second, burst| Some(RateLimit { per_second, burst });
        let endpoint = |id: &str, rate_limit| {
            let text = format!("id = \"{id}\"\nadapter = \"a\"\nsecret = \"s\"\n");
            let mut e: EndpointConfig = toml::from_str(&text).unwrap();
            e.rate_limit = rate_limit;
            e
        };
        let before = RateLimits::new(&[endpoint("e", limit(1.0, 1))], &[]);
        let now = || Duration::ZERO;
        before.try_take_with("e", "a", now).unwrap();
        before.try_take_with("e", "a", now).unwrap_err();
        let same = before.with_endpoints(&[endpoint("e", limit(1.0, 1)), endpoint("n", None)]);
        same.try_take_with("e", "a", now).unwrap_err();
        same.try_take_with("n", "a", now).unwrap();
        let changed = same.with_endpoints(&[endpoint("e", limit(2.0, 1))]);
        changed.try_take_with("e", "a", now).unwrap();
    }
}
