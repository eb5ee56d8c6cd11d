//! Workers: lease due inbox rows, apply the built-in business mutation (the `object_state`
//! projection) at most once, plan the event's deliveries, and commit all of it together with
//! `PROCESSED` and the `processed_events` marker in one transaction.
//!
//! At most once, even when two workers hold the same event (an expired lease taken over):
//! both lock the inbox row first, and the second sees the marker the first committed.
//!
//! A claimed batch commits in one transaction (one WAL flush for up to `batch_size` events);
//! if anything in it fails, it is rolled back and each event runs in its own transaction, so
//! one bad event never holds up or fails the others.

use std::collections::HashMap;
use std::sync::Arc;

use sqlx::{Postgres, Row, Transaction};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::context::{MIN_IDLE, Processing, wait_for_work};
use crate::config::EndpointConfig;
use crate::ingest::redact_db;
use crate::support::failpoint;

/// One claimed inbox row. `claim_id` is the lease token, fresh for every claim and never
/// reused (replay and giving a claim back leave it unmatched): every later update of the row
/// requires it unchanged. `attempt` is the attempt count after claiming, for backoff only.
#[derive(Debug, Clone)]
pub struct Claim {
    pub inbox_id: Uuid,
    pub provider: String,
    pub endpoint_id: String,
    pub event_id: String,
    pub event_type: String,
    pub object_id: Option<String>,
    pub version_kind: Option<String>,
    pub version: Option<i64>,
    pub payload_ref: Uuid,
    pub attempt: i32,
    pub claim_id: Uuid,
}

/// What processing did to the projection for one event (its `outcome` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The projection moved to this event's version.
    Applied,
    /// The projection already holds a newer version; nothing changed.
    Stale,
    /// The event names an object but carries no version: the projection is left alone
    /// rather than ordered by arrival.
    Unversioned,
    /// The event names no object.
    NoObject,
}

impl Effect {
    pub fn as_str(self) -> &'static str {
        match self {
            Effect::Applied => "applied",
            Effect::Stale => "stale",
            Effect::Unversioned => "unversioned",
            Effect::NoObject => "no_object",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "applied" => Effect::Applied,
            "stale" => Effect::Stale,
            "unversioned" => Effect::Unversioned,
            _ => Effect::NoObject,
        }
    }
}

/// One event committed as processed.
struct Applied {
    inbox_id: Uuid,
    outcome: Effect,
    deliveries: usize,
}

#[derive(Debug, thiserror::Error)]
enum ProcessError {
    /// Retrying cannot help (unknown endpoint, payload gone): `FAILED` at once.
    #[error("{0}")]
    Poison(String),
    /// Retry with backoff until the endpoint's attempts run out.
    #[error("{0}")]
    Transient(String),
}

impl From<sqlx::Error> for ProcessError {
    fn from(e: sqlx::Error) -> Self {
        ProcessError::Transient(redact_db(&e))
    }
}

pub struct Worker {
    processing: Arc<Processing>,
}

impl Worker {
    pub fn new(processing: Arc<Processing>) -> Self {
        Self { processing }
    }

    /// Claims one batch and processes it; returns how many rows were claimed. Tests drive
    /// workers through this one step.
    pub async fn try_execute(&self) -> anyhow::Result<usize> {
        self.execute(&CancellationToken::new()).await
    }

    async fn execute(&self, cancel: &CancellationToken) -> anyhow::Result<usize> {
        let claims = self.claim().await?;
        let n = claims.len();
        if n == self.processing.config.worker.batch_size as usize {
            // A full batch: more is likely due, so let a peer start on it now.
            self.processing.signals.work.notify_one();
        }
        if n == 0 {
            return Ok(0);
        }
        if cancel.is_cancelled() {
            self.release(claims).await;
            return Ok(n);
        }
        // The common case: the whole batch in one transaction, one commit.
        match self.apply(&claims).await {
            Ok(done) => self.acknowledge(&done),
            Err(e) if n == 1 => self.record_failure(&claims[0], e).await,
            Err(e) => {
                // Something in the batch failed: rolled back, so each event runs alone and
                // only the ones at fault are retried or failed.
                tracing::debug!(error = %e, batch = n, "batch failed; processing one by one");
                let mut rest = claims.into_iter();
                for claim in rest.by_ref() {
                    match self.apply(std::slice::from_ref(&claim)).await {
                        Ok(done) => self.acknowledge(&done),
                        Err(e) => self.record_failure(&claim, e).await,
                    }
                    if cancel.is_cancelled() {
                        break;
                    }
                }
                self.release(rest.collect()).await;
            }
        }
        Ok(n)
    }

    pub async fn run(self, cancel: CancellationToken) -> anyhow::Result<()> {
        let max_idle = self.processing.idle_poll();
        let mut idle = MIN_IDLE;
        while !cancel.is_cancelled() {
            match self.execute(&cancel).await {
                Ok(n) if n > 0 => {
                    idle = MIN_IDLE;
                    continue;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %format!("{e:#}"), "worker: cannot claim events"),
            }
            if !wait_for_work(
                self.processing.signals.work.notified(),
                &mut idle,
                max_idle,
                &cancel,
            )
            .await
            {
                break;
            }
        }
        Ok(())
    }

    async fn claim(&self) -> anyhow::Result<Vec<Claim>> {
        let w = &self.processing.config.worker;
        let rows = sqlx::query(
            "UPDATE webhook_inbox AS i
             SET status = 'PROCESSING', attempt_count = i.attempt_count + 1,
                 claim_id = gen_random_uuid(),
                 lease_until = now() + make_interval(secs => $2),
                 next_attempt_at = now() + make_interval(secs => $2)
             FROM (SELECT inbox_id FROM webhook_inbox
                   WHERE status IN ('PENDING', 'PROCESSING') AND next_attempt_at <= now()
                   ORDER BY next_attempt_at
                   LIMIT $1
                   FOR UPDATE SKIP LOCKED) AS due
             WHERE i.inbox_id = due.inbox_id
             RETURNING i.inbox_id, i.provider, i.endpoint_id, i.provider_event_id, i.event_type,
                       i.object_id, i.object_version_kind, i.object_version, i.raw_payload_ref,
                       i.attempt_count, i.claim_id",
        )
        .bind(i64::from(w.batch_size))
        .bind(w.lease_secs as f64)
        .fetch_all(&self.processing.pool)
        .await?;
        let mut claims: Vec<Claim> = rows
            .into_iter()
            .map(|r| Claim {
                inbox_id: r.get(0),
                provider: r.get(1),
                endpoint_id: r.get(2),
                event_id: r.get(3),
                event_type: r.get(4),
                object_id: r.get(5),
                version_kind: r.get(6),
                version: r.get(7),
                payload_ref: r.get(8),
                attempt: r.get(9),
                claim_id: r.get(10),
            })
            .collect();
        // UPDATE ... RETURNING has no order; process in version order so a batch holding
        // several versions of one object applies them oldest first.
        claims.sort_by(|a, b| (&a.object_id, a.version).cmp(&(&b.object_id, b.version)));
        Ok(claims)
    }

    /// After the commit: metrics and waking the delivery relays.
    fn acknowledge(&self, done: &[Applied]) {
        failpoint::hit(failpoint::WORKER_AFTER_COMMIT);
        let p = &self.processing;
        for applied in done {
            p.metrics.worker_event(applied.outcome.as_str());
            tracing::debug!(inbox_id = %applied.inbox_id, outcome = applied.outcome.as_str(), "processed");
        }
        if done.iter().any(|a| a.deliveries > 0) {
            p.signals.deliveries_committed();
        }
    }

    /// The business transaction for claimed events (sorted by object and version, which is
    /// also the order rows of `object_state` are locked in, so concurrent batches cannot
    /// deadlock on them). Events whose lease was lost to another worker are left out.
    async fn apply(&self, claims: &[Claim]) -> Result<Vec<Applied>, ProcessError> {
        let p = &self.processing;
        let mut endpoints = Vec::with_capacity(claims.len());
        for claim in claims {
            let endpoint = p
                .config
                .endpoints
                .iter()
                .find(|e| e.id == claim.endpoint_id);
            endpoints.push(endpoint.ok_or_else(|| {
                ProcessError::Poison(format!(
                    "endpoint {:?} is not configured on this worker",
                    claim.endpoint_id
                ))
            })?);
        }
        let refs: Vec<Uuid> = claims.iter().map(|c| c.payload_ref).collect();
        let bodies: HashMap<Uuid, Vec<u8>> = sqlx::query_as::<_, (Uuid, Vec<u8>)>(
            "SELECT payload_ref, body FROM webhook_payloads WHERE payload_ref = ANY($1)",
        )
        .bind(&refs)
        .fetch_all(&p.pool)
        .await?
        .into_iter()
        .collect();

        let ids: Vec<Uuid> = claims.iter().map(|c| c.inbox_id).collect();
        let mut tx = p.pool.begin().await?;
        // Lock the inbox rows: a worker that took over an expired lease waits here.
        let held: HashMap<Uuid, (String, Option<Uuid>)> =
            sqlx::query_as::<_, (Uuid, String, Option<Uuid>)>(
                "SELECT inbox_id, status, claim_id FROM webhook_inbox
             WHERE inbox_id = ANY($1) ORDER BY inbox_id FOR UPDATE",
            )
            .bind(&ids)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|(id, status, claim_id)| (id, (status, claim_id)))
            .collect();
        let done: HashMap<Uuid, String> = sqlx::query_as::<_, (Uuid, String)>(
            "SELECT inbox_id, outcome FROM processed_events WHERE inbox_id = ANY($1)",
        )
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .collect();

        let mut applied = Vec::with_capacity(claims.len());
        for (claim, endpoint) in claims.iter().zip(endpoints) {
            if held.get(&claim.inbox_id) != Some(&("PROCESSING".to_owned(), Some(claim.claim_id))) {
                continue;
            }
            let done = done.get(&claim.inbox_id).map(String::as_str);
            let state = match (done, bodies.get(&claim.payload_ref)) {
                // Already applied (a requeue by the reconciler or an operator): only the
                // deliveries are re-planned, so the payload is not needed.
                (Some(_), _) => None,
                (None, Some(body)) => json_state(body),
                (None, None) => {
                    return Err(ProcessError::Poison(
                        "payload no longer stored (past retention)".into(),
                    ));
                }
            };
            let targets = delivery_targets(p, endpoint, claim);
            let outcome = finish(&mut tx, claim, state.as_deref(), done, &targets).await?;
            let deliveries = targets.len();
            applied.push(Applied {
                inbox_id: claim.inbox_id,
                outcome,
                deliveries,
            });
        }
        tx.commit().await?;
        Ok(applied)
    }

    /// Back to `PENDING` with backoff, or `FAILED` when poisoned or out of attempts. If this
    /// update fails too, the lease expires and the event is claimed again.
    async fn record_failure(&self, claim: &Claim, error: ProcessError) {
        let p = &self.processing;
        let max_attempts = p.config.max_attempts(&claim.endpoint_id) as i32;
        let failed = matches!(error, ProcessError::Poison(_)) || claim.attempt >= max_attempts;
        let delay = p.backoff(claim.attempt);
        let message = error.to_string();
        let result = sqlx::query(
            "UPDATE webhook_inbox
             SET status = CASE WHEN $3 THEN 'FAILED' ELSE 'PENDING' END,
                 next_attempt_at = now() + make_interval(secs => $4),
                 lease_until = NULL, claim_id = NULL, last_error = $5
             WHERE inbox_id = $1 AND status = 'PROCESSING' AND claim_id = $2",
        )
        .bind(claim.inbox_id)
        .bind(claim.claim_id)
        .bind(failed)
        .bind(delay.as_secs_f64())
        .bind(&message)
        .execute(&p.pool)
        .await;
        let outcome = if failed { "failed" } else { "retry" };
        p.metrics.worker_event(outcome);
        tracing::warn!(
            inbox_id = %claim.inbox_id,
            endpoint = %claim.endpoint_id,
            attempt = claim.attempt,
            outcome,
            error = %message,
            recorded = result.is_ok(),
            "event processing failed"
        );
    }

    /// Gives back claims not started (on shutdown): the attempt is not counted, and the claim
    /// token is cleared rather than restored, so it can never match a later claim.
    async fn release(&self, claims: Vec<Claim>) {
        if claims.is_empty() {
            return;
        }
        let ids: Vec<Uuid> = claims.iter().map(|c| c.inbox_id).collect();
        let tokens: Vec<Uuid> = claims.iter().map(|c| c.claim_id).collect();
        let result = sqlx::query(
            "UPDATE webhook_inbox AS i
             SET status = 'PENDING', attempt_count = i.attempt_count - 1,
                 next_attempt_at = now(), lease_until = NULL, claim_id = NULL
             FROM unnest($1::uuid[], $2::uuid[]) AS c(inbox_id, claim_id)
             WHERE i.inbox_id = c.inbox_id AND i.status = 'PROCESSING'
               AND i.claim_id = c.claim_id",
        )
        .bind(&ids)
        .bind(&tokens)
        .execute(&self.processing.pool)
        .await;
        if let Err(e) = result {
            // The leases expire instead.
            tracing::warn!(error = %redact_db(&e), released = ids.len(), "releasing claims failed");
        }
    }
}

/// The event document stored in the projection: the payload when it is JSON that Postgres
/// can hold (`jsonb` refuses `\u0000`), otherwise none.
fn json_state(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let text = value.to_string();
    (!text.contains("\\u0000")).then_some(text)
}

/// The built-in mutation and everything that commits with it, for one event, in one
/// statement (one round trip): move the object's projection forward if this event is newer,
/// write the `processed_events` marker, plan the deliveries and mark the inbox row
/// `PROCESSED`. With `done` (the marker already exists), only the last two.
///
/// Ordering: `sequence` versions compare as numbers (equal is stale); `created_at` versions
/// compare as (created, event id), so two events created in the same second still have one
/// order. An event without an object or a version leaves the projection alone.
async fn finish(
    tx: &mut Transaction<'_, Postgres>,
    claim: &Claim,
    state: Option<&str>,
    done: Option<&str>,
    targets: &[(&str, &str, u32)],
) -> Result<Effect, sqlx::Error> {
    let outcome: String = sqlx::query_scalar(
        "WITH projected AS (
             INSERT INTO object_state AS o (provider, endpoint_id, object_id, version_kind,
                 object_version, event_id, event_type, state, inbox_id, updated_at)
             SELECT $1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9, now()
             WHERE $10::text IS NULL AND $3::text IS NOT NULL AND $4::text IS NOT NULL
               AND $5::bigint IS NOT NULL
             ON CONFLICT (provider, endpoint_id, object_id) DO UPDATE
             SET version_kind = EXCLUDED.version_kind, object_version = EXCLUDED.object_version,
                 event_id = EXCLUDED.event_id, event_type = EXCLUDED.event_type,
                 state = EXCLUDED.state, inbox_id = EXCLUDED.inbox_id, updated_at = now()
             WHERE o.object_version < EXCLUDED.object_version
                OR (EXCLUDED.version_kind = 'created_at'
                    AND o.object_version = EXCLUDED.object_version
                    AND o.event_id < EXCLUDED.event_id)
             RETURNING 1
         ), outcome AS (
             SELECT CASE
                 WHEN $10::text IS NOT NULL THEN $10::text
                 WHEN $3::text IS NULL THEN 'no_object'
                 WHEN $4::text IS NULL OR $5::bigint IS NULL THEN 'unversioned'
                 WHEN EXISTS (SELECT 1 FROM projected) THEN 'applied'
                 ELSE 'stale' END AS value
         ), marker AS (
             INSERT INTO processed_events (provider, endpoint_id, provider_event_id, inbox_id,
                 outcome)
             SELECT $1, $2, $6, $9, value FROM outcome WHERE $10::text IS NULL
         ), planned AS (
             INSERT INTO deliveries (delivery_id, inbox_id, sink, target, max_attempts)
             SELECT d.id, $9, d.sink, d.target, d.max_attempts
             FROM unnest($11::uuid[], $12::text[], $13::text[], $14::int[])
                  AS d(id, sink, target, max_attempts)
             ON CONFLICT ON CONSTRAINT deliveries_once_per_target DO NOTHING
         ), inbox AS (
             UPDATE webhook_inbox
             SET status = 'PROCESSED', outcome = (SELECT value FROM outcome),
                 processed_at = now(), lease_until = NULL, claim_id = NULL, next_attempt_at = now(),
                 last_error = NULL, deliveries_planned = cardinality($11::uuid[])
             WHERE inbox_id = $9
         )
         SELECT value FROM outcome",
    )
    .bind(&claim.provider)
    .bind(&claim.endpoint_id)
    .bind(&claim.object_id)
    .bind(&claim.version_kind)
    .bind(claim.version)
    .bind(&claim.event_id)
    .bind(&claim.event_type)
    .bind(state)
    .bind(claim.inbox_id)
    .bind(done)
    .bind(targets.iter().map(|_| Uuid::now_v7()).collect::<Vec<_>>())
    .bind(targets.iter().map(|t| t.0).collect::<Vec<_>>())
    .bind(targets.iter().map(|t| t.1).collect::<Vec<_>>())
    .bind(targets.iter().map(|t| t.2 as i32).collect::<Vec<_>>())
    .fetch_one(&mut **tx)
    .await?;
    Ok(Effect::parse(&outcome))
}

/// The (sink, target, max attempts) of every route matching the event; two routes to the
/// same target are one delivery.
fn delivery_targets<'a>(
    p: &'a Processing,
    endpoint: &EndpointConfig,
    claim: &Claim,
) -> Vec<(&'a str, &'a str, u32)> {
    let mut targets: Vec<_> = p
        .config
        .routes
        .iter()
        .filter(|r| r.matches(&endpoint.id, &claim.event_type))
        .map(|r| (r.sink.as_str(), r.target(), r.max_attempts))
        .collect();
    targets.sort();
    targets.dedup_by(|a, b| (a.0, a.1) == (b.0, b.1));
    targets
}
