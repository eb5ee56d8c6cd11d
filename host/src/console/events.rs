//! Events: the filtered list (newest first, a page at a time), one event's page (what was
//! verified, its processing, its deliveries), and its payload on an explicit reveal, which an
//! admin alone may ask for and which the audit trail records before the payload is shown.

use askama::Template;
use axum::extract::{Extension, Path, Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::guard::Signed;
use super::page::{Chrome, ConsoleError, form_time, html, some, when, when_opt};
use super::state::Console;
use crate::http::ClientInfo;
use crate::operator::audit::{self, Actor};
use crate::operator::event_detail::{self, EventDetail};
use crate::operator::event_search::{self, Search};
use crate::operator::events;
use crate::operator::lookup;

/// Rows per page.
const PAGE: i64 = 50;

/// The list's filter as the form and the links carry it; empty fields filter nothing.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct EventQuery {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub endpoint: String,
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub event_type: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub since: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub until: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub provider_event_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub object_id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub before: String,
}

pub struct EventRow {
    pub inbox_id: String,
    pub endpoint: String,
    pub event_type: String,
    pub provider_event_id: String,
    pub status: String,
    pub received_at: String,
    pub attempts: i32,
    pub last_error: String,
}

#[derive(Template)]
#[template(path = "console/events.html")]
struct EventsPage {
    chrome: Chrome,
    query: EventQuery,
    statuses: &'static [&'static str],
    rows: Vec<EventRow>,
    total: String,
    next: Option<String>,
    /// Back to the newest page, when this one is further on.
    first: Option<String>,
}

impl EventQuery {
    fn search(&self) -> Result<Search, ConsoleError> {
        Ok(Search {
            endpoint: some(&self.endpoint),
            event_type: some(&self.event_type),
            status: some(&self.status),
            since: form_time("since", &self.since)?,
            until: form_time("until", &self.until)?,
            provider_event_id: some(&self.provider_event_id),
            object_id: some(&self.object_id),
        }
        .checked()?)
    }

    fn href(&self) -> String {
        format!(
            "/console/events?{}",
            serde_urlencoded::to_string(self).unwrap_or_default()
        )
    }
}

pub async fn list(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
    Query(query): Query<EventQuery>,
) -> Result<Response, ConsoleError> {
    let search = query.search()?;
    let before =
        match some(&query.before) {
            None => None,
            Some(b) => Some(b.parse::<Uuid>().map_err(|_| {
                ConsoleError::BadRequest(format!("before: {b:?} is not an inbox id"))
            })?),
        };
    let page = event_search::search(&console.0.pool, &search, before, PAGE).await?;
    let rows = page
        .events
        .iter()
        .map(|e| EventRow {
            inbox_id: e.inbox_id.to_string(),
            endpoint: e.endpoint_id.clone(),
            event_type: e.event_type.clone(),
            provider_event_id: e.provider_event_id.clone(),
            status: e.status.clone(),
            received_at: when(e.received_at),
            attempts: e.attempt_count,
            last_error: e.last_error.clone().unwrap_or_default(),
        })
        .collect();
    let next = page.next_before.map(|before| {
        EventQuery {
            before: before.to_string(),
            ..query.clone()
        }
        .href()
    });
    let first = (!query.before.is_empty()).then(|| {
        EventQuery {
            before: String::new(),
            ..query.clone()
        }
        .href()
    });
    Ok(html(&EventsPage {
        chrome: Chrome::new(&signed.session, "events", "Events"),
        query,
        statuses: &events::STATUSES,
        rows,
        total: page.total_text(),
        next,
        first,
    }))
}

/// One labelled value of an event's page.
pub struct Field {
    pub label: &'static str,
    pub id: &'static str,
    pub value: String,
}

pub struct DeliveryRow {
    pub delivery_id: String,
    pub sink: String,
    pub target: String,
    pub status: String,
    pub attempts: String,
    pub last_error: String,
    pub sent_at: String,
}

#[derive(Template)]
#[template(path = "console/event.html")]
struct EventPage {
    chrome: Chrome,
    inbox_id: String,
    event_type: String,
    provider_event_id: String,
    status: String,
    verified: Vec<Field>,
    processing: Vec<Field>,
    deliveries: Vec<DeliveryRow>,
    /// `None` until revealed; then the payload as text (JSON pretty-printed).
    payload: Option<String>,
}

fn field(label: &'static str, id: &'static str, value: impl Into<String>) -> Field {
    Field {
        label,
        id,
        value: value.into(),
    }
}

fn or_empty<T: ToString>(v: &Option<T>) -> String {
    v.as_ref().map(ToString::to_string).unwrap_or_default()
}

fn event_page(
    console: &Console,
    signed: &Signed,
    event: &EventDetail,
    payload: Option<String>,
) -> EventPage {
    // The version stored events do not record: the one loaded now, said as such.
    let loaded = console.0.http.ingest.adapters();
    let version = loaded.get(&event.provider).map_or_else(
        || "(not loaded now)".to_owned(),
        |a| format!("{} (loaded now)", a.info.version),
    );
    let span = match (event.payload_start, event.payload_end) {
        (Some(start), Some(end)) => format!("bytes {start}..{end} of a batch's body"),
        _ => "the whole body".to_owned(),
    };
    let marker = event
        .processed_marker
        .as_ref()
        .map_or_else(String::new, |m| {
            format!("{} at {}", m.outcome, when(m.processed_at))
        });
    EventPage {
        chrome: Chrome::new(
            &signed.session,
            "events",
            format!("Event {}", event.event_type),
        ),
        inbox_id: event.inbox_id.to_string(),
        event_type: event.event_type.clone(),
        provider_event_id: event.provider_event_id.clone(),
        status: event.status.clone(),
        verified: vec![
            field("Endpoint", "endpoint", event.endpoint_id.clone()),
            field("Adapter", "adapter", event.provider.clone()),
            field("Adapter version", "adapter-version", version),
            field(
                "Secret version that matched",
                "secret-version",
                event.matched_secret_version.clone(),
            ),
            field("Received", "received-at", when(event.received_at)),
            field(
                "Signed creation time",
                "created-at",
                when_opt(event.provider_created_at),
            ),
            field("Object", "object-id", or_empty(&event.object_id)),
            field(
                "Object version",
                "object-version",
                or_empty(&event.object_version),
            ),
            field(
                "Payload SHA-256",
                "payload-sha256",
                event.payload_sha256.clone(),
            ),
            field("Payload", "payload-span", span),
            field(
                "Payload stored",
                "payload-stored",
                if event.payload_stored {
                    "yes"
                } else {
                    "no (retention removed it)"
                },
            ),
        ],
        processing: vec![
            field("Status", "processing-status", event.status.clone()),
            field("Outcome", "outcome", or_empty(&event.outcome)),
            field("Attempts", "attempts", event.attempt_count.to_string()),
            field("Next attempt", "next-attempt", when(event.next_attempt_at)),
            field("Processed", "processed-at", when_opt(event.processed_at)),
            field("Applied (marker)", "processed-marker", marker),
            field("Last error", "last-error", or_empty(&event.last_error)),
        ],
        deliveries: event
            .deliveries
            .iter()
            .map(|d| DeliveryRow {
                delivery_id: d.delivery_id.to_string(),
                sink: d.sink.clone(),
                target: d.target.clone(),
                status: d.status.clone(),
                attempts: format!("{} of {}", d.attempt_count, d.max_attempts),
                last_error: or_empty(&d.last_error),
                sent_at: when_opt(d.sent_at),
            })
            .collect(),
        payload,
    }
}

/// An inbox id shows the event; anything else is taken for a provider event id and listed
/// (one id may have arrived on several endpoints).
pub async fn show(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
    Path(id): Path<String>,
) -> Result<Response, ConsoleError> {
    let Ok(inbox_id) = id.parse::<Uuid>() else {
        let found = lookup::named(&console.0.pool, &id, None).await?;
        let href = match found.as_slice() {
            [one] => format!("/console/events/{}", one.inbox_id),
            _ => EventQuery {
                provider_event_id: id,
                ..EventQuery::default()
            }
            .href(),
        };
        return Ok(Redirect::to(&href).into_response());
    };
    let event = event_detail::detail(&console.0.pool, inbox_id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound(format!("no event {inbox_id}")))?;
    Ok(html(&event_page(&console, &signed, &event, None)))
}

/// The payload, after its audit row is committed (admin only: the guard refuses viewers).
pub async fn reveal(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
    client: Option<Extension<ClientInfo>>,
    Path(inbox_id): Path<Uuid>,
) -> Result<Response, ConsoleError> {
    let c = &console.0;
    let actor = Actor::Console {
        role: signed.session.role.as_str(),
        version: signed.session.version.clone(),
        client: client.map(|c| c.0.addr),
    };
    let detail = serde_json::json!({ "inbox_id": inbox_id });
    tracing::info!(target: "wharf::audit", actor = ?actor, %detail, "payload read in the console");
    audit::record(&c.pool, "payload read", &actor, detail).await?;
    let event = event_detail::detail(&c.pool, inbox_id)
        .await?
        .ok_or_else(|| ConsoleError::NotFound(format!("no event {inbox_id}")))?;
    let shown = events::show(&c.pool, inbox_id, Some(&c.payload_keys))
        .await?
        .ok_or_else(|| ConsoleError::NotFound(format!("no event {inbox_id}")))?;
    let payload = payload_text(&shown["payload"]);
    Ok(html(&event_page(&console, &signed, &event, Some(payload))))
}

/// JSON pretty-printed, other text as it is, binary as base64, or why there is none.
fn payload_text(payload: &Value) -> String {
    if let Some(text) = payload["utf8"].as_str() {
        return match serde_json::from_str::<Value>(text) {
            Ok(json) => serde_json::to_string_pretty(&json).unwrap_or_else(|_| text.to_owned()),
            Err(_) => text.to_owned(),
        };
    }
    if let Some(b64) = payload["base64"].as_str() {
        return format!("(binary, base64)\n{b64}");
    }
    if let Some(error) = payload["error"].as_str() {
        return format!("(the payload cannot be opened: {error})");
    }
    "(no payload stored: retention removed it, or it was purged)".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_show_as_pretty_json_text_base64_or_why_not() {
        let shown = |v: Value| payload_text(&v);
        assert_eq!(
            shown(serde_json::json!({"utf8": "{\"a\":1}"})),
            "{\n  \"a\": 1\n}"
        );
        assert_eq!(shown(serde_json::json!({"utf8": "a=1&b=2"})), "a=1&b=2");
        assert!(shown(serde_json::json!({"base64": "AAE="})).ends_with("\nAAE="));
        assert!(shown(serde_json::json!({"error": "no key k2"})).contains("no key k2"));
        assert!(shown(Value::Null).starts_with("(no payload stored"));
    }
}
