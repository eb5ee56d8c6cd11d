//! Claiming: what ingest leased to this host at acceptance or a claim from the database, the
//! claimed rows locked inside a batch's transaction, and claims given back on shutdown.

use std::collections::HashMap;
use std::time::SystemTime;

use sqlx::{Postgres, Row, Transaction};
use uuid::Uuid;

use super::decide::{Effect, object};
use crate::ingest::{Claim, redact_db};
use crate::processing::context::Processing;
use crate::support::payload_link::LinkTag;

/// What ingest leased to this host's workers at acceptance, else a claim from the database;
/// in version order either way.
pub(super) async fn leased_or_claimed(p: &Processing) -> anyhow::Result<Vec<Claim>> {
    let full = p.config.worker.batch_size as usize;
    let mut claims = match p.handoff.as_deref().map(|h| h.take(full)) {
        Some(leased) if !leased.is_empty() => leased,
        _ => {
            let claimed = claim(p).await?;
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
        (object(a), a.version, &a.event_id).cmp(&(object(b), b.version, &b.event_id))
    });
    Ok(claims)
}

async fn claim(p: &Processing) -> anyhow::Result<Vec<Claim>> {
    let w = &p.config.worker;
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
                   i.trace_context, i.payload_hash, i.payload_link_key, i.payload_link",
    )
    .bind(i64::from(w.batch_size))
    .bind(w.lease_secs as f64)
    .fetch_all(&p.pool)
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
            payload_hash: r.get(14),
            payload_link: r
                .get::<Option<String>, _>(15)
                .zip(r.get::<Option<Vec<u8>>, _>(16))
                .map(|(key_id, tag)| LinkTag { key_id, tag }),
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

/// Locks the claimed inbox rows (in id order) and returns those still held by these claims,
/// with the outcome recorded by their `processed_events` marker when they were applied
/// already. A worker that took over an expired lease waits here for the previous holder;
/// whichever comes second finds the claim token changed and leaves the row alone. The marker
/// is read in the same statement: a marker for a row this claim still holds was committed
/// before the claim (no one else can write it while the token is ours), so the statement's
/// snapshot sees it.
pub(super) async fn lock_claimed(
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

/// Gives back claims not started (on shutdown): the attempt is not counted, and the claim
/// token is cleared rather than restored, so it can never match a later claim.
pub(super) async fn release(p: &Processing, claims: Vec<Claim>) {
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
    .execute(&p.pool)
    .await;
    if let Err(e) = result {
        // The leases expire instead.
        tracing::warn!(error = %redact_db(&e), released = ids.len(), "releasing claims failed");
    }
}
