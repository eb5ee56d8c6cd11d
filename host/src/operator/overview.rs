//! The console's overview: for the last hour and the last day, per endpoint, what arrived and
//! how it was answered; the processing backlog and FAILED events; each delivery target's
//! pending and failed deliveries; and a series in 5-minute steps over the day for charts.
//!
//! Events received, FAILED events, the backlog and deliveries come from the tables (the day's
//! partitions, and the partial indexes of what is pending or failed: bounded by the backlog,
//! not by the tables' size). Duplicates, refusals and acknowledgement latency leave no row;
//! they come from `ingest_stats`, the receivers' per-minute counts (`ingest::IngestStats`),
//! which lag by up to `ingest::FLUSH_EVERY`.

use std::collections::BTreeMap;

use serde::Serialize;
use sqlx::PgPool;
use time::OffsetDateTime;

use super::error::OperatorError;
use crate::ingest::{BUCKETS, quantile_ms};
use crate::support::ids;

/// The step of the day's series.
pub const SERIES_STEP_SECS: i64 = 300;

/// Outcomes that are answers the provider need not resend, other than accepted and
/// duplicate: neither counted as refusals.
const NOT_REFUSED: [&str; 4] = ["accepted", "duplicate", "ignored", "handshake"];

#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    /// The database's clock, which every window is measured from.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub last_hour: Vec<EndpointWindow>,
    pub last_day: Vec<EndpointWindow>,
    pub backlog: Vec<EndpointBacklog>,
    pub deliveries: Vec<TargetDeliveries>,
    /// The last day in `SERIES_STEP_SECS` steps (each `at` its start), oldest first, every step
    /// present, the last one still filling.
    pub series: Vec<SeriesPoint>,
}

/// One endpoint in one window. `endpoint_id` is `(unknown)` for requests to paths no endpoint
/// is configured for.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EndpointWindow {
    pub endpoint_id: String,
    /// Events stored (inbox rows received in the window; a batch request stores several).
    pub events: i64,
    /// Of those, events processing gave up on (`FAILED` now).
    pub failed_events: i64,
    /// Requests answered `accepted` (at least one new event stored).
    pub accepted: i64,
    /// Requests answered `duplicate` (every event already stored).
    pub duplicate: i64,
    /// Requests answered `ignored` (an unsupported type the endpoint ignores) or handshakes.
    pub other_answers: i64,
    /// Refused requests by error code (`invalid_signature`, `rate_limited`, ...).
    pub rejected: BTreeMap<String, i64>,
    /// Acknowledgement latency (accepted and duplicate answers), from the buckets.
    pub ack_p50_ms: Option<f64>,
    pub ack_p99_ms: Option<f64>,
}

impl EndpointWindow {
    pub fn rejected_total(&self) -> i64 {
        self.rejected.values().sum()
    }
}

/// What processing has left to do on one endpoint's events, and what it gave up on.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EndpointBacklog {
    pub endpoint_id: String,
    /// `PENDING` and `PROCESSING` events.
    pub pending: i64,
    /// Seconds since the oldest of them was received.
    pub oldest_pending_secs: Option<f64>,
    /// `FAILED` events, whenever received.
    pub failed: i64,
}

#[derive(Debug, Clone, Serialize, sqlx::FromRow)]
pub struct TargetDeliveries {
    pub sink: String,
    pub target: String,
    pub pending: i64,
    /// Seconds since the oldest pending delivery was planned.
    pub oldest_pending_secs: Option<f64>,
    pub failed: i64,
}

/// One step of the series: requests answered in it, all endpoints together.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesPoint {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    pub accepted: i64,
    pub duplicate: i64,
    pub rejected: i64,
    /// Acknowledgement p99 in the step.
    pub ack_p99_ms: Option<f64>,
}

/// The overview as of the database's clock.
pub async fn overview(pool: &PgPool) -> Result<Overview, OperatorError> {
    let at: OffsetDateTime = sqlx::query_scalar("SELECT now()").fetch_one(pool).await?;
    let hour = at - time::Duration::HOUR;
    let day = at - time::Duration::DAY;
    let mut last_hour: BTreeMap<String, EndpointWindow> = BTreeMap::new();
    let mut last_day: BTreeMap<String, EndpointWindow> = BTreeMap::new();

    // One pass over the day's rows (its one or two partitions), the hour counted within it.
    let events: Vec<(String, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT endpoint_id,
                count(*) FILTER (WHERE received_at >= $3),
                count(*) FILTER (WHERE received_at >= $3 AND status = 'FAILED'),
                count(*), count(*) FILTER (WHERE status = 'FAILED')
         FROM webhook_inbox WHERE inbox_id >= $1 AND received_at >= $2
         GROUP BY endpoint_id",
    )
    .bind(ids::floor_at(day))
    .bind(day)
    .bind(hour)
    .fetch_all(pool)
    .await?;
    for (endpoint, hour_events, hour_failed, day_events, day_failed) in events {
        let h = window_of(&mut last_hour, &endpoint);
        h.events = hour_events;
        h.failed_events = hour_failed;
        let d = window_of(&mut last_day, &endpoint);
        d.events = day_events;
        d.failed_events = day_failed;
    }

    // The day's per-minute counts, added up here: buckets are arrays, summed element-wise.
    let stats: Vec<(OffsetDateTime, String, String, i64, Vec<i64>)> = sqlx::query_as(
        "SELECT minute, endpoint_id, outcome, count, latency_buckets FROM ingest_stats
         WHERE minute >= $1",
    )
    .bind(day)
    .fetch_all(pool)
    .await?;
    // Steps start on multiples of the step: the first holds the day's start, the last now.
    let first_step = day.unix_timestamp().div_euclid(SERIES_STEP_SECS) * SERIES_STEP_SECS;
    let steps = ((at.unix_timestamp() - first_step) / SERIES_STEP_SECS + 1) as usize;
    let mut series: Vec<(SeriesPoint, [i64; BUCKETS])> = (0..steps)
        .map(|i| {
            let at = OffsetDateTime::from_unix_timestamp(first_step + i as i64 * SERIES_STEP_SECS)
                .unwrap_or(at);
            (
                SeriesPoint {
                    at,
                    accepted: 0,
                    duplicate: 0,
                    rejected: 0,
                    ack_p99_ms: None,
                },
                [0; BUCKETS],
            )
        })
        .collect();
    let mut hour_buckets: BTreeMap<String, [i64; BUCKETS]> = BTreeMap::new();
    let mut day_buckets: BTreeMap<String, [i64; BUCKETS]> = BTreeMap::new();
    for (minute, endpoint, outcome, count, buckets) in stats {
        let acknowledged = outcome == "accepted" || outcome == "duplicate";
        let mut windows = vec![(&mut last_day, &mut day_buckets)];
        if minute > hour - time::Duration::MINUTE {
            // The minute that straddles the hour's start counts in the hour.
            windows.push((&mut last_hour, &mut hour_buckets));
        }
        for (window, latencies) in windows {
            add_answers(window_of(window, &endpoint), &outcome, count);
            if acknowledged {
                add_buckets(latencies.entry(endpoint.clone()).or_default(), &buckets);
            }
        }
        let step = (minute.unix_timestamp() - first_step).div_euclid(SERIES_STEP_SECS);
        if let Some((point, latencies)) = usize::try_from(step).ok().and_then(|s| series.get_mut(s))
        {
            match outcome.as_str() {
                "accepted" => point.accepted += count,
                "duplicate" => point.duplicate += count,
                o if !NOT_REFUSED.contains(&o) => point.rejected += count,
                _ => {}
            }
            if acknowledged {
                add_buckets(latencies, &buckets);
            }
        }
    }
    for (window, latencies) in [(&mut last_hour, hour_buckets), (&mut last_day, day_buckets)] {
        for (endpoint, buckets) in latencies {
            let w = window_of(window, &endpoint);
            w.ack_p50_ms = quantile_ms(&buckets, 0.5);
            w.ack_p99_ms = quantile_ms(&buckets, 0.99);
        }
    }
    let series = series
        .into_iter()
        .map(|(mut point, buckets)| {
            point.ack_p99_ms = quantile_ms(&buckets, 0.99);
            point
        })
        .collect();

    Ok(Overview {
        at,
        last_hour: last_hour.into_values().collect(),
        last_day: last_day.into_values().collect(),
        backlog: backlog(pool).await?,
        deliveries: deliveries(pool).await?,
        series,
    })
}

fn window_of<'a>(
    window: &'a mut BTreeMap<String, EndpointWindow>,
    endpoint: &str,
) -> &'a mut EndpointWindow {
    window
        .entry(endpoint.to_owned())
        .or_insert_with(|| EndpointWindow {
            endpoint_id: endpoint.to_owned(),
            ..EndpointWindow::default()
        })
}

fn add_answers(w: &mut EndpointWindow, outcome: &str, count: i64) {
    match outcome {
        "accepted" => w.accepted += count,
        "duplicate" => w.duplicate += count,
        "ignored" | "handshake" => w.other_answers += count,
        code => *w.rejected.entry(code.to_owned()).or_default() += count,
    }
}

fn add_buckets(sum: &mut [i64; BUCKETS], row: &[i64]) {
    for (a, b) in sum.iter_mut().zip(row) {
        *a += b;
    }
}

/// Pending and FAILED events per endpoint: through the partial index of what is due and the
/// status index, so bounded by the backlog and the failures, not by the table.
async fn backlog(pool: &PgPool) -> Result<Vec<EndpointBacklog>, OperatorError> {
    let rows: Vec<(String, i64, Option<f64>, i64)> = sqlx::query_as(
        "SELECT endpoint_id, sum(pending)::int8, max(oldest)::float8, sum(failed)::int8
         FROM (SELECT endpoint_id, count(*) AS pending,
                      extract(epoch FROM now() - min(received_at)) AS oldest, 0 AS failed
               FROM webhook_inbox WHERE status IN ('PENDING', 'PROCESSING')
               GROUP BY endpoint_id
               UNION ALL
               SELECT endpoint_id, 0, NULL, count(*)
               FROM webhook_inbox WHERE status = 'FAILED' GROUP BY endpoint_id) t
         GROUP BY endpoint_id ORDER BY endpoint_id",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(endpoint_id, pending, oldest, failed)| EndpointBacklog {
            endpoint_id,
            pending,
            oldest_pending_secs: oldest,
            failed,
        })
        .collect())
}

/// Each target's pending deliveries (the due index) and FAILED ones (the failed index), as
/// the reconciler reads them for its gauges.
async fn deliveries(pool: &PgPool) -> Result<Vec<TargetDeliveries>, OperatorError> {
    Ok(sqlx::query_as(
        "SELECT sink, target, sum(pending)::int8 AS pending,
                max(oldest)::float8 AS oldest_pending_secs, sum(failed)::int8 AS failed
         FROM (SELECT sink, target, count(*) AS pending,
                      extract(epoch FROM now() - min(created_at)) AS oldest, 0 AS failed
               FROM deliveries WHERE status = 'PENDING' GROUP BY sink, target
               UNION ALL
               SELECT sink, target, 0, NULL, count(*)
               FROM deliveries WHERE status = 'FAILED' GROUP BY sink, target) t
         GROUP BY sink, target ORDER BY sink, target",
    )
    .fetch_all(pool)
    .await?)
}
