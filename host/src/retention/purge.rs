//! `wharf events purge --before`: deletes events received before a moment (optionally of one
//! endpoint) with their processing markers, outbox notices, deliveries and raw payloads, in
//! bounded batches, each its own transaction, so it can run beside serving and be resumed.
//! Events with work left (pending or processing, or with a pending delivery) are skipped
//! unless asked: deleting them drops what was acknowledged and not yet delivered.
//! The projection (`object_state`, each object's latest document) is not an event's and is
//! left alone.

use serde::Serialize;
use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::support::ids;

/// What to purge.
#[derive(Debug, Clone)]
pub struct Purge {
    pub before: OffsetDateTime,
    pub endpoint: Option<String>,
    /// Also events with work left.
    pub include_unfinished: bool,
    /// Count, delete nothing.
    pub dry_run: bool,
    /// Events per transaction.
    pub batch: i64,
}

/// What a purge deleted (or, dry, would delete).
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub struct Purged {
    pub dry_run: bool,
    pub events: u64,
    pub payloads: u64,
    pub deliveries: u64,
    /// Events matched but skipped: work left (without `--include-unfinished`).
    pub skipped_unfinished: u64,
}

/// A copy of the request's payload and its events share the request's received time to the
/// millisecond; rows from before that (migration `…_time_partitions.sql`) were up to a commit
/// timeout apart. Siblings of a payload are looked for in this span after its id's time.
const SIBLINGS_WITHIN: time::Duration = time::Duration::seconds(2);

pub async fn purge(
    pool: &PgPool,
    what: &Purge,
    mut progress: impl FnMut(&Purged),
) -> anyhow::Result<Purged> {
    let mut done = Purged {
        dry_run: what.dry_run,
        ..Purged::default()
    };
    let before = ids::floor_at(what.before);
    let mut after = Uuid::nil();
    loop {
        let mut tx = pool.begin().await?;
        // Keyset order on the partition key: each batch reads only its own days.
        let rows: Vec<(Uuid, Uuid, bool)> = sqlx::query_as(
            "SELECT i.inbox_id, i.raw_payload_ref,
                    i.status IN ('PENDING', 'PROCESSING') OR EXISTS (
                        SELECT 1 FROM deliveries d
                        WHERE d.inbox_id = i.inbox_id AND d.status = 'PENDING')
             FROM webhook_inbox i
             WHERE i.inbox_id > $1 AND i.inbox_id < $2
               AND ($3::text IS NULL OR i.endpoint_id = $3)
             ORDER BY i.inbox_id
             LIMIT $4
             FOR UPDATE OF i",
        )
        .bind(after)
        .bind(before)
        .bind(what.endpoint.as_deref())
        .bind(what.batch)
        .fetch_all(&mut *tx)
        .await?;
        let Some(last) = rows.last() else {
            break;
        };
        after = last.0;
        let (unfinished, victims): (Vec<_>, Vec<_>) = rows
            .into_iter()
            .partition(|(_, _, busy)| *busy && !what.include_unfinished);
        done.skipped_unfinished += unfinished.len() as u64;
        let events: Vec<Uuid> = victims.iter().map(|v| v.0).collect();
        let mut payloads: Vec<Uuid> = victims.iter().map(|v| v.1).collect();
        payloads.sort_unstable();
        payloads.dedup();
        let spans: Vec<(Uuid, Uuid)> = payloads
            .iter()
            .map(|p| {
                let at = ids::time_of(*p).unwrap_or(OffsetDateTime::UNIX_EPOCH);
                (ids::floor_at(at), ids::floor_at(at + SIBLINGS_WITHIN))
            })
            .collect();
        let (lo, hi) = (
            events
                .first()
                .map(|id| floor_before(*id))
                .unwrap_or_default(),
            events.last().map(|id| floor_after(*id)).unwrap_or_default(),
        );
        let deleted: (i64, i64, i64) = sqlx::query_as(
            "WITH deliveries_gone AS (
                 DELETE FROM deliveries WHERE inbox_id = ANY($1) AND NOT $6 RETURNING 1
             ), markers_gone AS (
                 DELETE FROM processed_events WHERE inbox_id = ANY($1) AND NOT $6
             ), notices_gone AS (
                 -- A notice is made with its event, so its id's time is the event's.
                 DELETE FROM webhook_outbox
                 WHERE outbox_id >= $4 AND outbox_id < $5 AND inbox_id = ANY($1) AND NOT $6
             ), events_gone AS (
                 DELETE FROM webhook_inbox WHERE inbox_id = ANY($1) AND NOT $6 RETURNING 1
             ), orphans AS (
                 -- A payload goes when every event it backs goes (a batch's events share it).
                 SELECT p.payload_ref FROM unnest($2::uuid[], $3::uuid[], $7::uuid[])
                     AS p(payload_ref, lo, hi)
                 WHERE NOT EXISTS (
                     SELECT 1 FROM webhook_inbox w
                     WHERE w.inbox_id >= p.lo AND w.inbox_id < p.hi
                       AND w.raw_payload_ref = p.payload_ref AND NOT (w.inbox_id = ANY($1)))
             ), payloads_gone AS (
                 DELETE FROM webhook_payloads
                 WHERE payload_ref IN (SELECT payload_ref FROM orphans) AND NOT $6
             )
             SELECT (SELECT count(*) FROM webhook_inbox WHERE inbox_id = ANY($1)),
                    (SELECT count(*) FROM orphans),
                    (SELECT count(*) FROM deliveries WHERE inbox_id = ANY($1))",
        )
        .bind(&events)
        .bind(&payloads)
        .bind(spans.iter().map(|s| s.0).collect::<Vec<_>>())
        .bind(lo)
        .bind(hi)
        .bind(what.dry_run)
        .bind(spans.iter().map(|s| s.1).collect::<Vec<_>>())
        .fetch_one(&mut *tx)
        .await?;
        // The counts are read from the statement's snapshot, before its own deletes.
        done.events += deleted.0 as u64;
        done.payloads += deleted.1 as u64;
        done.deliveries += deleted.2 as u64;
        tx.commit().await?;
        progress(&done);
    }
    Ok(done)
}

/// The floor of the second before `id`'s time (notices were made within it).
fn floor_before(id: Uuid) -> Uuid {
    let at = ids::time_of(id).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    ids::floor_at(at - SIBLINGS_WITHIN)
}

/// The floor of the second after `id`'s time.
fn floor_after(id: Uuid) -> Uuid {
    let at = ids::time_of(id).unwrap_or(OffsetDateTime::UNIX_EPOCH);
    ids::floor_at(at + SIBLINGS_WITHIN)
}
