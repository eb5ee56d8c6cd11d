//! The overview: per endpoint, the last hour and the last day (events stored and FAILED,
//! requests accepted, duplicate and refused by code, acknowledgement p50 and p99), the
//! processing backlog and its oldest age, deliveries pending and FAILED per target, and the
//! day in 5-minute steps as charts. The numbers are `operator::overview`'s.

use std::collections::BTreeSet;

use askama::Template;
use axum::extract::{Extension, State};
use axum::response::Response;

use super::chart;
use super::guard::Signed;
use super::page::{Chrome, ConsoleError, html};
use super::state::Console;
use crate::operator::overview::{self, EndpointWindow};

/// One window of one endpoint, as the table shows it.
pub struct WindowCells {
    pub events: i64,
    pub failed_events: i64,
    pub accepted: i64,
    pub duplicate: i64,
    pub refused: i64,
    /// `invalid_signature 3, rate_limited 1`.
    pub refused_by_code: String,
    pub ack_p50: String,
    pub ack_p99: String,
}

pub struct EndpointRow {
    pub id: String,
    pub hour: WindowCells,
    pub day: WindowCells,
    pub backlog: i64,
    pub oldest_pending: String,
    pub failed: i64,
}

pub struct TargetRow {
    pub sink: String,
    pub target: String,
    pub pending: i64,
    pub oldest_pending: String,
    pub failed: i64,
}

#[derive(Template)]
#[template(path = "console/overview.html")]
struct OverviewPage {
    chrome: Chrome,
    at: String,
    endpoints: Vec<EndpointRow>,
    targets: Vec<TargetRow>,
    accepted_chart: String,
    refused_chart: String,
    p99_chart: String,
}

fn age(secs: Option<f64>) -> String {
    match secs {
        None => String::new(),
        Some(s) if s < 120.0 => format!("{s:.0} s"),
        Some(s) if s < 7200.0 => format!("{:.0} min", s / 60.0),
        Some(s) => format!("{:.1} h", s / 3600.0),
    }
}

fn ms(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1} ms")).unwrap_or_default()
}

fn cells(window: Option<&EndpointWindow>) -> WindowCells {
    let w = window.cloned().unwrap_or_default();
    WindowCells {
        events: w.events,
        failed_events: w.failed_events,
        accepted: w.accepted,
        duplicate: w.duplicate,
        refused: w.rejected_total(),
        refused_by_code: w
            .rejected
            .iter()
            .map(|(code, n)| format!("{code} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
        ack_p50: ms(w.ack_p50_ms),
        ack_p99: ms(w.ack_p99_ms),
    }
}

pub async fn page(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
) -> Result<Response, ConsoleError> {
    let o = overview::overview(&console.0.pool).await?;
    // Every configured endpoint, and any other the numbers name (one since removed, or the
    // requests to unknown paths).
    let mut ids: BTreeSet<String> = console
        .0
        .http
        .ingest
        .endpoints()
        .load()
        .iter()
        .map(|e| e.id.clone())
        .collect();
    ids.extend(o.last_day.iter().map(|w| w.endpoint_id.clone()));
    ids.extend(o.backlog.iter().map(|b| b.endpoint_id.clone()));
    let endpoints = ids
        .into_iter()
        .map(|id| {
            let backlog = o.backlog.iter().find(|b| b.endpoint_id == id);
            EndpointRow {
                hour: cells(o.last_hour.iter().find(|w| w.endpoint_id == id)),
                day: cells(o.last_day.iter().find(|w| w.endpoint_id == id)),
                backlog: backlog.map_or(0, |b| b.pending),
                oldest_pending: age(backlog.and_then(|b| b.oldest_pending_secs)),
                failed: backlog.map_or(0, |b| b.failed),
                id,
            }
        })
        .collect();
    let series = |f: &dyn Fn(&overview::SeriesPoint) -> u64| -> Vec<u64> {
        o.series.iter().map(f).collect()
    };
    let count = |n: i64| u64::try_from(n).unwrap_or(0);
    Ok(html(&OverviewPage {
        chrome: Chrome::new(&signed.session, "overview", "Overview"),
        at: super::page::when(o.at),
        accepted_chart: chart::bars(
            "requests accepted per 5 minutes, last 24 hours",
            &series(&|p| count(p.accepted)),
        ),
        refused_chart: chart::bars(
            "requests refused per 5 minutes, last 24 hours",
            &series(&|p| count(p.rejected)),
        ),
        p99_chart: chart::bars(
            "acknowledgement p99 (ms) per 5 minutes, last 24 hours",
            &series(&|p| p.ack_p99_ms.map_or(0, |v| v.round() as u64)),
        ),
        endpoints,
        targets: o
            .deliveries
            .iter()
            .map(|t| TargetRow {
                sink: t.sink.clone(),
                target: t.target.clone(),
                pending: t.pending,
                oldest_pending: age(t.oldest_pending_secs),
                failed: t.failed,
            })
            .collect(),
    }))
}
