//! An event named as an operator knows it: by its inbox id, or by the id its provider gave it
//! (`evt_…`), which may name events of several endpoints, or several copies of one accepted
//! further apart than the redelivery window. Found through the logical-event index
//! `(provider, endpoint_id, provider_event_id)` of each day partition, never by a scan.

use serde::Serialize;
use sqlx::PgPool;
use time::OffsetDateTime;
use uuid::Uuid;

use super::error::OperatorError;

/// One event a provider's id names.
#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct Named {
    pub inbox_id: Uuid,
    pub provider: String,
    pub endpoint_id: String,
    #[serde(with = "time::serde::rfc3339")]
    pub received_at: OffsetDateTime,
}

/// The events `id` names (an inbox id, else a provider's event id), of `endpoint` when given;
/// newest first. One is the event; several are for the operator to choose among.
pub async fn named(
    pool: &PgPool,
    id: &str,
    endpoint: Option<&str>,
) -> Result<Vec<Named>, OperatorError> {
    // A provider's id may look like a UUID (GitLab's, Svix's when set by the sender): the
    // inbox id first, then the provider's.
    if let Ok(inbox_id) = Uuid::parse_str(id) {
        let found: Option<Named> = sqlx::query_as(
            "SELECT inbox_id, provider, endpoint_id, received_at FROM webhook_inbox
             WHERE inbox_id = $1 AND ($2::text IS NULL OR endpoint_id = $2)",
        )
        .bind(inbox_id)
        .bind(endpoint)
        .fetch_optional(pool)
        .await?;
        if let Some(found) = found {
            return Ok(vec![found]);
        }
    }
    by_provider_event_id(pool, id, endpoint).await
}

/// The events whose provider's id is `id`. The index leads with (provider, endpoint_id), which
/// an operator does not know: the pairs present are walked one index probe at a time (a loose
/// index scan: as many steps as endpoints ever received, not as rows), then each pair's key is
/// looked up whole.
async fn by_provider_event_id(
    pool: &PgPool,
    id: &str,
    endpoint: Option<&str>,
) -> Result<Vec<Named>, OperatorError> {
    Ok(sqlx::query_as(
        "WITH RECURSIVE pairs(provider, endpoint_id) AS (
             (SELECT provider, endpoint_id FROM webhook_inbox
              ORDER BY provider, endpoint_id LIMIT 1)
             UNION ALL
             SELECT next.provider, next.endpoint_id FROM pairs p CROSS JOIN LATERAL (
                 SELECT provider, endpoint_id FROM webhook_inbox
                 WHERE (provider, endpoint_id) > (p.provider, p.endpoint_id)
                 ORDER BY provider, endpoint_id LIMIT 1) next
         )
         -- LATERAL with OFFSET 0 (which keeps the planner from flattening it into a join):
         -- one probe of the whole key per pair, whatever the planner guesses.
         SELECT i.inbox_id, i.provider, i.endpoint_id, i.received_at
         FROM pairs p CROSS JOIN LATERAL (
             SELECT inbox_id, provider, endpoint_id, received_at FROM webhook_inbox
             WHERE provider = p.provider AND endpoint_id = p.endpoint_id
               AND provider_event_id = $1 OFFSET 0) i
         WHERE $2::text IS NULL OR p.endpoint_id = $2
         ORDER BY i.received_at DESC",
    )
    .bind(id)
    .bind(endpoint)
    .fetch_all(pool)
    .await?)
}
