//! The outbox relay: publishes the accepted-event notices that ingest commits with each inbox
//! row (`webhook_outbox`), then marks them published.
//!
//! What a notice triggers: with `[nats]` configured, a message on
//! `<accepted_prefix>.<endpoint>.<event type>` (default prefix
//! `wharf.accepted`) in the `accepted_stream` (JSON with the inbox id,
//! endpoint, provider, event id and type; `Nats-Msg-Id` = inbox id). Workers on every host
//! subscribe to it to wake at once instead of at their next poll, and other systems may
//! follow it as a feed of accepted events. Without `[nats]` the relay marks rows published as
//! it finds them: processing never depends on a notice, only on the inbox row.
//!
//! A crash between publishing and marking publishes the notice again; the stream's duplicate
//! window drops the copy, and a copy past it only wakes a worker once more.

use std::sync::Arc;

use bytes::Bytes;
use sqlx::Row;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::context::{MIN_IDLE, Processing, wait_for_work};
use crate::ingest::Redacted;
use crate::support::failpoint;

const BATCH: i64 = 256;

pub struct OutboxRelay {
    processing: Arc<Processing>,
}

impl OutboxRelay {
    pub fn new(processing: Arc<Processing>) -> Self {
        Self { processing }
    }

    pub async fn run(self, cancel: CancellationToken) -> anyhow::Result<()> {
        let p = &self.processing;
        if let Some(nats) = &p.nats {
            // Not fatal: the stream is created on a later attempt when NATS is back.
            if let Err(e) = nats.ensure_accepted_stream().await {
                tracing::warn!(error = %format!("{e:#}"), "accepted-events stream not ready");
            }
        }
        let mut idle = MIN_IDLE;
        while !cancel.is_cancelled() {
            match self.try_execute().await {
                Ok(n) if n > 0 => {
                    idle = MIN_IDLE;
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "outbox relay: publishing failed");
                    // Wait for at least one poll interval before hammering a broken sink.
                    idle = p.idle_poll();
                }
            }
            // Without `[nats]` this host commits its notices published, so an acceptance is
            // no reason to look; only rows from hosts configured otherwise, found by polling.
            let woken = async {
                match p.nats {
                    Some(_) => p.signals.outbox.notified().await,
                    None => std::future::pending().await,
                }
            };
            if !wait_for_work(woken, &mut idle, p.idle_poll(), &cancel).await {
                break;
            }
        }
        Ok(())
    }

    /// Publishes one batch of unpublished notices, oldest first, and marks them; returns
    /// how many were marked. Rows are locked (`SKIP LOCKED`) so relays on several hosts
    /// share the work.
    pub async fn try_execute(&self) -> anyhow::Result<usize> {
        let p = &self.processing;
        let mut tx = p.pool.begin().await.redacted()?;
        // Walk the unpublished-rows index in order, whatever the statistics say. Without them
        // (a new or fast-growing table) the planner bitmap-scans every entry of that index,
        // including those of rows published since the last vacuum, and sorts them all before
        // the limit: a cost that grows with every event since, per batch (up to a second per
        // batch after 30 s at 1,500 events/s in `bench-processing.sh live`). The ordered
        // index scan stops after the batch and marks the dead entries it passes.
        sqlx::query(
            "SELECT set_config('enable_bitmapscan', 'off', true),
                    set_config('enable_sort', 'off', true)",
        )
        .execute(&mut *tx)
        .await
        .redacted()?;
        let rows = sqlx::query(
            "SELECT o.outbox_id, o.topic, i.inbox_id, i.provider, i.endpoint_id,
                    i.provider_event_id, i.event_type
             FROM webhook_outbox o JOIN webhook_inbox i USING (inbox_id)
             WHERE o.published_at IS NULL
             ORDER BY o.created_at
             LIMIT $1
             FOR UPDATE OF o SKIP LOCKED",
        )
        .bind(BATCH)
        .fetch_all(&mut *tx)
        .await
        .redacted()?;
        if rows.is_empty() {
            return Ok(0);
        }
        // Every notice is sent before any acknowledgement is awaited (one round trip to the
        // stream for the batch, not one per notice); rows are marked in order up to the
        // first notice that was not acknowledged.
        let mut sent = Vec::with_capacity(rows.len());
        let mut failure = None;
        for row in &rows {
            let outbox_id: Uuid = row.get(0);
            let Some(nats) = &p.nats else {
                sent.push((outbox_id, None));
                continue;
            };
            let topic: String = row.get(1);
            let inbox_id: Uuid = row.get(2);
            let notice = serde_json::json!({
                "inbox_id": inbox_id,
                "provider": row.get::<String, _>(3),
                "endpoint": row.get::<String, _>(4),
                "event_id": row.get::<String, _>(5),
                "event_type": row.get::<String, _>(6),
            });
            let timeout = std::time::Duration::from_millis(
                p.config.nats.as_ref().map_or(5000, |n| n.ack_timeout_ms),
            );
            // Only the inbox id goes into a header (provider text is in the JSON body), so
            // building them cannot fail in practice; it is not allowed to panic either.
            let ack = match super::nats::headers(&inbox_id.to_string(), &[]) {
                Ok(headers) => {
                    nats.send(
                        nats.accepted_subject(&topic),
                        headers,
                        Bytes::from(notice.to_string()),
                        timeout,
                    )
                    .await
                }
                Err(e) => Err(e.into()),
            };
            match ack {
                Ok(ack) => sent.push((outbox_id, Some(ack))),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let mut published: Vec<Uuid> = Vec::with_capacity(sent.len());
        for (outbox_id, ack) in sent {
            if let Some(ack) = ack {
                if let Err(e) = ack.await {
                    // Keep order: mark only what went out before the first failure.
                    failure = Some(e);
                    break;
                }
                failpoint::hit(failpoint::OUTBOX_AFTER_PUBLISH);
            }
            published.push(outbox_id);
        }
        sqlx::query("UPDATE webhook_outbox SET published_at = now() WHERE outbox_id = ANY($1)")
            .bind(&published)
            .execute(&mut *tx)
            .await
            .redacted()?;
        tx.commit().await.redacted()?;
        match failure {
            Some(e) if published.is_empty() => Err(e),
            Some(e) => {
                tracing::warn!(error = %format!("{e:#}"), "outbox relay: publishing stopped early");
                Ok(published.len())
            }
            None => Ok(published.len()),
        }
    }
}
