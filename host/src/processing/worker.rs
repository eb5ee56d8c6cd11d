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

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sqlx::{Postgres, Row, Transaction};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::context::{MIN_IDLE, Processing, wait_for_work};
use super::document::storable_json;
use super::payloads::{PayloadError, StoredPayload, event_span};
use crate::config::{EndpointConfig, ProjectionDocument};
pub use crate::ingest::Claim;
use crate::ingest::redact_db;
use crate::support::columns::column;
use crate::support::failpoint;
use crate::support::traces::{KeyValue, SpanKind, TraceSpan};

impl Claim {
    /// The projection row this event moves, when it names an object and a version.
    fn object(&self) -> Option<ObjectKey<'_>> {
        Some((
            self.provider.as_str(),
            self.endpoint_id.as_str(),
            self.object_id.as_deref()?,
        ))
        .filter(|_| self.version_kind.is_some() && self.version.is_some())
    }

    /// Where this event sits in its object's order: version, then event id.
    fn position(&self) -> Position<'_> {
        Position {
            created_at: self.version_kind.as_deref() == Some("created_at"),
            version: self.version.unwrap_or(i64::MIN),
            event_id: &self.event_id,
        }
    }
}

/// (provider, endpoint id, object id): the key of `object_state`.
type ObjectKey<'a> = (&'a str, &'a str, &'a str);

/// An object version: what the projection holds or what an event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position<'a> {
    created_at: bool,
    version: i64,
    event_id: &'a str,
}

impl Position<'_> {
    /// Whether an event at `self` moves a projection at `held`: `sequence` versions compare
    /// as numbers (equal is stale); `created_at` versions compare as (created, event id), so
    /// two events created in the same second still have one order (event ids in byte order).
    fn supersedes(&self, held: &Position<'_>) -> bool {
        self.version > held.version
            || (self.created_at && self.version == held.version && self.event_id > held.event_id)
    }
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

/// A delivery: (sink, target, max attempts).
type Target<'a> = (&'a str, &'a str, u32);

/// What a batch writes for one event.
struct Planned<'a> {
    claim: &'a Claim,
    outcome: Effect,
    /// Applied now (writes the marker), rather than a requeue of an applied event.
    fresh: bool,
    targets: Vec<Target<'a>>,
}

/// A projection row a batch moves, to the version of `claim`.
struct Moved<'a> {
    claim: &'a Claim,
    /// The row existed (and is locked); otherwise it is inserted.
    existing: bool,
    /// The event's bytes as they came, when `jsonb` can hold them and the endpoint keeps
    /// documents (`projection_document = "event"`).
    state: Option<&'a str>,
}

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
        let claims = self.leased_or_claimed().await?;
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
                self.release(rest.collect()).await;
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
            self.release(handoff.close()).await;
        }
        Ok(())
    }

    fn endpoint(&self, id: &str) -> Option<&EndpointConfig> {
        self.processing.config.endpoints.iter().find(|e| e.id == id)
    }

    /// What ingest leased to this host's workers at acceptance, else a claim from the
    /// database; in version order either way.
    async fn leased_or_claimed(&self) -> anyhow::Result<Vec<Claim>> {
        let p = &self.processing;
        let full = p.config.worker.batch_size as usize;
        let mut claims = match p.handoff.as_deref().map(|h| h.take(full)) {
            Some(leased) if !leased.is_empty() => leased,
            _ => {
                let claimed = self.claim().await?;
                if claimed.len() < full
                    && let Some(handoff) = &p.handoff
                {
                    handoff.caught_up();
                }
                claimed
            }
        };
        // UPDATE ... RETURNING has no order, nor has acceptance's key order: decide in version
        // order, so a batch holding several versions of one object applies them oldest first.
        claims.sort_by(|a, b| {
            (a.object(), a.version, &a.event_id).cmp(&(b.object(), b.version, &b.event_id))
        });
        Ok(claims)
    }

    async fn claim(&self) -> anyhow::Result<Vec<Claim>> {
        let w = &self.processing.config.worker;
        // The due ids are gathered into an array that the update probes by primary key.
        // Joined as a subquery instead, the generic plan (Wharf's connections use only those)
        // guesses a tenth of the table for `LIMIT $1` and hash-joins the due rows to a scan
        // of the whole partition: once the inbox is analyzed, every claim read every row of
        // the day (18 ms a claim at 20,000 rows, growing all day).
        let rows = sqlx::query(
            "UPDATE webhook_inbox AS i
             SET status = 'PROCESSING', attempt_count = i.attempt_count + 1,
                 claim_id = gen_random_uuid(),
                 lease_until = now() + make_interval(secs => $2),
                 next_attempt_at = now() + make_interval(secs => $2)
             WHERE i.inbox_id = ANY (ARRAY(
                 SELECT inbox_id FROM webhook_inbox
                 WHERE status IN ('PENDING', 'PROCESSING') AND next_attempt_at <= now()
                 ORDER BY next_attempt_at
                 LIMIT $1
                 FOR UPDATE SKIP LOCKED))
             RETURNING i.inbox_id, i.provider, i.endpoint_id, i.provider_event_id, i.event_type,
                       i.object_id, i.object_version_kind, i.object_version, i.raw_payload_ref,
                       i.attempt_count, i.claim_id, i.payload_start, i.payload_end,
                       i.trace_context",
        )
        .bind(i64::from(w.batch_size))
        .bind(w.lease_secs as f64)
        .fetch_all(&self.processing.pool)
        .await?;
        let claimed_at = SystemTime::now();
        let claims: Vec<Claim> = rows
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
                // Both or neither (a CHECK on the table).
                payload_span: r.get::<Option<i64>, _>(11).zip(r.get::<Option<i64>, _>(12)),
                attempt: r.get(9),
                claim_id: r.get(10),
                trace_context: r.get(13),
                claimed_at,
                // Retention or a purge may have taken it since: read it to know.
                payload_committed: false,
            })
            .collect();
        Ok(claims)
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
        // Read before the transaction, so no lock is held while the bodies come in. Whole
        // bodies, each once however many of the batch's events it holds; each event then
        // takes its own span of it (`event_payload`). Only the bodies a projection keeps, or
        // that may be gone: an event leased at acceptance needs no read to know its payload
        // is there (with `projection_document = "none"`, most events are not read at all).
        let needs_body = |c: &Claim| !c.payload_committed || keeps_document(p, c);
        let refs: Vec<Uuid> = claims
            .iter()
            .filter(|c| needs_body(c))
            .map(|c| c.payload_ref)
            .collect();
        let bodies = read_payloads(p, &refs).await?;

        let mut tx = p.pool.begin().await?;
        let held = lock_claimed(&mut tx, claims).await?;
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
                Some(None) => match event_payload(claim, &bodies) {
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
            .filter_map(|&(i, _)| claims[i].object())
            .collect();
        objects.dedup();
        let stored = lock_objects(&mut tx, &objects).await?;

        // Decide each event's outcome in version order (claims are sorted), as if applied one
        // by one; each object's row ends at the last event that moved it.
        let mut outcomes = Vec::with_capacity(live.len());
        let mut newest: HashMap<ObjectKey<'_>, (Position<'_>, usize)> = HashMap::new();
        let mut moved: Vec<ObjectKey<'_>> = Vec::new();
        for &(i, done) in &live {
            let claim = &claims[i];
            let outcome = match (done, claim.object()) {
                (Some(done), _) => done,
                (None, None) if claim.object_id.is_none() => Effect::NoObject,
                (None, None) => Effect::Unversioned,
                (None, Some(key)) => {
                    let held = newest
                        .get(&key)
                        .map(|(position, _)| *position)
                        .or_else(|| stored.get(&key).map(Stored::position));
                    let position = claim.position();
                    if held.is_none_or(|held| position.supersedes(&held)) {
                        if newest.insert(key, (position, i)).is_none() {
                            moved.push(key);
                        }
                        Effect::Applied
                    } else {
                        Effect::Stale
                    }
                }
            };
            outcomes.push(outcome);
        }
        let projection: Vec<Moved<'_>> = moved
            .iter()
            .map(|key| {
                let claim = &claims[newest[key].1];
                Moved {
                    claim,
                    existing: stored.contains_key(key),
                    state: keeps_document(p, claim)
                        .then(|| event_payload(claim, &bodies).ok())
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
                    .map_or_else(Vec::new, |e| delivery_targets(p, e, claim));
                Planned {
                    claim,
                    outcome,
                    fresh: done.is_none(),
                    targets,
                }
            })
            .collect();
        if !events.is_empty() {
            let written = write(&mut tx, &events, &projection).await?;
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

/// Locks the claimed inbox rows (in id order) and returns those still held by these claims,
/// with the outcome recorded by their `processed_events` marker when they were applied
/// already. A worker that took over an expired lease waits here for the previous holder;
/// whichever comes second finds the claim token changed and leaves the row alone. The marker
/// is read in the same statement: a marker for a row this claim still holds was committed
/// before the claim (no one else can write it while the token is ours), so the statement's
/// snapshot sees it.
async fn lock_claimed(
    tx: &mut Transaction<'_, Postgres>,
    claims: &[Claim],
) -> Result<HashMap<Uuid, Option<Effect>>, sqlx::Error> {
    let ids: Vec<Uuid> = claims.iter().map(|c| c.inbox_id).collect();
    let tokens: Vec<Uuid> = claims.iter().map(|c| c.claim_id).collect();
    let rows: Vec<(Uuid, Option<String>)> = sqlx::query_as(
        "SELECT i.inbox_id, pe.outcome
         FROM webhook_inbox i
         JOIN unnest($1::uuid[], $2::uuid[]) AS c(inbox_id, claim_id)
           ON c.inbox_id = i.inbox_id
         LEFT JOIN processed_events pe ON pe.inbox_id = i.inbox_id
         WHERE i.status = 'PROCESSING' AND i.claim_id = c.claim_id
         ORDER BY i.inbox_id
         FOR UPDATE OF i",
    )
    .bind(&ids)
    .bind(&tokens)
    .fetch_all(&mut **tx)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, done)| (id, done.as_deref().map(Effect::parse)))
        .collect())
}

/// A projection row as stored.
struct Stored {
    version_kind: String,
    version: i64,
    event_id: String,
}

impl Stored {
    fn position(&self) -> Position<'_> {
        Position {
            created_at: self.version_kind == "created_at",
            version: self.version,
            event_id: &self.event_id,
        }
    }
}

/// Locks the projection rows of `objects` that exist, in key order, and returns them.
async fn lock_objects<'a>(
    tx: &mut Transaction<'_, Postgres>,
    objects: &[ObjectKey<'a>],
) -> Result<HashMap<ObjectKey<'a>, Stored>, sqlx::Error> {
    if objects.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<(String, String, String, String, i64, String)> = sqlx::query_as(
        "SELECT o.provider, o.endpoint_id, o.object_id, o.version_kind, o.object_version,
                o.event_id
         FROM object_state o
         JOIN unnest($1::text[], $2::text[], $3::text[]) AS k(provider, endpoint_id, object_id)
           ON o.provider = k.provider AND o.endpoint_id = k.endpoint_id
          AND o.object_id = k.object_id
         ORDER BY o.provider, o.endpoint_id, o.object_id
         FOR UPDATE OF o",
    )
    .bind(column(objects, |k| k.0))
    .bind(column(objects, |k| k.1))
    .bind(column(objects, |k| k.2))
    .fetch_all(&mut **tx)
    .await?;
    let index: HashMap<ObjectKey<'a>, usize> =
        objects.iter().enumerate().map(|(i, k)| (*k, i)).collect();
    Ok(rows
        .into_iter()
        .filter_map(
            |(provider, endpoint_id, object_id, version_kind, version, event_id)| {
                let i =
                    *index.get(&(provider.as_str(), endpoint_id.as_str(), object_id.as_str()))?;
                Some((
                    objects[i],
                    Stored {
                        version_kind,
                        version,
                        event_id,
                    },
                ))
            },
        )
        .collect())
}

/// Everything a batch commits, in one statement: the `processed_events` markers of events
/// applied now, their deliveries, `PROCESSED` with each outcome, and each moved object's
/// projection row (updated when it existed and was locked, inserted otherwise). Returns how
/// many projection rows were written: fewer than asked when another worker inserted a new
/// object's row first.
async fn write(
    tx: &mut Transaction<'_, Postgres>,
    events: &[Planned<'_>],
    projection: &[Moved<'_>],
) -> Result<usize, sqlx::Error> {
    let deliveries = || {
        events
            .iter()
            .flat_map(|e| e.targets.iter().map(move |t| (e.claim.inbox_id, t)))
    };
    let written: i64 = sqlx::query_scalar(
        "WITH ev AS (
             SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[],
                                  $6::bool[], $7::int[])
                 AS e(inbox_id, provider, endpoint_id, event_id, outcome, fresh, planned)
         ), marker AS (
             INSERT INTO processed_events (provider, endpoint_id, provider_event_id, inbox_id,
                 outcome)
             SELECT provider, endpoint_id, event_id, inbox_id, outcome FROM ev WHERE fresh
         ), planned AS (
             INSERT INTO deliveries (delivery_id, inbox_id, sink, target, max_attempts)
             SELECT * FROM unnest($8::uuid[], $9::uuid[], $10::text[], $11::text[], $12::int[])
             ON CONFLICT ON CONSTRAINT deliveries_once_per_target DO NOTHING
         ), inbox AS (
             UPDATE webhook_inbox i
             SET status = 'PROCESSED', outcome = ev.outcome, processed_at = now(),
                 lease_until = NULL, claim_id = NULL, next_attempt_at = now(), last_error = NULL,
                 deliveries_planned = ev.planned
             FROM ev WHERE i.inbox_id = ev.inbox_id
         ), w AS (
             SELECT * FROM unnest($13::text[], $14::text[], $15::text[], $16::text[],
                                  $17::bigint[], $18::text[], $19::text[], $20::text[],
                                  $21::uuid[], $22::bool[])
                 AS w(provider, endpoint_id, object_id, version_kind, object_version, event_id,
                      event_type, state, inbox_id, existing)
         ), inserted AS (
             INSERT INTO object_state (provider, endpoint_id, object_id, version_kind,
                 object_version, event_id, event_type, state, inbox_id, updated_at)
             SELECT provider, endpoint_id, object_id, version_kind, object_version, event_id,
                    event_type, state::jsonb, inbox_id, now()
             FROM w WHERE NOT existing
             ORDER BY provider, endpoint_id, object_id
             ON CONFLICT (provider, endpoint_id, object_id) DO NOTHING
             RETURNING 1
         ), updated AS (
             UPDATE object_state o
             SET version_kind = w.version_kind, object_version = w.object_version,
                 event_id = w.event_id, event_type = w.event_type, state = w.state::jsonb,
                 inbox_id = w.inbox_id, updated_at = now()
             FROM w
             WHERE w.existing AND o.provider = w.provider AND o.endpoint_id = w.endpoint_id
               AND o.object_id = w.object_id
             RETURNING 1
         )
         SELECT (SELECT count(*) FROM inserted) + (SELECT count(*) FROM updated)",
    )
    .bind(column(events, |e| e.claim.inbox_id))
    .bind(column(events, |e| e.claim.provider.as_str()))
    .bind(column(events, |e| e.claim.endpoint_id.as_str()))
    .bind(column(events, |e| e.claim.event_id.as_str()))
    .bind(column(events, |e| e.outcome.as_str()))
    .bind(column(events, |e| e.fresh))
    .bind(column(events, |e| e.targets.len() as i32))
    .bind(deliveries().map(|_| Uuid::now_v7()).collect::<Vec<_>>())
    .bind(deliveries().map(|(id, _)| id).collect::<Vec<_>>())
    .bind(deliveries().map(|(_, t)| t.0).collect::<Vec<_>>())
    .bind(deliveries().map(|(_, t)| t.1).collect::<Vec<_>>())
    .bind(deliveries().map(|(_, t)| t.2 as i32).collect::<Vec<_>>())
    .bind(column(projection, |m| m.claim.provider.as_str()))
    .bind(column(projection, |m| m.claim.endpoint_id.as_str()))
    .bind(column(projection, |m| m.claim.object_id.as_deref()))
    .bind(column(projection, |m| m.claim.version_kind.as_deref()))
    .bind(column(projection, |m| m.claim.version))
    .bind(column(projection, |m| m.claim.event_id.as_str()))
    .bind(column(projection, |m| m.claim.event_type.as_str()))
    .bind(column(projection, |m| m.state))
    .bind(column(projection, |m| m.claim.inbox_id))
    .bind(column(projection, |m| m.existing))
    .fetch_one(&mut **tx)
    .await?;
    Ok(written as usize)
}

/// Whether the projection keeps this event's document, so its body is needed.
fn keeps_document(p: &Processing, claim: &Claim) -> bool {
    p.config.projection_document(&claim.endpoint_id) == ProjectionDocument::Event
}

/// The stored payloads under these refs, each opened under its key id; no statement for none.
async fn read_payloads(
    p: &Processing,
    refs: &[Uuid],
) -> Result<HashMap<Uuid, Result<Vec<u8>, PayloadError>>, sqlx::Error> {
    if refs.is_empty() {
        return Ok(HashMap::new());
    }
    let rows = sqlx::query_as::<_, (Uuid, Option<String>, Vec<u8>)>(
        "SELECT payload_ref, key_id, body FROM webhook_payloads WHERE payload_ref = ANY($1)",
    )
    .bind(refs)
    .fetch_all(&p.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(payload_ref, key_id, body)| {
            let stored = StoredPayload {
                payload_ref,
                key_id,
                body,
            };
            (payload_ref, stored.open(&p.payload_keys))
        })
        .collect())
}

/// The event's own bytes: its span of the request's payload, or the whole payload when it has
/// none. Either failure is poison: retrying cannot bring a body back or lengthen it.
fn event_payload<'b>(
    claim: &Claim,
    bodies: &'b HashMap<Uuid, Result<Vec<u8>, PayloadError>>,
) -> Result<&'b [u8], PayloadError> {
    let body = bodies
        .get(&claim.payload_ref)
        .ok_or(PayloadError::Gone)?
        .as_ref()
        .map_err(Clone::clone)?;
    event_span(body, claim.payload_span)
}

/// The (sink, target, max attempts) of every route matching the event; two routes to the
/// same target are one delivery.
fn delivery_targets<'a>(
    p: &'a Processing,
    endpoint: &EndpointConfig,
    claim: &Claim,
) -> Vec<Target<'a>> {
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
