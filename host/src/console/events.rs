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
use super::page::{Chrome, ConsoleError, html};
use super::state::Console;
use crate::http::ClientInfo;
use crate::operator::audit::{self, Actor};
use crate::operator::events;

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
}

fn some(text: &str) -> Option<String> {
    let t = text.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

pub async fn list(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
    Query(query): Query<EventQuery>,
) -> Result<Response, ConsoleError> {
    let filter = events::Filter {
        status: some(&query.status),
        endpoint: some(&query.endpoint),
        limit: PAGE,
    }
    .checked()?;
    let page = events::list(&console.0.pool, &filter).await?;
    let rows = page
        .events
        .iter()
        .map(|e| EventRow {
            inbox_id: e.inbox_id.to_string(),
            endpoint: e.endpoint_id.clone(),
            event_type: e.event_type.clone(),
            provider_event_id: e.provider_event_id.clone(),
            status: e.status.clone(),
            received_at: super::page::when(e.received_at),
            attempts: e.attempt_count,
            last_error: e.last_error.clone().unwrap_or_default(),
        })
        .collect();
    let total = crate::operator::matches_text(page.total);
    Ok(html(&EventsPage {
        chrome: Chrome::new(&signed.session, "events", "Events"),
        query,
        statuses: &events::STATUSES,
        rows,
        total,
        next: None,
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

fn text(event: &Value, key: &str) -> String {
    match &event[key] {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn field(event: &Value, label: &'static str, id: &'static str, key: &str) -> Field {
    Field {
        label,
        id,
        value: text(event, key),
    }
}

fn event_page(signed: &Signed, event: &Value, payload: Option<String>) -> EventPage {
    let deliveries = event["deliveries"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|d| DeliveryRow {
                    delivery_id: text(d, "delivery_id"),
                    sink: text(d, "sink"),
                    target: text(d, "target"),
                    status: text(d, "status"),
                    attempts: format!(
                        "{} of {}",
                        text(d, "attempt_count"),
                        text(d, "max_attempts")
                    ),
                    last_error: text(d, "last_error"),
                    sent_at: text(d, "sent_at"),
                })
                .collect()
        })
        .unwrap_or_default();
    let event_type = text(event, "event_type");
    EventPage {
        chrome: Chrome::new(&signed.session, "events", format!("Event {event_type}")),
        inbox_id: text(event, "inbox_id"),
        provider_event_id: text(event, "provider_event_id"),
        status: text(event, "status"),
        verified: vec![
            field(event, "Endpoint", "endpoint", "endpoint_id"),
            field(event, "Adapter", "adapter", "provider"),
            field(
                event,
                "Adapter version",
                "adapter-version",
                "adapter_version",
            ),
            field(
                event,
                "Secret version that matched",
                "secret-version",
                "matched_secret_version",
            ),
            field(event, "Received", "received-at", "received_at"),
            field(
                event,
                "Signed creation time",
                "created-at",
                "provider_created_at",
            ),
            field(event, "Object", "object-id", "object_id"),
            field(event, "Object version", "object-version", "object_version"),
            field(event, "Payload SHA-256", "payload-sha256", "payload_sha256"),
        ],
        processing: vec![
            field(event, "Status", "processing-status", "status"),
            field(event, "Outcome", "outcome", "outcome"),
            field(event, "Attempts", "attempts", "attempt_count"),
            field(event, "Next attempt", "next-attempt", "next_attempt_at"),
            field(event, "Processed", "processed-at", "processed_at"),
            field(event, "Last error", "last-error", "last_error"),
        ],
        deliveries,
        event_type,
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
        let query = EventQuery {
            provider_event_id: id,
            ..EventQuery::default()
        };
        let href = format!(
            "/console/events?{}",
            serde_urlencoded::to_string(&query).unwrap_or_default()
        );
        return Ok(Redirect::to(&href).into_response());
    };
    let event = events::show(&console.0.pool, inbox_id, None)
        .await?
        .ok_or_else(|| ConsoleError::NotFound(format!("no event {inbox_id}")))?;
    Ok(html(&event_page(&signed, &event, None)))
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
    let event = events::show(&c.pool, inbox_id, Some(&c.payload_keys))
        .await?
        .ok_or_else(|| ConsoleError::NotFound(format!("no event {inbox_id}")))?;
    let payload = payload_text(&event["payload"]);
    Ok(html(&event_page(&signed, &event, Some(payload))))
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
