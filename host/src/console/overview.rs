//! The overview: per endpoint, what arrived in the last hour and day, the processing backlog
//! and its oldest pending age, FAILED events, and deliveries pending or failed per target.

use askama::Template;
use axum::extract::{Extension, State};
use axum::response::Response;
use sqlx::Row as _;

use super::chart;
use super::guard::Signed;
use super::page::{Chrome, ConsoleError, html};
use super::state::Console;

pub struct EndpointRow {
    pub id: String,
    pub accepted_hour: u64,
    pub accepted_day: u64,
    pub backlog: i64,
    pub oldest_pending: String,
    pub failed: i64,
    /// Accepted per hour over the last day, as SVG.
    pub chart: String,
}

pub struct TargetRow {
    pub sink: String,
    pub target: String,
    pub pending: i64,
    pub failed: i64,
}

#[derive(Template)]
#[template(path = "console/overview.html")]
struct OverviewPage {
    chrome: Chrome,
    endpoints: Vec<EndpointRow>,
    targets: Vec<TargetRow>,
}

fn age(secs: Option<f64>) -> String {
    match secs {
        None => String::new(),
        Some(s) if s < 120.0 => format!("{s:.0} s"),
        Some(s) if s < 7200.0 => format!("{:.0} min", s / 60.0),
        Some(s) => format!("{:.1} h", s / 3600.0),
    }
}

pub async fn page(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
) -> Result<Response, ConsoleError> {
    let pool = &console.0.pool;
    let ids: Vec<String> = console
        .0
        .http
        .ingest
        .endpoints()
        .load()
        .iter()
        .map(|e| e.id.clone())
        .collect();
    // The last day's partitions only, by the time-ordered inbox id.
    // The last day's partitions only, by the time-ordered inbox id, counted per hour ago.
    let accepted = sqlx::query(
        "SELECT endpoint_id,
                least(floor(extract(epoch FROM now() - received_at) / 3600), 23)::int AS h,
                count(*)
         FROM webhook_inbox
         WHERE inbox_id >= wharf_uuid_floor(now() - interval '1 day')
         GROUP BY 1, 2",
    )
    .fetch_all(pool)
    .await?;
    let backlog = sqlx::query(
        "SELECT endpoint_id, count(*), extract(epoch FROM now() - min(received_at))::float8
         FROM webhook_inbox WHERE status IN ('PENDING', 'PROCESSING') GROUP BY endpoint_id",
    )
    .fetch_all(pool)
    .await?;
    let failed = sqlx::query(
        "SELECT endpoint_id, count(*) FROM webhook_inbox WHERE status = 'FAILED'
         GROUP BY endpoint_id",
    )
    .fetch_all(pool)
    .await?;
    let targets = sqlx::query(
        "SELECT sink, target, count(*) FILTER (WHERE status = 'PENDING'),
                count(*) FILTER (WHERE status = 'FAILED')
         FROM deliveries WHERE status IN ('PENDING', 'FAILED')
         GROUP BY sink, target ORDER BY sink, target",
    )
    .fetch_all(pool)
    .await?;
    let mut endpoints = Vec::new();
    for id in ids {
        let mut per_hour = vec![0u64; 24];
        for r in accepted.iter().filter(|r| r.get::<String, _>(0) == id) {
            let hours_ago = usize::try_from(r.get::<i32, _>(1).clamp(0, 23)).unwrap_or(0);
            per_hour[23 - hours_ago] += u64::try_from(r.get::<i64, _>(2)).unwrap_or(0);
        }
        let pending = backlog.iter().find(|r| r.get::<String, _>(0) == id);
        endpoints.push(EndpointRow {
            accepted_hour: per_hour[23],
            accepted_day: per_hour.iter().sum(),
            backlog: pending.map_or(0, |r| r.get(1)),
            oldest_pending: age(pending.and_then(|r| r.get(2))),
            failed: failed
                .iter()
                .find(|r| r.get::<String, _>(0) == id)
                .map_or(0, |r| r.get(1)),
            chart: chart::bars(
                &format!("{id}: accepted per hour, last 24 hours"),
                &per_hour,
            ),
            id,
        });
    }
    Ok(html(&OverviewPage {
        chrome: Chrome::new(&signed.session, "overview", "Overview"),
        endpoints,
        targets: targets
            .iter()
            .map(|r| TargetRow {
                sink: r.get(0),
                target: r.get(1),
                pending: r.get(2),
                failed: r.get(3),
            })
            .collect(),
    }))
}
