//! The reconciler: a periodic audit that finds accepted events whose processing or
//! deliveries went missing and requeues them. Each pass looks at the events processed since
//! the previous one (the first, at the last day's), through an index on `processed_at`, so
//! its cost follows the event rate, not the tables' size. In normal operation it finds nothing, because
//! each stage commits its successor's rows in its own transaction; it exists for what that
//! cannot cover (rows removed by hand, a restore from backup, a bug). It also refreshes the
//! backlog gauges, the oldest-pending one every second between passes, so
//! `wharf_inbox_oldest_pending_seconds` shows workers falling behind while it happens.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::context::Processing;
use crate::ingest::Redacted;
use crate::support::metrics::{TargetBacklog, TargetLabels};

/// How often the oldest-pending gauge is refreshed between passes.
const GAUGES_EVERY: Duration = Duration::from_secs(1);

/// How far back the first pass of a process looks.
const FIRST_LOOKBACK: time::Duration = time::Duration::DAY;

/// Overlap between passes: processing transactions still open when a pass starts, and clock
/// skew between this host and the database.
const OVERLAP: time::Duration = time::Duration::minutes(10);

/// What one pass found and did.
#[derive(Debug, Default, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Audit {
    /// `PROCESSED` events without their `processed_events` marker: requeued.
    pub missing_marker: u64,
    /// `PROCESSED` events with fewer deliveries rows than were planned: requeued (the rerun
    /// re-plans deliveries and leaves the mutation alone).
    pub missing_deliveries: u64,
    /// Seconds since the oldest `PENDING`/`PROCESSING` event was received.
    pub oldest_pending_seconds: f64,
    pub outbox_unpublished: i64,
}

pub struct Reconciler {
    processing: Arc<Processing>,
    /// The unpublished-notices count of the last pass.
    unpublished: AtomicI64,
    /// When the last complete pass started.
    checked: std::sync::Mutex<Option<time::OffsetDateTime>>,
}

impl Reconciler {
    pub fn new(processing: Arc<Processing>) -> Self {
        Self {
            processing,
            unpublished: AtomicI64::new(0),
            checked: std::sync::Mutex::new(None),
        }
    }

    pub async fn run(self, cancel: CancellationToken) -> anyhow::Result<()> {
        let every = Duration::from_secs(self.processing.config.worker.reconcile_interval_secs);
        let mut audit = tokio::time::interval(every);
        let mut gauges = tokio::time::interval(GAUGES_EVERY);
        for timer in [&mut audit, &mut gauges] {
            timer.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        }
        gauges.reset();
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = audit.tick() => match self.try_execute().await {
                    Ok(report) => {
                        if report.missing_marker + report.missing_deliveries > 0 {
                            tracing::warn!(?report, "reconciler requeued events");
                        }
                    }
                    Err(e) => tracing::warn!(error = %format!("{e:#}"), "reconciler pass failed"),
                },
                _ = gauges.tick() => {
                    if let Err(e) = self.refresh_gauges().await {
                        tracing::debug!(error = %format!("{e:#}"), "backlog gauges not refreshed");
                    }
                }
            }
        }
    }

    /// One pass.
    pub async fn try_execute(&self) -> anyhow::Result<Audit> {
        let p = &self.processing;
        let started = time::OffsetDateTime::now_utc();
        let since = self
            .checked
            .lock()
            .expect("not poisoned")
            .map_or(started - FIRST_LOOKBACK, |t| t - OVERLAP);
        let missing_marker = sqlx::query(
            "UPDATE webhook_inbox i
             SET status = 'PENDING', next_attempt_at = now(),
                 last_error = 'requeued by the reconciler: processing marker missing'
             WHERE i.status = 'PROCESSED' AND i.processed_at >= $1 AND NOT EXISTS (
                 SELECT 1 FROM processed_events pe WHERE pe.inbox_id = i.inbox_id)",
        )
        .bind(since)
        .execute(&p.pool)
        .await
        .redacted()?
        .rows_affected();
        let missing_deliveries = sqlx::query(
            "UPDATE webhook_inbox i
             SET status = 'PENDING', next_attempt_at = now(),
                 last_error = 'requeued by the reconciler: deliveries missing'
             WHERE i.status = 'PROCESSED' AND i.processed_at >= $1 AND i.deliveries_planned > 0
               AND i.deliveries_planned > (SELECT count(*) FROM deliveries d
                                           WHERE d.inbox_id = i.inbox_id)",
        )
        .bind(since)
        .execute(&p.pool)
        .await
        .redacted()?
        .rows_affected();
        let oldest_pending_seconds = self.oldest_pending().await?;
        let outbox_unpublished: i64 =
            sqlx::query_scalar("SELECT count(*) FROM webhook_outbox WHERE published_at IS NULL")
                .fetch_one(&p.pool)
                .await
                .redacted()?;
        self.unpublished
            .store(outbox_unpublished, Ordering::Relaxed);
        p.metrics
            .backlog(oldest_pending_seconds, outbox_unpublished);
        self.delivery_backlog().await?;
        *self.checked.lock().expect("not poisoned") = Some(started);
        if missing_marker + missing_deliveries > 0 {
            p.signals.work.notify_one();
        }
        if outbox_unpublished > 0 {
            p.signals.outbox.notify_one();
        }
        Ok(Audit {
            missing_marker,
            missing_deliveries,
            oldest_pending_seconds,
            outbox_unpublished,
        })
    }

    /// Between passes: the oldest unprocessed event's age (an index lookup); the count of
    /// unpublished notices, which can be large, keeps its value from the last pass.
    async fn refresh_gauges(&self) -> anyhow::Result<()> {
        let oldest = self.oldest_pending().await?;
        let unpublished = self.unpublished.load(Ordering::Relaxed);
        self.processing.metrics.backlog(oldest, unpublished);
        Ok(())
    }

    /// Each target's pending deliveries (through the due index) and `FAILED` ones (through
    /// the failed index), and the `FAILED` events: what alerts watch. Bounded by what is
    /// pending or failed, not by the tables' size.
    async fn delivery_backlog(&self) -> anyhow::Result<()> {
        let p = &self.processing;
        let rows: Vec<(String, String, i64, f64, i64)> = sqlx::query_as(
            "SELECT sink, target, sum(pending)::int8, coalesce(max(oldest), 0)::float8,
                    sum(failed)::int8
             FROM (SELECT sink, target, count(*) AS pending,
                          extract(epoch FROM now() - min(created_at)) AS oldest, 0 AS failed
                   FROM deliveries WHERE status = 'PENDING' GROUP BY sink, target
                   UNION ALL
                   SELECT sink, target, 0, NULL, count(*)
                   FROM deliveries WHERE status = 'FAILED' GROUP BY sink, target) t
             GROUP BY sink, target",
        )
        .fetch_all(&p.pool)
        .await
        .redacted()?;
        let inbox_failed: i64 =
            sqlx::query_scalar("SELECT count(*) FROM webhook_inbox WHERE status = 'FAILED'")
                .fetch_one(&p.pool)
                .await
                .redacted()?;
        let targets: Vec<(TargetLabels, TargetBacklog)> = rows
            .into_iter()
            .map(|(sink, target, pending, oldest, failed)| {
                let backlog = TargetBacklog {
                    pending,
                    oldest_pending_seconds: oldest,
                    failed,
                };
                (TargetLabels { sink, target }, backlog)
            })
            .collect();
        p.metrics.delivery_backlog(&targets, inbox_failed);
        Ok(())
    }

    /// Seconds since the oldest `PENDING`/`PROCESSING` event was received (0 when none).
    async fn oldest_pending(&self) -> anyhow::Result<f64> {
        // One minimum per status: each is the first entry of its range of the (status,
        // received_at) index, whatever the table's statistics say.
        let oldest: Option<f64> = sqlx::query_scalar(
            "SELECT extract(epoch FROM now() - least(
                 (SELECT min(received_at) FROM webhook_inbox WHERE status = 'PENDING'),
                 (SELECT min(received_at) FROM webhook_inbox WHERE status = 'PROCESSING')))::float8",
        )
        .fetch_one(&self.processing.pool)
        .await
        .redacted()?;
        Ok(oldest.unwrap_or(0.0))
    }
}
