//! Operator queries behind `wharf deliveries list|show|replay` and the admin API's
//! `/admin/deliveries`. Lists are pages in `(created_at, delivery_id)` order, oldest first,
//! continued with `after` (keyset pagination), and always say how many matched: a page never
//! hides that there is more. Diagnostics are the redacted `last_error` texts the relays wrote.
//!
//! A replay requeues deliveries as the relays left them to be retried: `PENDING`, fresh
//! attempts, due now, no claim. The relay sends the stored event again with the same
//! `Idempotency-Key` (the inbox id), so a receiver that already has it can tell.

use serde::{Deserialize, Serialize};
use sqlx::{PgPool, Postgres, QueryBuilder};
use time::OffsetDateTime;
use uuid::Uuid;

use super::error::OperatorError;
use super::shared::{MAX_COUNTED, check_limit, check_range, matches_text, one_of, thousands};

pub const STATUSES: [&str; 3] = ["PENDING", "SENT", "FAILED"];
pub const SINKS: [&str; 2] = ["http", "nats"];

/// Which deliveries: every field set must hold. `since` is inclusive, `until` exclusive,
/// both on `created_at` (when the delivery was planned).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    pub status: Option<String>,
    pub target: Option<String>,
    pub sink: Option<String>,
    /// The endpoint the event arrived on (the inbox row's `endpoint_id`).
    pub endpoint: Option<String>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub since: Option<OffsetDateTime>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub until: Option<OffsetDateTime>,
}

impl Filter {
    /// The filter with its status and sink in their stored case, or what is wrong with it.
    pub fn checked(mut self) -> Result<Self, OperatorError> {
        if let Some(status) = &self.status {
            self.status = Some(one_of("status", status, &STATUSES)?);
        }
        if let Some(sink) = &self.sink {
            self.sink = Some(one_of("sink", sink, &SINKS)?);
        }
        check_range(self.since, self.until)?;
        Ok(self)
    }

    /// True when nothing is filtered (a replay must name ids or filter something).
    pub fn is_empty(&self) -> bool {
        self.status.is_none()
            && self.target.is_none()
            && self.sink.is_none()
            && self.endpoint.is_none()
            && self.since.is_none()
            && self.until.is_none()
    }

    /// ` WHERE ...` over `deliveries d JOIN webhook_inbox i`, with only the conditions set
    /// (so each query is planned for what it filters), past the cursor `after`.
    fn push_where(&self, q: &mut QueryBuilder<'_, Postgres>, after: Option<Uuid>) {
        q.push(" WHERE true");
        if let Some(status) = &self.status {
            q.push(" AND d.status = ").push_bind(status.clone());
        }
        if let Some(target) = &self.target {
            q.push(" AND d.target = ").push_bind(target.clone());
        }
        if let Some(sink) = &self.sink {
            q.push(" AND d.sink = ").push_bind(sink.clone());
        }
        if let Some(endpoint) = &self.endpoint {
            q.push(" AND i.endpoint_id = ").push_bind(endpoint.clone());
        }
        if let Some(since) = self.since {
            q.push(" AND d.created_at >= ").push_bind(since);
        }
        if let Some(until) = self.until {
            q.push(" AND d.created_at < ").push_bind(until);
        }
        if let Some(after) = after {
            q.push(
                " AND (d.created_at, d.delivery_id) > \
                 (SELECT created_at, delivery_id FROM deliveries WHERE delivery_id = ",
            )
            .push_bind(after)
            .push(")");
        }
    }
}

/// One delivery as lists show it.
#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]
pub struct Summary {
    pub delivery_id: Uuid,
    pub inbox_id: Uuid,
    pub endpoint_id: String,
    pub sink: String,
    pub target: String,
    pub status: String,
    pub attempt_count: i32,
    pub max_attempts: i32,
    pub last_error: Option<String>,
    /// The HTTP status the last attempt answered, when it got one.
    #[serde(default)]
    pub last_status_code: Option<i16>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339::option")]
    pub sent_at: Option<OffsetDateTime>,
}

const SUMMARY_COLUMNS: &str = "SELECT d.delivery_id, d.inbox_id, i.endpoint_id, d.sink, d.target, \
     d.status, d.attempt_count, d.max_attempts, d.last_error, d.last_status_code, d.created_at, \
     d.sent_at \
     FROM deliveries d JOIN webhook_inbox i ON i.inbox_id = d.inbox_id";

/// One page of a list, and how much it leaves out.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Page {
    pub deliveries: Vec<Summary>,
    /// Every delivery the filter matches past the cursor (this page included), counted up to
    /// `MAX_COUNTED + 1`.
    pub total: i64,
    pub limit: i64,
    /// The cursor of the next page (`after`), when there is one.
    pub next_after: Option<Uuid>,
}

impl Page {
    /// What the page leaves out, said once (`None` when it shows everything).
    pub fn remainder_note(&self) -> Option<String> {
        let next = self.next_after?;
        Some(format!(
            "showing {} of {} matching (--limit {}); next page: --after {next}",
            thousands(self.deliveries.len() as i64),
            matches_text(self.total),
            self.limit
        ))
    }
}

/// Up to `limit` deliveries the filter matches after `after`, oldest first, and how many
/// matched in all.
pub async fn list(
    pool: &PgPool,
    filter: &Filter,
    after: Option<Uuid>,
    limit: i64,
) -> Result<Page, OperatorError> {
    check_limit(limit)?;
    if let Some(after) = after {
        let known: bool =
            sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM deliveries WHERE delivery_id = $1)")
                .bind(after)
                .fetch_one(pool)
                .await?;
        if !known {
            return Err(OperatorError::UnknownCursor(after));
        }
    }
    let mut q = QueryBuilder::new(SUMMARY_COLUMNS);
    filter.push_where(&mut q, after);
    q.push(" ORDER BY d.created_at, d.delivery_id LIMIT ")
        .push_bind(limit);
    let deliveries: Vec<Summary> = q.build_query_as().fetch_all(pool).await?;
    let total = count(pool, filter, after).await?;
    let next_after = (total > deliveries.len() as i64)
        .then(|| deliveries.last().map(|d| d.delivery_id))
        .flatten();
    Ok(Page {
        deliveries,
        total,
        limit,
        next_after,
    })
}

/// How many deliveries `filter` matches after `after`, up to `MAX_COUNTED + 1`.
async fn count<'c>(
    db: impl sqlx::PgExecutor<'c>,
    filter: &Filter,
    after: Option<Uuid>,
) -> Result<i64, OperatorError> {
    // The event's row only when its endpoint is filtered: a join per counted row is what a
    // count of a large table cannot afford.
    let mut q = QueryBuilder::new(if filter.endpoint.is_some() {
        "SELECT count(*) FROM (SELECT 1 FROM deliveries d \
         JOIN webhook_inbox i ON i.inbox_id = d.inbox_id"
    } else {
        "SELECT count(*) FROM (SELECT 1 FROM deliveries d"
    });
    filter.push_where(&mut q, after);
    q.push(" LIMIT ")
        .push_bind(MAX_COUNTED + 1)
        .push(") matching");
    Ok(q.build_query_scalar().fetch_one(db).await?)
}

/// One delivery in full, with a summary of its event (never the payload) and the attempts
/// that did not succeed (oldest first), as JSON.
pub async fn show(
    pool: &PgPool,
    delivery_id: Uuid,
) -> Result<Option<serde_json::Value>, OperatorError> {
    Ok(sqlx::query_scalar(
        "SELECT to_jsonb(d) || jsonb_build_object('event', to_jsonb(e), 'failed_attempts',
                    coalesce(a.attempts, '[]'::jsonb)) FROM
             (SELECT delivery_id, inbox_id, sink, target, status, attempt_count, max_attempts,
                     next_attempt_at, claim_id IS NOT NULL AS claimed, last_error,
                     last_status_code, created_at, sent_at
              FROM deliveries WHERE delivery_id = $1) d
         JOIN LATERAL
             (SELECT inbox_id, provider, endpoint_id, provider_event_id, event_type, object_id,
                     received_at, status, outcome, processed_at
              FROM webhook_inbox WHERE inbox_id = d.inbox_id) e ON true
         LEFT JOIN LATERAL
             (SELECT jsonb_agg(jsonb_build_object('attempt', attempt, 'at', at,
                         'outcome', outcome, 'status_code', status_code,
                         'diagnostic', diagnostic) ORDER BY at) AS attempts
              FROM delivery_attempts
              WHERE inbox_id = d.inbox_id AND delivery_id = d.delivery_id) a ON true",
    )
    .bind(delivery_id)
    .fetch_optional(pool)
    .await?)
}

/// What to replay: the ids named, and the deliveries a filter selects (oldest first, at most
/// `limit` of them). `resend` also takes `SENT` ones; `dry_run` changes nothing.
#[derive(Debug, Clone)]
pub struct ReplayRequest {
    pub ids: Vec<Uuid>,
    pub filter: Filter,
    pub limit: i64,
    pub resend: bool,
    pub dry_run: bool,
}

/// What a replay did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Replayed {
    pub dry_run: bool,
    /// Deliveries the filter matched in all (0 without a filter).
    pub matched: i64,
    /// Ids named plus those the filter selected (at most `limit` of the matches).
    pub selected: usize,
    /// Requeued (or, in a dry run, that would be), with their status before.
    pub requeued: Vec<Summary>,
    /// `SENT`, left alone without `resend`.
    pub skipped_sent: Vec<Uuid>,
    /// Being sent right now (a relay holds its claim): left alone, it finishes on its own.
    pub skipped_in_flight: Vec<Uuid>,
    /// Ids named that are no delivery.
    pub not_found: Vec<Uuid>,
}

impl Replayed {
    /// One line for an operator: counts, and what was left out.
    pub fn summary(&self, limit: i64) -> String {
        let verb = if self.dry_run {
            "dry run: would requeue"
        } else {
            "requeued"
        };
        let mut line = format!(
            "{verb} {} of {} selected",
            self.requeued.len(),
            self.selected
        );
        if self.matched > self.selected as i64 {
            line.push_str(&format!(
                " ({} matched the filter; --limit {limit} took the oldest; run again for the rest)",
                matches_text(self.matched)
            ));
        }
        for (n, why) in [
            (
                self.skipped_sent.len(),
                "already SENT (--resend to send again)",
            ),
            (self.skipped_in_flight.len(), "being sent now"),
            (self.not_found.len(), "not found"),
        ] {
            if n > 0 {
                line.push_str(&format!("; {n} {why}"));
            }
        }
        if self.dry_run {
            line.push_str("; nothing changed");
        }
        line
    }
}

/// Requeues the deliveries a request selects, in one transaction: `FAILED` ones, `PENDING`
/// ones waiting for a retry (due now, attempts afresh), and `SENT` ones with `resend`. One a
/// relay is sending right now keeps its claim. The relays send them again with the same
/// `Idempotency-Key`.
pub async fn replay(pool: &PgPool, request: &ReplayRequest) -> Result<Replayed, OperatorError> {
    check_limit(request.limit)?;
    let filtered = !request.filter.is_empty();
    if request.ids.is_empty() && !filtered {
        return Err(OperatorError::NothingSelected);
    }
    let mut tx = pool.begin().await?;
    let mut ids = request.ids.clone();
    let mut matched = 0;
    if filtered {
        let mut q = QueryBuilder::new(
            "SELECT d.delivery_id FROM deliveries d JOIN webhook_inbox i ON i.inbox_id = d.inbox_id",
        );
        request.filter.push_where(&mut q, None);
        q.push(" ORDER BY d.created_at, d.delivery_id LIMIT ")
            .push_bind(request.limit);
        ids.extend(q.build_query_scalar::<Uuid>().fetch_all(&mut *tx).await?);
        matched = count(&mut *tx, &request.filter, None).await?;
    }
    ids.sort_unstable();
    ids.dedup();
    // Locked in id order, so two replays (or a relay's mark) cannot change them under us; a
    // dry run changes nothing, so it holds no locks for the relays to wait on.
    let mut q = QueryBuilder::new(SUMMARY_COLUMNS);
    q.push(" WHERE d.delivery_id = ANY(")
        .push_bind(ids.clone())
        .push(") ORDER BY d.delivery_id");
    if !request.dry_run {
        q.push(" FOR UPDATE OF d");
    }
    let rows: Vec<Summary> = q.build_query_as().fetch_all(&mut *tx).await?;
    let in_flight: Vec<Uuid> = sqlx::query_scalar(
        "SELECT delivery_id FROM deliveries WHERE delivery_id = ANY($1) AND status = 'PENDING'
           AND claim_id IS NOT NULL AND next_attempt_at > now()",
    )
    .bind(&ids)
    .fetch_all(&mut *tx)
    .await?;
    let mut report = Replayed {
        dry_run: request.dry_run,
        matched,
        selected: ids.len(),
        ..Replayed::default()
    };
    let found: std::collections::HashSet<Uuid> = rows.iter().map(|r| r.delivery_id).collect();
    report.not_found = ids
        .iter()
        .filter(|id| !found.contains(id))
        .copied()
        .collect();
    for row in rows {
        if in_flight.contains(&row.delivery_id) {
            report.skipped_in_flight.push(row.delivery_id);
        } else if row.status == "SENT" && !request.resend {
            report.skipped_sent.push(row.delivery_id);
        } else {
            report.requeued.push(row);
        }
    }
    report
        .requeued
        .sort_by_key(|r| (r.created_at, r.delivery_id));
    if !request.dry_run && !report.requeued.is_empty() {
        let requeue: Vec<Uuid> = report.requeued.iter().map(|r| r.delivery_id).collect();
        sqlx::query(
            "UPDATE deliveries
             SET status = 'PENDING', attempt_count = 0, next_attempt_at = now(), claim_id = NULL,
                 sent_at = NULL, last_error = NULL, last_status_code = NULL
             WHERE delivery_id = ANY($1)",
        )
        .bind(&requeue)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_checked_and_normalised() {
        let f = Filter {
            status: Some("failed".into()),
            sink: Some("HTTP".into()),
            ..Filter::default()
        }
        .checked()
        .unwrap();
        assert_eq!(f.status.as_deref(), Some("FAILED"));
        assert_eq!(f.sink.as_deref(), Some("http"));
        assert!(
            Filter {
                status: Some("PROCESSED".into()),
                ..Filter::default()
            }
            .checked()
            .is_err()
        );
        let now = OffsetDateTime::now_utc();
        assert!(
            Filter {
                since: Some(now),
                until: Some(now),
                ..Filter::default()
            }
            .checked()
            .is_err()
        );
        assert!(Filter::default().is_empty());
    }
}
