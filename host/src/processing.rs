//! Assembles processing (workers, the outbox relay, the delivery relay and the reconciler)
//! for `wharf serve` and `wharf worker`, and holds what they share: a database pool apart
//! from the ingest pool, the signals that wake them, and backoff.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::deliveries::{DeliveryRelay, Lane};
use crate::metrics::Metrics;
use crate::nats::Nats;
use crate::outbox::OutboxRelay;
use crate::reconcile::Reconciler;
use crate::store::redact_db;
use crate::worker::Worker;

/// In-process wake-ups. Each is only a hint: every loop also polls with a capped backoff, so
/// work committed by another process (or a missed signal) is found anyway.
pub struct Signals {
    /// New inbox rows are committed.
    pub work: Notify,
    /// New accepted-event notices are committed.
    pub outbox: Notify,
    /// New deliveries are committed: a broadcast, since each delivery target has its relay.
    pub deliveries: watch::Sender<u64>,
}

impl Default for Signals {
    fn default() -> Self {
        Self {
            work: Notify::new(),
            outbox: Notify::new(),
            deliveries: watch::Sender::new(0),
        }
    }
}

impl Signals {
    pub fn deliveries_committed(&self) {
        self.deliveries.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Called by ingest after a commit that accepted something; never inside the transaction.
    pub fn accepted(&self) {
        self.work.notify_one();
        self.outbox.notify_one();
    }
}

/// What every processing task shares.
pub struct Processing {
    pub pool: PgPool,
    pub config: Arc<Config>,
    pub metrics: Arc<Metrics>,
    pub signals: Arc<Signals>,
    pub nats: Option<Arc<Nats>>,
}

impl Processing {
    pub fn new(
        config: Arc<Config>,
        metrics: Arc<Metrics>,
        signals: Arc<Signals>,
    ) -> anyhow::Result<Self> {
        let options: PgConnectOptions = config.database_url().parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(config.worker.db_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(options.application_name("wharf-worker"));
        let nats = config.nats.clone().map(|n| Arc::new(Nats::new(n)));
        Ok(Self {
            pool,
            config,
            metrics,
            signals,
            nats,
        })
    }

    /// Starts `workers` workers, both relays and the reconciler; each stops when `cancel`
    /// fires, after finishing or releasing what it holds.
    pub fn spawn(
        self: &Arc<Self>,
        workers: usize,
        cancel: &CancellationToken,
        tasks: &mut JoinSet<anyhow::Result<()>>,
    ) {
        for _ in 0..workers {
            let worker = Worker::new(Arc::clone(self));
            tasks.spawn(worker.run(cancel.clone()));
        }
        tasks.spawn(OutboxRelay::new(Arc::clone(self)).run(cancel.clone()));
        // One relay per delivery target, so a slow or dead target holds up only its own
        // deliveries; one more for rows whose route has left the config.
        let mut targets: Vec<(&str, &str)> = self
            .config
            .routes
            .iter()
            .map(|r| (r.sink.as_str(), r.target()))
            .collect();
        targets.sort();
        targets.dedup();
        for (sink, target) in targets {
            let lane = Lane::Target {
                sink: sink.to_owned(),
                target: target.to_owned(),
            };
            tasks.spawn(DeliveryRelay::new(Arc::clone(self), lane).run(cancel.clone()));
        }
        tasks.spawn(DeliveryRelay::new(Arc::clone(self), Lane::Unrouted).run(cancel.clone()));
        tasks.spawn(Reconciler::new(Arc::clone(self)).run(cancel.clone()));
        if let Some(nats) = &self.nats
            && workers > 0
        {
            let (nats, this, cancel) = (Arc::clone(nats), Arc::clone(self), cancel.clone());
            tasks.spawn(async move {
                nats.wake_on_accepted(&this.signals.work, &cancel).await;
                Ok(())
            });
        }
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
            .map_err(|e| anyhow::anyhow!(redact_db(&e)))?;
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
