//! One event as the console's event page shows it: what was verified, what processing did, and
//! its deliveries; never its payload (shown only on an explicit reveal, through
//! `events::show` with the payload keys, and audited) nor any signature or secret value.
//!
//! The adapter's name is stored with the event (`provider`); its version is not (it is in the
//! request's log line): the page shows the version loaded now beside it.

use serde::Serialize;
use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use super::error::OperatorError;

/// An event's row, less what only the host reads (claims, payload links, trace context).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct EventDetail {
    pub inbox_id: Uuid,
    /// The adapter that verified it (its `name`).
    pub provider: String,
    pub endpoint_id: String,
    pub provider_event_id: String,
    pub event_type: String,
    pub object_id: Option<String>,
    /// `sequence` or `created_at`: how the object's versions compare.
    pub object_version_kind: Option<String>,
    pub object_version: Option<i64>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub provider_created_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339")]
    pub received_at: OffsetDateTime,
    /// The version of the endpoint's secret set whose value (or public key) verified it.
    pub matched_secret_version: String,
    /// SHA-256 of the event's bytes, hex.
    pub payload_sha256: String,
    /// The event's byte range of a batch's body (`None`: the whole body).
    pub payload_start: Option<i64>,
    pub payload_end: Option<i64>,
    /// Whether the body is still stored (payload retention may have deleted it).
    pub payload_stored: bool,
    /// `PENDING`, `PROCESSING`, `PROCESSED` or `FAILED`.
    pub status: String,
    /// What processing concluded: `applied`, `stale`, `unversioned`, `no_object`.
    pub outcome: Option<String>,
    pub attempt_count: i32,
    #[serde(with = "time::serde::rfc3339")]
    pub next_attempt_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub lease_until: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    pub processed_at: Option<OffsetDateTime>,
    /// The redacted diagnostic of the last failed attempt.
    pub last_error: Option<String>,
    /// Deliveries processing planned for it (`None` before processing).
    pub deliveries_planned: Option<i32>,
    #[sqlx(skip)]
    pub processed_marker: Option<ProcessedMarker>,
    #[sqlx(skip)]
    pub deliveries: Vec<DeliveryLine>,
}

/// The `processed_events` row: the event was applied (at most once, whatever ran it again).
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct ProcessedMarker {
    pub outcome: String,
    #[serde(with = "time::serde::rfc3339")]
    pub processed_at: OffsetDateTime,
}

/// One delivery of the event.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct DeliveryLine {
    pub delivery_id: Uuid,
    pub sink: String,
    pub target: String,
    pub status: String,
    pub attempt_count: i32,
    pub max_attempts: i32,
    #[serde(with = "time::serde::rfc3339")]
    pub next_attempt_at: OffsetDateTime,
    pub last_error: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub sent_at: Option<OffsetDateTime>,
}

/// The event `inbox_id` in full (without its payload), `None` when there is none.
pub async fn detail(pool: &PgPool, inbox_id: Uuid) -> Result<Option<EventDetail>, OperatorError> {
    let event: Option<EventDetail> = sqlx::query_as(
        "SELECT i.inbox_id, i.provider, i.endpoint_id, i.provider_event_id, i.event_type,
                i.object_id, i.object_version_kind, i.object_version, i.provider_created_at,
                i.received_at, i.matched_secret_version,
                encode(i.payload_hash, 'hex') AS payload_sha256, i.payload_start, i.payload_end,
                EXISTS (SELECT 1 FROM webhook_payloads p
                        WHERE p.payload_ref = i.raw_payload_ref) AS payload_stored,
                i.status, i.outcome, i.attempt_count, i.next_attempt_at, i.lease_until,
                i.processed_at, i.last_error, i.deliveries_planned
         FROM webhook_inbox i WHERE i.inbox_id = $1",
    )
    .bind(inbox_id)
    .fetch_optional(pool)
    .await?;
    let Some(mut event) = event else {
        return Ok(None);
    };
    event.processed_marker =
        sqlx::query_as("SELECT outcome, processed_at FROM processed_events WHERE inbox_id = $1")
            .bind(inbox_id)
            .fetch_optional(pool)
            .await?;
    event.deliveries = sqlx::query_as(
        "SELECT delivery_id, sink, target, status, attempt_count, max_attempts, next_attempt_at,
                last_error, created_at, sent_at
         FROM deliveries WHERE inbox_id = $1 ORDER BY created_at, delivery_id",
    )
    .bind(inbox_id)
    .fetch_all(pool)
    .await?;
    Ok(Some(event))
}
