//! Deliveries: the filtered list (oldest first, continued with `after`), one delivery's page,
//! and replays exactly as `wharf deliveries replay` makes them (the same rows requeued, the
//! same `Idempotency-Key`): one from its row, or a filtered set after a dry run shows how many
//! it would requeue and the operator confirms.

use askama::Template;
use axum::Form;
use axum::extract::{Extension, Path, Query, State};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::guard::Signed;
use super::page::{Chrome, ConsoleError, form_time, html, some, when, when_opt};
use super::state::Console;
use crate::config::SinkKind;
use crate::http::ClientInfo;
use crate::operator::audit::{self, Actor};
use crate::operator::deliveries::{self, Filter, ReplayRequest, Replayed};
use crate::operator::{DEFAULT_REPLAY_LIMIT, matches_text};

const PAGE: i64 = 50;

/// The list's filter as forms and links carry it; empty fields filter nothing. `route` is a
/// configured route's number (1 first), standing for its sink and target.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct DeliveryQuery {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub route: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub endpoint: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub since: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub until: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub after: String,
}

impl DeliveryQuery {
    fn filter(&self, console: &Console) -> Result<Filter, ConsoleError> {
        let (mut sink, mut target) = (None, some(&self.target));
        if let Some(route) = some(&self.route) {
            let routes = &console.0.config.routes;
            let chosen = route
                .parse::<usize>()
                .ok()
                .and_then(|n| n.checked_sub(1))
                .and_then(|i| routes.get(i))
                .ok_or_else(|| ConsoleError::BadRequest(format!("no route {route:?}")))?;
            sink = Some(chosen.sink.as_str().to_owned());
            target = route_target(chosen);
        }
        Ok(Filter {
            status: some(&self.status),
            target,
            sink,
            endpoint: some(&self.endpoint),
            since: form_time("since", &self.since)?,
            until: form_time("until", &self.until)?,
        }
        .checked()?)
    }
}

fn route_target(route: &crate::config::RouteConfig) -> Option<String> {
    match route.sink {
        SinkKind::Http => route.url.clone(),
        SinkKind::Nats => route.subject.clone(),
    }
}

pub struct Row {
    pub delivery_id: String,
    pub inbox_id: String,
    pub endpoint: String,
    pub sink: String,
    pub target: String,
    pub status: String,
    pub attempts: String,
    pub last_error: String,
    pub status_code: String,
    pub created_at: String,
    pub sent_at: String,
}

fn row(d: &deliveries::Summary) -> Row {
    Row {
        delivery_id: d.delivery_id.to_string(),
        inbox_id: d.inbox_id.to_string(),
        endpoint: d.endpoint_id.clone(),
        sink: d.sink.clone(),
        target: d.target.clone(),
        status: d.status.clone(),
        attempts: format!("{} of {}", d.attempt_count, d.max_attempts),
        last_error: d.last_error.clone().unwrap_or_default(),
        status_code: d
            .last_status_code
            .map(|c| c.to_string())
            .unwrap_or_default(),
        created_at: when(d.created_at),
        sent_at: when_opt(d.sent_at),
    }
}

/// A configured route as the filter's choice lists it.
pub struct RouteChoice {
    pub number: String,
    pub label: String,
}

#[derive(Template)]
#[template(path = "console/deliveries.html")]
struct DeliveriesPage {
    chrome: Chrome,
    query: DeliveryQuery,
    statuses: &'static [&'static str],
    routes: Vec<RouteChoice>,
    rows: Vec<Row>,
    total: String,
    next: Option<String>,
    /// The filter restricts something: a bulk replay may be offered.
    filtered: bool,
}

pub async fn list(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
    Query(query): Query<DeliveryQuery>,
) -> Result<Response, ConsoleError> {
    let filter = query.filter(&console)?;
    let after =
        match some(&query.after) {
            None => None,
            Some(a) => Some(a.parse::<Uuid>().map_err(|_| {
                ConsoleError::BadRequest(format!("after: {a:?} is not a delivery id"))
            })?),
        };
    let page = deliveries::list(&console.0.pool, &filter, after, PAGE).await?;
    let next = page.next_after.map(|after| {
        let next = DeliveryQuery {
            after: after.to_string(),
            ..query.clone()
        };
        format!(
            "/console/deliveries?{}",
            serde_urlencoded::to_string(&next).unwrap_or_default()
        )
    });
    let routes = console
        .0
        .config
        .routes
        .iter()
        .enumerate()
        .map(|(i, r)| RouteChoice {
            number: (i + 1).to_string(),
            label: format!(
                "{} {} ({} → {})",
                r.sink.as_str(),
                route_target(r).unwrap_or_default(),
                r.endpoint,
                r.events.join(", ")
            ),
        })
        .collect();
    Ok(html(&DeliveriesPage {
        chrome: Chrome::new(&signed.session, "deliveries", "Deliveries"),
        filtered: !filter.is_empty(),
        query,
        statuses: &deliveries::STATUSES,
        routes,
        rows: page.deliveries.iter().map(row).collect(),
        total: matches_text(page.total),
        next,
    }))
}

#[derive(Template)]
#[template(path = "console/delivery.html")]
struct DeliveryPage {
    chrome: Chrome,
    delivery_id: String,
    inbox_id: String,
    status: String,
    target: String,
    sink: String,
    attempts: String,
    last_error: String,
    next_attempt_at: String,
    created_at: String,
    sent_at: String,
    event_type: String,
    provider_event_id: String,
    endpoint: String,
    status_code: String,
    /// The attempts that did not succeed, oldest first.
    attempts_log: Vec<AttemptRow>,
    /// What a replay from this page did, when it just ran.
    replayed: Option<String>,
}

/// One attempt that did not succeed.
pub struct AttemptRow {
    pub attempt: String,
    pub at: String,
    pub outcome: String,
    pub status_code: String,
    pub diagnostic: String,
}

fn text(v: &Value, key: &str) -> String {
    match &v[key] {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

async fn delivery_page(
    console: &Console,
    signed: &Signed,
    id: Uuid,
    replayed: Option<String>,
) -> Result<Response, ConsoleError> {
    let d = deliveries::show(&console.0.pool, id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound(format!("no delivery {id}")))?;
    let event = &d["event"];
    Ok(html(&DeliveryPage {
        chrome: Chrome::new(&signed.session, "deliveries", "Delivery"),
        delivery_id: text(&d, "delivery_id"),
        inbox_id: text(&d, "inbox_id"),
        status: text(&d, "status"),
        target: text(&d, "target"),
        sink: text(&d, "sink"),
        attempts: format!(
            "{} of {}",
            text(&d, "attempt_count"),
            text(&d, "max_attempts")
        ),
        last_error: text(&d, "last_error"),
        next_attempt_at: text(&d, "next_attempt_at"),
        created_at: text(&d, "created_at"),
        sent_at: text(&d, "sent_at"),
        event_type: text(event, "event_type"),
        provider_event_id: text(event, "provider_event_id"),
        endpoint: text(event, "endpoint_id"),
        status_code: text(&d, "last_status_code"),
        attempts_log: d["failed_attempts"]
            .as_array()
            .map(|list| {
                list.iter()
                    .map(|a| AttemptRow {
                        attempt: text(a, "attempt"),
                        at: text(a, "at"),
                        outcome: text(a, "outcome"),
                        status_code: text(a, "status_code"),
                        diagnostic: text(a, "diagnostic"),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        replayed,
    }))
}

pub async fn show(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<Uuid>,
) -> Result<Response, ConsoleError> {
    delivery_page(&console, &signed, id, None).await
}

#[derive(Debug, Deserialize)]
pub struct ReplayOneForm {
    /// Also a `SENT` delivery (`--resend`).
    #[serde(default)]
    resend: Option<String>,
}

fn actor(signed: &Signed, client: Option<Extension<ClientInfo>>) -> Actor {
    Actor::Console {
        role: signed.session.role.as_str(),
        version: signed.session.version.clone(),
        client: client.map(|c| c.0.addr),
    }
}

/// Requeues one delivery and shows its page with what the replay did.
pub async fn replay_one(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
    client: Option<Extension<ClientInfo>>,
    Path(id): Path<Uuid>,
    Form(form): Form<ReplayOneForm>,
) -> Result<Response, ConsoleError> {
    let request = ReplayRequest {
        ids: vec![id],
        filter: Filter::default(),
        limit: DEFAULT_REPLAY_LIMIT,
        resend: form.resend.is_some(),
        dry_run: false,
    };
    let replayed = replayed(&console, &signed, client, &request).await?;
    let summary = replayed.summary(request.limit);
    delivery_page(&console, &signed, id, Some(summary)).await
}

/// The replay, and its audit row when it changed something.
async fn replayed(
    console: &Console,
    signed: &Signed,
    client: Option<Extension<ClientInfo>>,
    request: &ReplayRequest,
) -> Result<Replayed, ConsoleError> {
    let replayed = deliveries::replay(&console.0.pool, request).await?;
    if !replayed.dry_run {
        let actor = actor(signed, client);
        let detail = serde_json::json!({
            "requeued": replayed.requeued.len(),
            "resend": request.resend,
            "ids": replayed.requeued.iter().map(|d| d.delivery_id).collect::<Vec<_>>(),
        });
        tracing::info!(target: "wharf::audit", actor = ?actor, requeued = replayed.requeued.len(),
            "deliveries replayed in the console");
        audit::record(&console.0.pool, "deliveries replayed", &actor, detail).await?;
    }
    Ok(replayed)
}

#[derive(Debug, Deserialize)]
pub struct BulkForm {
    #[serde(flatten)]
    query: DeliveryQuery,
    #[serde(default)]
    resend: Option<String>,
    /// Absent: a dry run and the confirmation page. Present: the replay.
    #[serde(default)]
    confirm: Option<String>,
}

#[derive(Template)]
#[template(path = "console/replay.html")]
struct ReplayPage {
    chrome: Chrome,
    /// The filter, carried into the confirmation form as hidden fields.
    fields: Vec<(String, String)>,
    dry_run: bool,
    count: usize,
    matched: String,
    limit: i64,
    summary: String,
    rows: Vec<Row>,
    back: String,
}

/// A filtered replay: first a dry run (nothing changes) with the count and a confirmation
/// form, then, confirmed, the replay itself.
pub async fn replay_many(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
    client: Option<Extension<ClientInfo>>,
    Form(form): Form<BulkForm>,
) -> Result<Response, ConsoleError> {
    let filter = form.query.filter(&console)?;
    if filter.is_empty() {
        return Err(ConsoleError::BadRequest(
            "a bulk replay needs a filter (status, target, route, endpoint or a time range)".into(),
        ));
    }
    let dry_run = form.confirm.is_none();
    let request = ReplayRequest {
        ids: Vec::new(),
        filter,
        limit: DEFAULT_REPLAY_LIMIT,
        resend: form.resend.is_some(),
        dry_run,
    };
    let done = replayed(&console, &signed, client, &request).await?;
    let mut query = form.query.clone();
    query.after.clear();
    let mut fields: Vec<(String, String)> =
        serde_urlencoded::from_str(&serde_urlencoded::to_string(&query).unwrap_or_default())
            .unwrap_or_default();
    if request.resend {
        fields.push(("resend".into(), "1".into()));
    }
    Ok(html(&ReplayPage {
        chrome: Chrome::new(&signed.session, "deliveries", "Replay deliveries"),
        back: format!(
            "/console/deliveries?{}",
            serde_urlencoded::to_string(&query).unwrap_or_default()
        ),
        fields,
        dry_run,
        count: done.requeued.len(),
        matched: matches_text(done.matched),
        limit: request.limit,
        summary: done.summary(request.limit),
        rows: done.requeued.iter().map(row).collect(),
    }))
}
