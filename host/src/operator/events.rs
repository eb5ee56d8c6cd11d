//! Operator queries behind `wharf events list|show|replay`. Diagnostics are the redacted
//! `last_error` texts the workers and relays wrote; payloads are shown only when asked.

use base64::Engine as _;
use serde::Serialize;
use sqlx::PgPool;
use sqlx::Row as _;
use time::OffsetDateTime;
use uuid::Uuid;

use super::error::OperatorError;
use super::shared::{MAX_COUNTED, matches_text, one_of, thousands};
use crate::processing::{LINK_COLUMNS, LinkRow, StoredPayload, event_bytes};
use crate::support::sealing::PayloadKeys;

#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub status: Option<String>,
    pub endpoint: Option<String>,
    pub limit: i64,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Summary {
    pub inbox_id: Uuid,
    pub status: String,
    pub endpoint_id: String,
    pub event_type: String,
    pub provider_event_id: String,
    pub attempt_count: i32,
    #[serde(with = "time::serde::rfc3339")]
    pub received_at: OffsetDateTime,
    pub last_error: Option<String>,
}

pub const STATUSES: [&str; 4] = ["PENDING", "PROCESSING", "PROCESSED", "FAILED"];

impl Filter {
    /// The filter with its status in the stored case, or what is wrong with it. The limit is
    /// the caller's to bound.
    pub fn checked(mut self) -> Result<Self, OperatorError> {
        if let Some(status) = &self.status {
            self.status = Some(one_of("status", status, &STATUSES)?);
        }
        Ok(self)
    }
}

/// The newest events a filter matches, and how many it matched in all.
#[derive(Debug)]
pub struct Page {
    pub events: Vec<Summary>,
    pub total: i64,
}

impl Page {
    /// What a list cut short by its `limit` leaves out, said once (`None` when it shows
    /// everything); `limit_name` is how the caller spells the limit (`--limit`, `limit`).
    pub fn remainder_note(&self, limit_name: &str, limit: i64) -> Option<String> {
        (self.total > self.events.len() as i64).then(|| {
            format!(
                "showing the newest {} of {} matching ({limit_name} {limit})",
                thousands(self.events.len() as i64),
                matches_text(self.total)
            )
        })
    }
}

/// Newest first, at most the filter's limit, and how many matched in all (no silent cap).
pub async fn list(pool: &PgPool, filter: &Filter) -> Result<Page, OperatorError> {
    let events = select(pool, filter, "DESC").await?;
    let total = count(pool, filter).await?;
    Ok(Page { events, total })
}

/// How many events a filter matches, up to `MAX_COUNTED + 1` (a list says when its limit left
/// some out).
async fn count(pool: &PgPool, filter: &Filter) -> Result<i64, OperatorError> {
    Ok(sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT 1 FROM webhook_inbox
         WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR endpoint_id = $2)
         LIMIT $3) matching",
    )
    .bind(&filter.status)
    .bind(&filter.endpoint)
    .bind(MAX_COUNTED + 1)
    .fetch_one(pool)
    .await?)
}

/// The events a filter selects, in `order` of reception (`ASC` or `DESC`, a constant).
async fn select(
    pool: &PgPool,
    filter: &Filter,
    order: &str,
) -> Result<Vec<Summary>, OperatorError> {
    let sql = format!(
        "SELECT inbox_id, status, endpoint_id, event_type, provider_event_id, attempt_count,
                received_at, last_error
         FROM webhook_inbox
         WHERE ($1::text IS NULL OR status = $1) AND ($2::text IS NULL OR endpoint_id = $2)
         ORDER BY received_at {order}
         LIMIT $3"
    );
    Ok(sqlx::query_as(&sql)
        .bind(&filter.status)
        .bind(&filter.endpoint)
        .bind(filter.limit)
        .fetch_all(pool)
        .await?)
}

/// Everything known about one event, as JSON; the payload only when given the keys that open
/// it (`payload_keys`).
pub async fn show(
    pool: &PgPool,
    inbox_id: Uuid,
    payload_keys: Option<&PayloadKeys>,
) -> Result<Option<serde_json::Value>, OperatorError> {
    let event: Option<serde_json::Value> = sqlx::query_scalar(
        "SELECT to_jsonb(e) FROM (
             SELECT inbox_id, provider, endpoint_id, provider_event_id, event_type, object_id,
                    object_version_kind, object_version, provider_created_at, received_at,
                    encode(payload_hash, 'hex') AS payload_sha256, payload_start, payload_end,
                    matched_secret_version,
                    status, outcome, attempt_count, next_attempt_at, lease_until, processed_at,
                    last_error
             FROM webhook_inbox WHERE inbox_id = $1) e",
    )
    .bind(inbox_id)
    .fetch_optional(pool)
    .await?;
    let Some(mut event) = event else {
        return Ok(None);
    };
    let deliveries: serde_json::Value = sqlx::query_scalar(
        "SELECT coalesce(jsonb_agg(to_jsonb(d) ORDER BY d.created_at), '[]'::jsonb) FROM (
             SELECT delivery_id, sink, target, status, attempt_count, max_attempts,
                    next_attempt_at, last_error, created_at, sent_at
             FROM deliveries WHERE inbox_id = $1) d",
    )
    .bind(inbox_id)
    .fetch_one(pool)
    .await?;
    event["deliveries"] = deliveries;
    let processed: Option<serde_json::Value> = sqlx::query_scalar(
        "SELECT to_jsonb(p) FROM (SELECT outcome, processed_at FROM processed_events
                                 WHERE inbox_id = $1) p",
    )
    .bind(inbox_id)
    .fetch_optional(pool)
    .await?;
    event["processed_marker"] = processed.unwrap_or(serde_json::Value::Null);
    if let Some(keys) = payload_keys {
        // The event's own span of a batch's body (as processing and deliveries see it), or
        // the whole body, once the event's link to it checks; none when the body is gone.
        let row = sqlx::query(&format!(
            "SELECT p.payload_ref, p.key_id, p.body, {LINK_COLUMNS}
                 FROM webhook_payloads p JOIN webhook_inbox i
                 ON i.raw_payload_ref = p.payload_ref WHERE i.inbox_id = $1"
        ))
        .bind(inbox_id)
        .fetch_optional(pool)
        .await?;
        event["payload"] = match row {
            None => serde_json::Value::Null,
            Some(row) => {
                let stored = StoredPayload {
                    payload_ref: row.try_get(0)?,
                    key_id: row.try_get(1)?,
                    body: row.try_get(2)?,
                };
                match event_bytes(keys, &LinkRow::read(&row, 3)?, Some(&stored)) {
                    Err(e) => serde_json::json!({ "error": e.to_string() }),
                    Ok(bytes) => match String::from_utf8(bytes) {
                        Ok(text) => serde_json::json!({ "utf8": text }),
                        Err(e) => serde_json::json!({
                            "base64": base64::engine::general_purpose::STANDARD
                                .encode(e.as_bytes())
                        }),
                    },
                }
            }
        };
    }
    Ok(Some(event))
}

/// What a replay changed.
#[derive(Debug, Default, Serialize, PartialEq, Eq)]
pub struct Replayed {
    pub events: u64,
    pub deliveries: u64,
}

/// Requeues events for processing with fresh attempts, and their `FAILED` deliveries (all
/// of their deliveries with `resend`). An event already applied is not applied again: the
/// worker finds its `processed_events` marker and only re-plans deliveries. Events being
/// processed right now are left alone. Attempt counts restart at zero, but claims are never
/// reused: a worker or relay still holding a claim from before the replay changes nothing.
pub async fn replay(pool: &PgPool, ids: &[Uuid], resend: bool) -> Result<Replayed, OperatorError> {
    replay_or_count(pool, ids, resend, false).await
}

/// [`replay`], or with `dry_run` the same statements rolled back: the counts are what a
/// replay would change now, and nothing changes.
pub async fn replay_or_count(
    pool: &PgPool,
    ids: &[Uuid],
    resend: bool,
    dry_run: bool,
) -> Result<Replayed, OperatorError> {
    let mut tx = pool.begin().await?;
    let events = sqlx::query(
        "UPDATE webhook_inbox
         SET status = 'PENDING', attempt_count = 0, next_attempt_at = now(), lease_until = NULL,
             claim_id = NULL, last_error = NULL
         WHERE inbox_id = ANY($1) AND status <> 'PROCESSING'",
    )
    .bind(ids)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    let deliveries = sqlx::query(
        "UPDATE deliveries
         SET status = 'PENDING', attempt_count = 0, next_attempt_at = now(), sent_at = NULL,
             claim_id = NULL
         WHERE inbox_id = ANY($1) AND (status = 'FAILED' OR ($2 AND status = 'SENT'))",
    )
    .bind(ids)
    .bind(resend)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    if dry_run {
        tx.rollback().await?;
    } else {
        tx.commit().await?;
    }
    Ok(Replayed { events, deliveries })
}

/// What a replay names: the ids given and those a filter selects (oldest first, at most its
/// limit), each once, and how many the filter matched in all (0 without one).
#[derive(Debug, Default)]
pub struct Selection {
    pub ids: Vec<Uuid>,
    pub matched: i64,
}

pub async fn selection(
    pool: &PgPool,
    mut ids: Vec<Uuid>,
    filter: Option<&Filter>,
) -> Result<Selection, OperatorError> {
    let mut matched = 0;
    if let Some(filter) = filter {
        let selected = select(pool, filter, "ASC").await?;
        ids.extend(selected.into_iter().map(|e| e.inbox_id));
        matched = count(pool, filter).await?;
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(Selection { ids, matched })
}
