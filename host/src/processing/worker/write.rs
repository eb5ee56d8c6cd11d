//! The write statement: everything a batch commits, in one statement.

use sqlx::{Postgres, Transaction};
use uuid::Uuid;

use super::decide::{Moved, Planned};
use crate::support::columns::column;

/// Everything a batch commits, in one statement: the `processed_events` markers of events
/// applied now, their deliveries, `PROCESSED` with each outcome, and each moved object's
/// projection row (updated when it existed and was locked, inserted otherwise). Returns how
/// many projection rows were written: fewer than asked when another worker inserted a new
/// object's row first.
pub(super) async fn write(
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
