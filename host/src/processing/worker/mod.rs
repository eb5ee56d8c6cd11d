//! Workers: lease due inbox rows, apply the built-in business mutation (the `object_state`
//! projection) at most once, plan the event's deliveries, and commit all of it together with
//! `PROCESSED` and the `processed_events` marker in one transaction.
//!
//! At most once, even when two workers hold the same event (an expired lease taken over):
//! both lock the inbox row first and only the holder of its current claim token goes on; an
//! event already applied (requeued by the reconciler or an operator) has its marker, and only
//! its deliveries are planned again.
//!
//! A claimed batch is applied with a fixed number of set-based statements, whatever its size:
//! lock the rows (reading markers), lock the objects' projection rows, then one statement
//! writes every marker, delivery, status and projection row, and one commit. The outcome of
//! each event is decided here, in version order, as if the batch's events were applied one
//! by one. If the batch fails, it is rolled back and each event runs alone, so one bad event
//! never fails its neighbours.
//!
//! This file is the worker loop and one batch's transaction (`apply`); the rest:

/// Leases from ingest or claims from the database; locks claimed rows; gives claims back.
mod claim;
/// Outcomes in version order, the projection rows they are compared with, the plan written.
mod decide;
/// The one statement that writes a batch's plan.
mod write;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::context::{MIN_IDLE, Processing, wait_for_work};
use super::document::storable_json;
use super::payloads::Bodies;
use crate::config::{EndpointConfig, ProjectionDocument};
pub use crate::ingest::Claim;
use crate::ingest::redact_db;
use crate::support::failpoint;
use crate::support::traces::{KeyValue, SpanKind, TraceSpan};
pub use decide::Effect;
use decide::{Decided, Moved, ObjectKey, Planned, delivery_targets};

/// One event committed as processed.
struct Applied {
    inbox_id: Uuid,
    outcome: Effect,
    deliveries: usize,
}

/// What one batch transaction did: events committed as processed, and events left out of it
/// because their payload cannot be had now (their failure is recorded after the transaction
/// ends, since it holds their rows' locks: `FAILED` when retrying cannot help, else a retry).
#[derive(Default)]
struct Committed {
    applied: Vec<Applied>,
    left_out: Vec<(usize, ProcessError)>,
}

#[derive(Debug, thiserror::Error)]
enum ProcessError {
    /// Retrying cannot help (unknown endpoint, payload gone): `FAILED` at once.
    #[error("{0}")]
    Poison(String),
    /// Retry with backoff until the endpoint's attempts run out.
    #[error("{0}")]
    Transient(String),
    /// Another worker inserted the first projection row of one of the batch's objects after
    /// this one looked: the outcomes were decided without it, so the batch was rolled back.
    #[error("an object's projection row appeared concurrently")]
    Raced,
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
        let claims = claim::leased_or_claimed(&self.processing).await?;
        let n = claims.len();
        if n == self.processing.config.worker.batch_size as usize {
            // A full batch: more is likely due, so let a peer start on it now.
            self.processing.signals.work.notify_one();
        }
        if n == 0 {
            return Ok(0);
        }
        if cancel.is_cancelled() {
            claim::release(&self.processing, claims).await;
            return Ok(n);
        }
        // An event for an endpoint this worker does not know cannot be processed here, and
        // need not hold up the others.
        let (claims, unknown): (Vec<Claim>, Vec<Claim>) = claims
            .into_iter()
            .partition(|c| self.endpoint(&c.endpoint_id).is_some());
        for claim in &unknown {
            let error = ProcessError::Poison(format!(
                "endpoint {:?} is not configured on this worker",
                claim.endpoint_id
            ));
            self.record_failure(claim, error).await;
        }
        if claims.is_empty() {
            return Ok(n);
        }
        // The common case: the whole batch in one transaction, one commit.
        match self.apply_settled(&claims).await {
            Ok(committed) => self.settle(&claims, committed).await,
            Err(e) if claims.len() == 1 => self.record_failure(&claims[0], e).await,
            Err(e) => {
                // Something in the batch failed: rolled back, so each event runs alone and
                // only the ones at fault are retried or failed.
                tracing::debug!(error = %e, batch = claims.len(), "batch failed; processing one by one");
                let mut rest = claims.into_iter();
                for claim in rest.by_ref() {
                    let one = std::slice::from_ref(&claim);
                    match self.apply_settled(one).await {
                        Ok(committed) => self.settle(one, committed).await,
                        Err(e) => self.record_failure(&claim, e).await,
                    }
                    if cancel.is_cancelled() {
                        break;
                    }
                }
                claim::release(&self.processing, rest.collect()).await;
            }
        }
        Ok(n)
    }

    pub async fn run(self, cancel: CancellationToken) -> anyhow::Result<()> {
        let max_idle = self.processing.idle_poll();
        let full = self.processing.config.worker.batch_size as usize;
        // Each batch costs a fixed number of statements and one commit however many events it
        // holds, so under a steady stream a worker that took everything due lets the next
        // batch gather for `linger_ms` rather than claim each event as it arrives.
        let linger = Duration::from_millis(self.processing.config.worker.linger_ms);
        let mut idle = MIN_IDLE;
        while !cancel.is_cancelled() {
            match self.execute(&cancel).await {
                Ok(n) if n >= full => {
                    idle = MIN_IDLE;
                    continue;
                }
                Ok(n) if n > 0 => {
                    idle = MIN_IDLE;
                    tokio::select! {
                        _ = cancel.cancelled() => break,
                        _ = tokio::time::sleep(linger) => continue,
                    }
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
        // Leased to this host and not started: back to the database now rather than when
        // their leases run out; acceptances still in flight lease nothing more.
        if let Some(handoff) = &self.processing.handoff {
            claim::release(&self.processing, handoff.close()).await;
        }
        Ok(())
    }

    fn endpoint(&self, id: &str) -> Option<Arc<EndpointConfig>> {
        self.processing.endpoint(id)
    }

    /// After a batch transaction ended: record what was left out, then acknowledge.
    async fn settle(&self, claims: &[Claim], committed: Committed) {
        for (i, error) in committed.left_out {
            self.record_failure(&claims[i], error).await;
        }
        if self.processing.traces.enabled() {
            let applied: HashMap<Uuid, &Applied> =
                committed.applied.iter().map(|a| (a.inbox_id, a)).collect();
            for claim in claims {
                if let Some(a) = applied.get(&claim.inbox_id) {
                    self.trace(claim, "processed", |span| {
                        span.set("wharf.effect", a.outcome.as_str());
                        span.set("wharf.deliveries_planned", a.deliveries as i64);
                    });
                }
            }
        }
        self.acknowledge(&committed.applied);
    }

    /// The span of one processing attempt, from its claim to now: a child of the accepting
    /// request's span (stored with the inbox row), so one trace runs from the request to
    /// its deliveries whichever host processes it.
    fn trace(&self, claim: &Claim, outcome: &'static str, more: impl FnOnce(&mut TraceSpan)) {
        let Some(mut span) = self.processing.traces.span_since(
            "wharf.process",
            SpanKind::Consumer,
            claim.trace_context.as_deref(),
            Some(claim.claimed_at),
            vec![
                KeyValue::new("wharf.inbox_id", claim.inbox_id.to_string()),
                KeyValue::new("wharf.endpoint", claim.endpoint_id.clone()),
                KeyValue::new("wharf.provider", claim.provider.clone()),
                KeyValue::new("wharf.event_type", claim.event_type.clone()),
                KeyValue::new("wharf.attempt", i64::from(claim.attempt)),
                KeyValue::new("wharf.outcome", outcome),
            ],
        ) else {
            return;
        };
        more(&mut span);
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

    /// `apply`, once more if it lost a race for a new object's row: that row is committed
    /// by then (the insert that found it waited for its transaction), so the second attempt
    /// sees it and locks it like any other.
    async fn apply_settled(&self, claims: &[Claim]) -> Result<Committed, ProcessError> {
        match self.apply(claims).await {
            Err(ProcessError::Raced) => self.apply(claims).await,
            other => other,
        }
    }

    /// The business transaction for claimed events (sorted by object and version): a fixed
    /// number of statements for the whole batch. Events whose lease was lost to another
    /// worker are left out.
    async fn apply(&self, claims: &[Claim]) -> Result<Committed, ProcessError> {
        let p = &self.processing;
        // The routes as configured now, one table for the whole batch.
        let routes = p.routes.load();
        // Read before the transaction, so no lock is held while the bodies come in. Whole
        // bodies, each once however many of the batch's events it holds; each event then
        // takes its own span of it (`Bodies::event`). Only the bodies a projection keeps, or
        // that may be gone: an event leased at acceptance needs no read to know its payload
        // is there (with `projection_document = "none"`, most events are not read at all).
        let needs_body = |c: &Claim| !c.payload_committed || keeps_document(p, c);
        let refs: Vec<Uuid> = claims
            .iter()
            .filter(|c| needs_body(c))
            .map(|c| c.payload_ref)
            .collect();
        let bodies = Bodies::read(&p.pool, &p.payload_keys, &refs).await?;

        let mut tx = p.pool.begin().await?;
        let held = claim::lock_claimed(&mut tx, claims).await?;
        let mut committed = Committed::default();
        // The events this transaction processes: still ours, and applied already (a requeue:
        // only the deliveries are planned again, so the payload is not needed) or with the
        // payload they need.
        let mut live: Vec<(usize, Option<Effect>)> = Vec::with_capacity(claims.len());
        for (i, claim) in claims.iter().enumerate() {
            match held.get(&claim.inbox_id) {
                None => {}
                Some(Some(done)) => live.push((i, Some(*done))),
                Some(None) if !needs_body(claim) => live.push((i, None)),
                Some(None) => match bodies.event(&p.payload_keys, claim) {
                    Ok(_) => live.push((i, None)),
                    Err(why) if why.is_transient() => committed
                        .left_out
                        .push((i, ProcessError::Transient(why.to_string()))),
                    Err(why) => committed
                        .left_out
                        .push((i, ProcessError::Poison(why.to_string()))),
                },
            }
        }

        // Each object's projection row as it stands, locked (in key order, so concurrent
        // batches cannot deadlock on them) until the commit.
        let mut objects: Vec<ObjectKey<'_>> = live
            .iter()
            .filter(|(_, done)| done.is_none())
            .filter_map(|&(i, _)| decide::object(&claims[i]))
            .collect();
        objects.dedup();
        let stored = decide::lock_objects(&mut tx, &objects).await?;

        let Decided { outcomes, moved } = decide::decide(claims, &live, &stored);
        let projection: Vec<Moved<'_>> = moved
            .iter()
            .map(|&(key, last)| {
                let claim = &claims[last];
                Moved {
                    claim,
                    existing: stored.contains_key(&key),
                    state: keeps_document(p, claim)
                        .then(|| bodies.event(&p.payload_keys, claim).ok())
                        .flatten()
                        .and_then(storable_json),
                }
            })
            .collect();
        let events: Vec<Planned<'_>> = live
            .iter()
            .zip(outcomes)
            .map(|(&(i, done), outcome)| {
                let claim = &claims[i];
                let targets = self
                    .endpoint(&claim.endpoint_id)
                    .map_or_else(Vec::new, |e| delivery_targets(&routes, &e, claim));
                Planned {
                    claim,
                    outcome,
                    fresh: done.is_none(),
                    targets,
                }
            })
            .collect();
        if !events.is_empty() {
            let written = write::write(&mut tx, &events, &projection).await?;
            if written != projection.len() {
                return Err(ProcessError::Raced);
            }
        }
        tx.commit().await?;
        committed.applied = events
            .iter()
            .map(|e| Applied {
                inbox_id: e.claim.inbox_id,
                outcome: e.outcome,
                deliveries: e.targets.len(),
            })
            .collect();
        Ok(committed)
    }

    /// Back to `PENDING` with backoff, or `FAILED` when poisoned or out of attempts. If this
    /// update fails too, the lease expires and the event is claimed again.
    async fn record_failure(&self, claim: &Claim, error: ProcessError) {
        let p = &self.processing;
        let max_attempts = p.max_attempts(&claim.endpoint_id) as i32;
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
        self.trace(claim, outcome, |span| span.fail(message.clone()));
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
}

/// Whether the projection keeps this event's document, so its body is needed.
fn keeps_document(p: &Processing, claim: &Claim) -> bool {
    p.projection_document(&claim.endpoint_id) == ProjectionDocument::Event
}
