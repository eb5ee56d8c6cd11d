//! What every processing task shares: a database pool apart from the ingest pool (its commits
//! do not wait for the disk; its plans stay on indexes), the config, metrics, the signals that
//! wake them, NATS, and backoff.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio_util::sync::CancellationToken;

use super::nats::Nats;
use crate::config::{Config, EndpointConfig, LiveEndpoints, LiveRoutes, ProjectionDocument};
use crate::ingest::Redacted;
use crate::ingest::{Handoff, KeySource};
use crate::support::clock::{SharedClock, SystemClock};
use crate::support::metrics::Metrics;
use crate::support::sealing::PayloadKeys;
use crate::support::signals::Signals;
use crate::support::traces::Traces;

/// What every processing task shares.
pub struct Processing {
    pub pool: PgPool,
    pub config: Arc<Config>,
    /// The endpoints as configured now: `config.endpoints` at start, then the receiver's live
    /// table (shared with ingest, swapped by a config reload).
    pub endpoints: Arc<LiveEndpoints>,
    /// The routes as configured now: `config.routes` at start, swapped by a config reload
    /// (never read `config.routes` past the start).
    pub routes: Arc<LiveRoutes>,
    pub metrics: Arc<Metrics>,
    pub signals: Arc<Signals>,
    pub nats: Option<Arc<Nats>>,
    /// What opens the sealed raw payloads.
    pub payload_keys: Arc<PayloadKeys>,
    /// Where signed routes' keys are read at each attempt (the live secrets file); none
    /// when no route signs.
    pub signing_keys: Option<Arc<dyn KeySource>>,
    /// The clock of signed deliveries' `webhook-timestamp` and of their keys' expiry.
    pub clock: SharedClock,
    /// Spans for processing and deliveries (`[tracing]`); off by default.
    pub traces: Traces,
    /// Events this host's ingest leased to its workers (`wharf serve` with workers).
    pub handoff: Option<Arc<Handoff>>,
}

impl Processing {
    pub fn new(
        config: Arc<Config>,
        metrics: Arc<Metrics>,
        signals: Arc<Signals>,
        payload_keys: Arc<PayloadKeys>,
    ) -> anyhow::Result<Self> {
        let options: PgConnectOptions = config.database_url().parse()?;
        // Processing commits without waiting for the WAL flush. What a database crash can
        // lose is only the last fraction of a second of bookkeeping, always a suffix of the
        // history (a later durable commit flushes everything before it), and all of it is
        // redone idempotently: a lost claim or completion leaves the inbox row PENDING or
        // PROCESSING under a lease, so it is processed again (the marker and the projection
        // were lost with it); a lost delivery or notice mark sends again under the same
        // idempotency key or `Nats-Msg-Id`. Acceptance (the ingest pool) stays durable: its
        // 2xx is a promise to the provider. See docs/performance.md, "Processing".
        //
        // No sequential scans where an index serves: every processing statement reaches its
        // rows by key or through an index in due order. Statements are prepared once per
        // connection and Postgres keeps a generic plan made from the statistics of that
        // moment; one made while a table was small (a new install, the first minute of a
        // burst) scanned it whole on every batch once it had grown, until the next analyze
        // (`bench-processing.sh live 60000` fell 20 s behind; with this, under 1.2 s).
        let options = options.application_name("wharf-worker").options([
            ("synchronous_commit", "off"),
            ("enable_seqscan", "off"),
            // Partitioned tables: prune when the plan runs rather than plan every
            // execution again (see `ingest::Store::connect_lazy`).
            ("plan_cache_mode", "force_generic_plan"),
        ]);
        let pool = PgPoolOptions::new()
            .max_connections(config.worker.db_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(options);
        let nats = config.nats.clone().map(|n| Arc::new(Nats::new(n)));
        Ok(Self {
            pool,
            endpoints: Arc::new(LiveEndpoints::new(&config.endpoints)),
            routes: Arc::new(LiveRoutes::new(&config.routes)),
            config,
            metrics,
            signals,
            nats,
            payload_keys,
            signing_keys: None,
            clock: Arc::new(SystemClock),
            traces: Traces::off(),
            handoff: None,
        })
    }

    /// Traces processing and deliveries with this tracer, continuing each request's trace.
    pub fn with_traces(mut self, traces: Traces) -> Self {
        self.traces = traces;
        self
    }

    /// Reads endpoints from `endpoints` (ingest's live table) rather than from the config.
    pub fn with_endpoints(mut self, endpoints: Arc<LiveEndpoints>) -> Self {
        self.endpoints = endpoints;
        self
    }

    /// Reads routes from `routes` (the table the config reloader swaps).
    pub fn with_routes(mut self, routes: Arc<LiveRoutes>) -> Self {
        self.routes = routes;
        self
    }

    /// One endpoint as configured now.
    pub fn endpoint(&self, id: &str) -> Option<Arc<EndpointConfig>> {
        self.endpoints.get(id)
    }

    /// Attempts allowed for one endpoint's events (its own, else `[worker] max_attempts`).
    pub fn max_attempts(&self, endpoint_id: &str) -> u32 {
        self.endpoint(endpoint_id)
            .and_then(|e| e.max_attempts)
            .unwrap_or(self.config.worker.max_attempts)
    }

    /// What the projection keeps of one endpoint's events.
    pub fn projection_document(&self, endpoint_id: &str) -> ProjectionDocument {
        self.endpoint(endpoint_id)
            .and_then(|e| e.projection_document)
            .unwrap_or(self.config.worker.projection_document)
    }

    /// Workers take the events that ingest leased to them from `handoff` first.
    pub fn with_handoff(mut self, handoff: Option<Arc<Handoff>>) -> Self {
        self.handoff = handoff;
        self
    }

    /// Signs deliveries with keys from `keys`, stamped by `clock`.
    pub fn with_signing(mut self, keys: Arc<dyn KeySource>, clock: SharedClock) -> Self {
        self.signing_keys = Some(keys);
        self.clock = clock;
        self
    }

    /// Full-jitter exponential backoff after `attempt` failed attempts: a uniformly random
    /// wait up to `base * 2^(attempt-1)`, capped at the configured maximum.
    pub fn backoff(&self, attempt: i32) -> Duration {
        let w = &self.config.worker;
        let exp = attempt.clamp(1, 30) as u32 - 1;
        let ceiling = w
            .backoff_base_ms
            .saturating_mul(1u64 << exp)
            .min(w.backoff_max_ms);
        Duration::from_millis(fastrand::u64(0..=ceiling))
    }

    /// Whether the processing pool reaches the database (within two seconds).
    pub async fn ping(&self) -> anyhow::Result<()> {
        let query = sqlx::query("SELECT 1").execute(&self.pool);
        tokio::time::timeout(Duration::from_secs(2), query)
            .await
            .map_err(|_| anyhow::anyhow!("database did not answer within 2 s"))?
            .redacted()?;
        Ok(())
    }

    pub fn idle_poll(&self) -> Duration {
        Duration::from_millis(self.config.worker.idle_poll_ms)
    }
}

/// Sleeps until `woken`, the poll interval or cancellation, growing the interval while idle.
/// Returns false when cancelled.
pub async fn wait_for_work(
    woken: impl Future<Output = ()>,
    idle: &mut Duration,
    max: Duration,
    cancel: &CancellationToken,
) -> bool {
    tokio::select! {
        _ = cancel.cancelled() => return false,
        _ = woken => *idle = MIN_IDLE,
        _ = tokio::time::sleep(*idle) => *idle = (*idle * 2).min(max),
    }
    true
}

pub const MIN_IDLE: Duration = Duration::from_millis(5);
