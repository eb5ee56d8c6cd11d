//! The reconciler: a periodic audit that finds accepted events whose processing or
//! deliveries went missing and requeues them. In normal operation it finds nothing, because
//! each stage commits its successor's rows in its own transaction; it exists for what that
//! cannot cover (rows removed by hand, a restore from backup, a bug). It also refreshes the
//! backlog gauges.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::context::Processing;
use crate::ingest::redact_db;

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
}

impl Reconciler {
    pub fn new(processing: Arc<Processing>) -> Self {
        Self { processing }
    }

    pub async fn run(self, cancel: CancellationToken) -> anyhow::Result<()> {
        let every = Duration::from_secs(self.processing.config.worker.reconcile_interval_secs);
        loop {
            match self.try_execute().await {
                Ok(report) => {
                    if report.missing_marker + report.missing_deliveries > 0 {
                        tracing::warn!(?report, "reconciler requeued events");
                    }
                }
                Err(e) => tracing::warn!(error = %format!("{e:#}"), "reconciler pass failed"),
            }
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = tokio::time::sleep(every) => {}
            }
        }
    }

    /// One pass.
    pub async fn try_execute(&self) -> anyhow::Result<Audit> {
        let p = &self.processing;
        let db = |e: sqlx::Error| anyhow::anyhow!(redact_db(&e));
        let missing_marker = sqlx::query(
            "UPDATE webhook_inbox i
             SET status = 'PENDING', next_attempt_at = now(),
                 last_error = 'requeued by the reconciler: processing marker missing'
             WHERE i.status = 'PROCESSED' AND NOT EXISTS (
                 SELECT 1 FROM processed_events pe
                 WHERE pe.provider = i.provider AND pe.endpoint_id = i.endpoint_id
                   AND pe.provider_event_id = i.provider_event_id)",
        )
        .execute(&p.pool)
        .await
        .map_err(db)?
        .rows_affected();
        let missing_deliveries = sqlx::query(
            "UPDATE webhook_inbox i
             SET status = 'PENDING', next_attempt_at = now(),
                 last_error = 'requeued by the reconciler: deliveries missing'
             WHERE i.status = 'PROCESSED' AND i.deliveries_planned > 0
               AND i.deliveries_planned > (SELECT count(*) FROM deliveries d
                                           WHERE d.inbox_id = i.inbox_id)",
        )
        .execute(&p.pool)
        .await
        .map_err(db)?
        .rows_affected();
        let (oldest, unpublished): (Option<f64>, i64) = sqlx::query_as(
            "SELECT (SELECT extract(epoch FROM now() - min(received_at))::float8
                     FROM webhook_inbox WHERE status IN ('PENDING', 'PROCESSING')),
                    (SELECT count(*) FROM webhook_outbox WHERE published_at IS NULL)",
        )
        .fetch_one(&p.pool)
        .await
        .map_err(db)?;
        let report = Audit {
            missing_marker,
            missing_deliveries,
            oldest_pending_seconds: oldest.unwrap_or(0.0),
            outbox_unpublished: unpublished,
        };
        p.metrics
            .backlog(report.oldest_pending_seconds, report.outbox_unpublished);
        if missing_marker + missing_deliveries > 0 {
            p.signals.work.notify_one();
        }
        if unpublished > 0 {
            p.signals.outbox.notify_one();
        }
        Ok(report)
    }
}
