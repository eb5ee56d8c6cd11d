//! The public webhook route. Rate limits each client address and bounds what a request may
//! cost before its body is read, reads the exact raw bytes under the body limit, answers every
//! `IngestError` in one place, and writes one log line per request (never a secret, signature
//! value or body).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::body::Body;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use crate::adapter::Answer;
use serde_json::json;

use super::body_budget::BodyBudget;
use super::client::ClientInfo;
use crate::ingest::{
    ClientLimits, Ingest, IngestError, IngestStats, LimitScope, Outcome, RequestFacts, inbox_ids,
};
use crate::support::traces::{KeyValue, SpanKind, TraceSpan};

/// Seconds a client should wait before retrying a 503.
const RETRY_AFTER_SECS: &str = "5";

#[derive(Clone)]
pub struct HttpState {
    pub ingest: Arc<Ingest>,
    pub max_headers: usize,
    pub max_header_bytes: usize,
    /// Body bytes requests in flight may hold together, and how a body is read under it
    /// (`[server] max_buffered_bytes`, `body_timeout_ms`, `body_grace_ms`,
    /// `body_min_bytes_per_second`).
    pub body_budget: Arc<BodyBudget>,
    /// A bucket per client address (`[server] client_rate_per_second`, `client_rate_burst`).
    pub client_limits: Arc<ClientLimits>,
    /// Per-minute answer counts for the console, flushed by the server's task.
    pub stats: Arc<IngestStats>,
}

pub fn public_router(state: HttpState) -> Router {
    Router::new()
        .route(
            "/webhooks/{endpoint_id}",
            post(receive).get(receive_get).fallback(method_not_allowed),
        )
        .fallback(not_found)
        .with_state(state)
}

async fn method_not_allowed() -> Response {
    let body = json!({"error": "method_not_allowed", "message": "use POST"});
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, "POST")],
        axum::Json(body),
    )
        .into_response()
}

async fn not_found() -> Response {
    IngestError::UnknownEndpoint.into_response()
}

/// A GET reaches the pipeline only for an adapter that serves handshakes on GET (Meta's
/// `hub.challenge`); for every other endpoint it is 405, as before. Its body is never read.
async fn receive_get(
    State(state): State<HttpState>,
    Path(endpoint_id): Path<String>,
    RawQuery(query): RawQuery,
    client: Option<Extension<ClientInfo>>,
    headers: HeaderMap,
) -> Response {
    if !state.ingest.serves_get(&endpoint_id) {
        return method_not_allowed().await;
    }
    answer(
        state,
        endpoint_id,
        http::Method::GET,
        query,
        client.map(|Extension(c)| c),
        headers,
        Body::empty(),
    )
    .await
}

async fn receive(
    State(state): State<HttpState>,
    Path(endpoint_id): Path<String>,
    RawQuery(query): RawQuery,
    client: Option<Extension<ClientInfo>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let client = client.map(|Extension(c)| c);
    answer(
        state,
        endpoint_id,
        http::Method::POST,
        query,
        client,
        headers,
        body,
    )
    .await
}

/// `client` is set by the server on every request; absent only where the router is served
/// some other way.
async fn answer(
    state: HttpState,
    endpoint_id: String,
    method: http::Method,
    query: Option<String>,
    client: Option<ClientInfo>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let mut facts = RequestFacts::default();
    // Always the root of a new trace: a `traceparent` a client sends is not taken (providers
    // send none, and anyone could pick the trace an accepted event joins).
    let mut span = state.ingest.traces().span(
        "wharf.ingest",
        SpanKind::Server,
        None,
        vec![
            KeyValue::new("http.request.method", method.as_str().to_owned()),
            KeyValue::new("http.route", "/webhooks/{endpoint_id}"),
        ],
    );
    let trace_context = span.as_ref().map(TraceSpan::traceparent);
    // Whether a refusal before the read leaves body bytes on the connection.
    let body_may_follow = !axum::body::HttpBody::is_end_stream(&body);
    let result = handle(
        &state,
        &endpoint_id,
        method,
        query.as_deref(),
        client.map(|c| c.addr),
        headers,
        body,
        &mut facts,
        trace_context,
    )
    .await;
    let mut response = match &result {
        Ok((outcome, ack)) => outcome_response(outcome, ack.as_ref()),
        Err(e) => error_response(e),
    };
    let limited = match &result {
        Err(IngestError::RateLimited(l)) => Some(l.scope),
        _ => None,
    };
    // A request its client's bucket refused was never read: the connection cannot carry
    // another request. (One refused after verification was read whole.)
    if body_may_follow && limited == Some(LimitScope::Client) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    // What a stranger can cause spends its address's token: every answer but a verified one,
    // a 429 (refused, nothing spent) or the receiver's own 5xx (overload, an outage).
    let verified = facts.secret_version.is_some()
        && !matches!(
            result,
            Err(IngestError::InvalidSignature(_) | IngestError::StaleTimestamp(_))
        );
    let spends = !verified && limited.is_none() && response.status().as_u16() < 500;
    if let Some(c) = client.filter(|_| spends) {
        state.client_limits.charge(c.addr);
    }
    let result = result.map(|(outcome, _)| outcome);
    let (outcome, inbox_id) = match &result {
        Ok(o @ Outcome::Stored(a)) => (o.code(), a.first().map(|a| a.inbox_id().to_string())),
        Ok(o) => (o.code(), None),
        Err(e) => (e.status_and_code().1, None),
    };
    let cause = result.as_ref().err().and_then(IngestError::internal_cause);
    let status = response.status().as_u16();
    let elapsed = started.elapsed();
    let latency_us = elapsed.as_micros() as u64;
    let known = state.ingest.has_endpoint(&endpoint_id);
    let label = if known {
        endpoint_id.as_str()
    } else {
        "_unknown"
    };
    // An unknown id is whatever the client sent: logged as an escaped string field, cut short.
    let logged_endpoint = if known {
        endpoint_id.as_str()
    } else {
        truncate(&endpoint_id, 64)
    };
    state
        .ingest
        .metrics()
        .request(label, outcome, elapsed.as_secs_f64());
    state
        .stats
        .record(known.then_some(endpoint_id.as_str()), outcome, elapsed);
    if let Some(span) = span.as_mut() {
        // What the log line says, less the client and the secret's version.
        span.set("wharf.endpoint", label.to_owned());
        span.set("wharf.outcome", outcome);
        span.set("http.response.status_code", i64::from(status));
        for (key, value) in [
            ("wharf.provider", &facts.adapter),
            ("wharf.adapter_version", &facts.adapter_version),
            ("wharf.event_id", &facts.event_id),
            ("wharf.inbox_id", &inbox_id),
        ] {
            if let Some(value) = value {
                span.set(key, value.clone());
            }
        }
        if status >= 500 {
            span.fail(outcome);
        }
    }
    drop(span);
    let client_addr = client.map(|c| c.addr.to_string()).unwrap_or_default();
    let scheme = client.map_or("", |c| c.scheme());
    // One line per request; 5xx at WARN so operators see sandbox, secret and storage trouble.
    macro_rules! request_line {
        ($level:expr) => {
            tracing::event!(
                target: "wharf::request",
                $level,
                endpoint = logged_endpoint,
                client = client_addr.as_str(),
                scheme,
                outcome,
                status,
                latency_us,
                adapter = facts.adapter.as_deref().unwrap_or(""),
                adapter_version = facts.adapter_version.as_deref().unwrap_or(""),
                secret_version = facts.secret_version.as_deref().unwrap_or(""),
                event_id = facts.event_id.as_deref().unwrap_or(""),
                inbox_id = inbox_id.as_deref().unwrap_or(""),
                cause = cause.as_deref().unwrap_or(""),
                "webhook"
            )
        };
    }
    // A shed request is the receiver working as designed, and a line each at WARN would cost
    // most exactly when the receiver is saturated: those are INFO, and admission says it is
    // shedding at WARN at most once per 10 s.
    let shed = matches!(
        result,
        Err(IngestError::Overloaded | IngestError::GaveWay | IngestError::AtCapacity)
    );
    if status >= 500 && !shed {
        request_line!(tracing::Level::WARN);
    } else {
        request_line!(tracing::Level::INFO);
    }
    response
}

fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// The outcome, and the adapter's fixed acknowledgement if it has one.
#[allow(clippy::too_many_arguments)]
async fn handle(
    state: &HttpState,
    endpoint_id: &str,
    method: http::Method,
    query: Option<&str>,
    client: Option<IpAddr>,
    headers: HeaderMap,
    body: Body,
    facts: &mut RequestFacts,
    trace_context: Option<String>,
) -> Result<(Outcome, Option<Answer>), IngestError> {
    // The client's address must have a token before the body is read (spent only by what
    // fails, in `answer`); the endpoint's and provider's are taken after verification.
    let admitted = state.ingest.admit(endpoint_id)?;
    if let Some(addr) = client {
        state
            .client_limits
            .check(addr, endpoint_id, state.ingest.metrics())
            .map_err(IngestError::RateLimited)?;
    }
    let header_bytes: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len())
        .sum();
    if headers.len() > state.max_headers || header_bytes > state.max_header_bytes {
        return Err(IngestError::HeadersTooLarge);
    }
    if !acceptable_content_type(headers.get(header::CONTENT_TYPE)) {
        return Err(IngestError::UnsupportedMediaType);
    }
    let limit = admitted.max_body_bytes;
    // A declared length over the limit is refused before a byte of the body is read.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err(IngestError::PayloadTooLarge(limit));
    }
    // Memory stays within the budget whatever clients do: bytes are reserved as they arrive,
    // and held until the answer (`body_budget.rs`).
    let (body, _held) = state
        .body_budget
        .read(body, declared, limit, state.ingest.metrics())
        .await?;
    let outcome = state
        .ingest
        .process(
            &admitted,
            method,
            Arc::new(headers),
            query.map(str::to_owned),
            body,
            facts,
            trace_context,
        )
        .await?;
    Ok((outcome, admitted.adapter.info.ack.clone()))
}

/// Webhook bodies are JSON, form-encoded, XML or text; a missing type is allowed because some
/// providers omit it. Anything else (multipart, binary) is refused before the body is read.
fn acceptable_content_type(value: Option<&HeaderValue>) -> bool {
    let Some(value) = value else { return true };
    let Ok(value) = value.to_str() else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "application/json"
            | "application/x-www-form-urlencoded"
            | "text/plain"
            | "application/xml"
            | "text/xml"
    ) || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn outcome_response(outcome: &Outcome, ack: Option<&Answer>) -> Response {
    match outcome {
        // The provider expects exact bytes (Adyen: `[accepted]`) for whatever it need not
        // resend, ignored types included; the ids are in the log.
        Outcome::Stored(_) | Outcome::Ignored(_) if ack.is_some() => {
            fixed_answer(ack.expect("checked"))
        }
        Outcome::Stored(acceptances) => {
            let ids = inbox_ids(acceptances);
            let mut body = json!({"status": outcome.code(), "inbox_id": ids[0]});
            if ids.len() > 1 {
                body["inbox_ids"] = json!(ids);
            }
            (StatusCode::OK, axum::Json(body)).into_response()
        }
        Outcome::Ignored(_) => (
            StatusCode::OK,
            axum::Json(json!({"status": outcome.code()})),
        )
            .into_response(),
        Outcome::Handshake(h) => fixed_answer(h),
    }
}

fn fixed_answer(a: &Answer) -> Response {
    let status = StatusCode::from_u16(a.status).unwrap_or(StatusCode::OK);
    let content_type =
        HeaderValue::from_str(&a.content_type).unwrap_or(HeaderValue::from_static("text/plain"));
    (
        status,
        [(header::CONTENT_TYPE, content_type)],
        a.body.clone(),
    )
        .into_response()
}

fn error_response(e: &IngestError) -> Response {
    let (status, code) = e.status_and_code();
    let message = match e {
        // Public messages never say which check failed beyond the code.
        IngestError::PayloadTooLarge(limit) => format!("body larger than {limit} bytes"),
        other => other.to_string(),
    };
    let mut response = (
        status,
        axum::Json(json!({"error": code, "message": message})),
    )
        .into_response();
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from_static(RETRY_AFTER_SECS),
        );
    }
    // When the bucket that refused will have a token again, in whole seconds.
    if let IngestError::RateLimited(limited) = e {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, limited.retry_after_secs().into());
    }
    // The body was left unread (or half read): the connection cannot carry another request.
    if matches!(
        e,
        IngestError::Overloaded
            | IngestError::GaveWay
            | IngestError::BodyTimeout
            | IngestError::TooSlow
            | IngestError::AtConnectionCap
    ) {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

impl IntoResponse for IngestError {
    fn into_response(self) -> Response {
        error_response(&self)
    }
}
