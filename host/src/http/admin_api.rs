//! The admin API: the operator queries of `wharf events` and `wharf deliveries` as JSON, and
//! `/admin/adapters`, behind a bearer token.
//!
//! Tokens are the unexpired `value`s of the secret set `[server] admin_token_secret` names,
//! read from the live secrets file at each request, so a rotation (a new version, the old one
//! given an `expires_at`) applies without a restart. A presented token is compared with each
//! of them in constant time (SHA-256 digests, so lengths leak nothing either). Without the
//! setting no route here exists: the admin listener serves health, readiness and metrics
//! only, and `/admin/*` is 404. Payloads are never sent.
//!
//! Errors are `{"error": code, "message": ...}`, like the public API's; database causes are
//! logged, never sent.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use subtle::ConstantTimeEq;
use time::OffsetDateTime;
use uuid::Uuid;

use super::client::ClientInfo;
use crate::adapter::KeyEncoding;
use crate::config::Config;
use crate::ingest::{
    HostSecretError, HostSecretUse, KeyEncodings, KeySource, TrustedKey, host_secret_values,
    redact_db,
};
use crate::operator::audit::{self, Actor};
use crate::operator::deliveries::{self, ReplayRequest};
use crate::operator::{DEFAULT_REPLAY_LIMIT, MAX_COUNTED, OperatorError, check_limit};
use crate::operator::{events, lookup};
use crate::support::clock::SharedClock;

/// Tokens are compared as raw bytes.
const ENCODINGS: KeyEncodings = KeyEncodings {
    secret: KeyEncoding::Raw,
    public_key: None,
};
/// A token shorter than this is refused (at start, and fails closed later): a guessable one
/// would open replay to anyone who can reach the listener.
pub const MIN_TOKEN_BYTES: usize = 32;
const MAX_TOKEN_BYTES: usize = 1024;
/// Admin bodies are small JSON (a replay's filter and ids).
const MAX_ADMIN_BODY_BYTES: usize = 1 << 20;
/// A page when the query names no `limit`.
const DEFAULT_PAGE: i64 = 100;
/// What `WWW-Authenticate` names.
const REALM: &str = "Bearer realm=\"wharf-admin\"";

/// Why the token set cannot authenticate anyone: the set and version named, never a value.
#[derive(Debug, thiserror::Error)]
pub enum AdminTokenError {
    /// The set itself: missing, expired, unreadable, empty.
    #[error(transparent)]
    Set(HostSecretError),
    #[error(
        "admin token secret set {set:?} version {version:?}: a token is {MIN_TOKEN_BYTES} to \
         {MAX_TOKEN_BYTES} printable ASCII characters without spaces (e.g. `openssl rand -hex \
         32`)"
    )]
    Unfit { set: String, version: String },
}

/// The admin API cannot start: its token set cannot authenticate anyone.
#[derive(Debug, thiserror::Error)]
#[error("[server] admin_token_secret: {cause} ({})", secrets_file.display())]
pub struct UnusableTokens {
    cause: AdminTokenError,
    secrets_file: PathBuf,
}

/// The set's unexpired tokens at `now`, or why it cannot authenticate anyone.
pub fn admin_tokens(
    source: &dyn KeySource,
    set: &str,
    now: OffsetDateTime,
) -> Result<Vec<Vec<u8>>, AdminTokenError> {
    Ok(token_versions(source, set, now)?
        .into_iter()
        .map(|k| k.key)
        .collect())
}

/// The set's unexpired tokens at `now` with the version each comes from (a console session
/// remembers its version, and ends when that version does).
pub fn token_versions(
    source: &dyn KeySource,
    set: &str,
    now: OffsetDateTime,
) -> Result<Vec<TrustedKey>, AdminTokenError> {
    let keys = host_secret_values(
        source,
        set,
        ENCODINGS,
        now,
        &HostSecretUse {
            noun: "admin token secret set",
            undecodable: "is empty",
            public_key: "tokens are `value`s",
            value: "value",
        },
    )
    .map_err(AdminTokenError::Set)?;
    for k in &keys {
        let printable = k.key.iter().all(|b| (0x21..=0x7e).contains(b));
        if !(MIN_TOKEN_BYTES..=MAX_TOKEN_BYTES).contains(&k.key.len()) || !printable {
            return Err(AdminTokenError::Unfit {
                set: set.to_owned(),
                version: k.version.clone(),
            });
        }
    }
    Ok(keys)
}

/// The token a client sends: the set's newest unexpired version (`wharf adapter status`).
pub fn client_token(
    source: &dyn KeySource,
    set: &str,
    now: OffsetDateTime,
) -> Result<String, AdminTokenError> {
    let tokens = admin_tokens(source, set, now)?;
    let first = tokens.into_iter().next().expect("at least one");
    Ok(String::from_utf8(first).expect("checked printable ASCII"))
}

/// What the admin API needs: its own small pool (its queries never take a connection from
/// acknowledgements or processing), the live secrets and the set of tokens.
#[derive(Clone)]
pub struct AdminApi {
    pool: PgPool,
    keys: Arc<dyn KeySource>,
    set: Arc<str>,
    clock: SharedClock,
    body_deadline: Duration,
}

impl AdminApi {
    /// The API when `[server] admin_token_secret` is set (its tokens checked now: a set that
    /// cannot authenticate anyone stops the start), else none.
    pub fn from_config(
        config: &Config,
        keys: Option<Arc<dyn KeySource>>,
        clock: SharedClock,
    ) -> anyhow::Result<Option<Self>> {
        let Some(set) = &config.server.admin_token_secret else {
            return Ok(None);
        };
        let keys = keys.ok_or_else(|| anyhow::anyhow!("the admin API needs the secrets file"))?;
        admin_tokens(&*keys, set, clock.now()).map_err(|cause| UnusableTokens {
            cause,
            secrets_file: config.secrets.file.clone(),
        })?;
        // Each statement is bounded: a list or replay over a huge table, or a locked row,
        // must not hold one of the two connections for good.
        let options = config
            .database_url()
            .parse::<sqlx::postgres::PgConnectOptions>()?
            .options([(
                "statement_timeout",
                config.server.admin_statement_timeout_ms.to_string(),
            )]);
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(5))
            .connect_lazy_with(options);
        Ok(Some(Self {
            pool,
            keys,
            set: set.as_str().into(),
            clock,
            body_deadline: config.server.body_timeout(),
        }))
    }

    /// The API's pool: the console's queries share it (and its statement timeout).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// `routes` (this listener's own admin routes) and the API's, all behind the token.
    pub fn protect(self, routes: Router) -> Router {
        let api = Router::new()
            .route("/admin/deliveries", get(list_deliveries))
            .route("/admin/deliveries/replay", post(replay_deliveries))
            .route("/admin/deliveries/{id}", get(show_delivery))
            .route("/admin/events", get(list_events))
            .route("/admin/events/replay", post(replay_events))
            .route("/admin/events/{id}", get(show_event))
            .route_layer(middleware::from_fn_with_state(
                self.body_deadline,
                whole_body,
            ))
            .with_state(self.clone());
        routes
            .merge(api)
            .route_layer(middleware::from_fn_with_state(self, require_token))
    }
}

/// Every way an admin request fails, answered in one place.
#[derive(Debug)]
pub enum ApiError {
    BadRequest(String),
    NotFound(String),
    /// No `Authorization: Bearer` header, or a token that is not one of the set's.
    Unauthorized {
        presented: bool,
    },
    /// The token set cannot be read now (the file, the set): nobody can be let in.
    TokensUnavailable,
    /// The database failed or a statement ran past its timeout; the cause is logged.
    Database,
    /// The body did not arrive within the body deadline.
    BodyTimeout,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code, message) = match self {
            Self::BadRequest(m) => (StatusCode::BAD_REQUEST, "bad_request", m),
            Self::NotFound(m) => (StatusCode::NOT_FOUND, "not_found", m),
            Self::Unauthorized { presented } => (
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                if presented {
                    "the bearer token is not valid"
                } else {
                    "send Authorization: Bearer <token>"
                }
                .to_owned(),
            ),
            Self::TokensUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "secrets_unavailable",
                "the admin tokens cannot be read; see the log".to_owned(),
            ),
            Self::Database => (
                StatusCode::SERVICE_UNAVAILABLE,
                "database_unavailable",
                "the database did not answer in time; see the log".to_owned(),
            ),
            Self::BodyTimeout => (
                StatusCode::REQUEST_TIMEOUT,
                "body_timeout",
                "the request body did not arrive in time".to_owned(),
            ),
        };
        let mut response =
            (status, Json(json!({"error": code, "message": message}))).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static(REALM));
        }
        response
    }
}

/// The operator queries' one error: the request's fault is a 400 with its message; the
/// database's is logged and a 503.
impl From<OperatorError> for ApiError {
    fn from(e: OperatorError) -> Self {
        if e.is_invalid() {
            return Self::BadRequest(e.to_string());
        }
        // Through `redact_db`, like every database cause (invariant 8): a constraint's detail
        // can quote a row's values.
        if let OperatorError::Database(db) = &e {
            tracing::warn!(error = %redact_db(db), "admin API: database");
        }
        Self::Database
    }
}

/// The audit row and log line of a replay through the API, naming the client.
async fn audited(
    api: &AdminApi,
    client: &Option<Extension<ClientInfo>>,
    action: &str,
    detail: serde_json::Value,
) -> Result<(), ApiError> {
    let actor = Actor::AdminApi {
        client: client.as_ref().map(|c| c.0.addr),
    };
    tracing::info!(target: "wharf::audit", actor = ?actor, %detail, "{action} through the admin API");
    audit::record(&api.pool, action, &actor, detail).await?;
    Ok(())
}

/// Reads an admin request's body whole, within the body deadline and `MAX_ADMIN_BODY_BYTES`,
/// before its handler runs: a slow or endless body (sent with a valid token) cannot hold the
/// connection and a handler's pool connection open.
async fn whole_body(State(deadline): State<Duration>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, MAX_ADMIN_BODY_BYTES);
    match tokio::time::timeout(deadline, read).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
                .await
        }
        Ok(Err(_)) => ApiError::BadRequest(format!(
            "the body could not be read whole (at most {MAX_ADMIN_BODY_BYTES} bytes)"
        ))
        .into_response(),
        Err(_) => ApiError::BodyTimeout.into_response(),
    }
}

/// A query, body or path axum could not read is a 400 with axum's text.
macro_rules! bad_request_from {
    ($($rejection:ty),*) => {$(
        impl From<$rejection> for ApiError {
            fn from(e: $rejection) -> Self {
                Self::BadRequest(e.body_text())
            }
        }
    )*};
}
bad_request_from!(JsonRejection, QueryRejection, PathRejection);

/// The 404 of every path the admin listener does not serve.
pub async fn not_found() -> Response {
    ApiError::NotFound("no such admin path".into()).into_response()
}

async fn require_token(State(api): State<AdminApi>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim().as_bytes().to_vec());
    let tokens = match admin_tokens(&*api.keys, &api.set, api.clock.now()) {
        Ok(tokens) => tokens,
        Err(e) => {
            tracing::error!(error = %e, "admin API refused: no usable token");
            return ApiError::TokensUnavailable.into_response();
        }
    };
    let Some(presented) = presented else {
        return ApiError::Unauthorized { presented: false }.into_response();
    };
    let digest = Sha256::digest(&presented);
    // Every token compared, whatever matched first.
    let valid = tokens.iter().fold(subtle::Choice::from(0), |ok, t| {
        ok | Sha256::digest(t).ct_eq(&digest)
    });
    if !bool::from(valid) {
        let client = request.extensions().get::<ClientInfo>().map(|c| c.addr);
        tracing::warn!(client = ?client, path = %request.uri().path(),
            "admin API refused: wrong bearer token");
        return ApiError::Unauthorized { presented: true }.into_response();
    }
    next.run(request).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeliveryQuery {
    status: Option<String>,
    target: Option<String>,
    sink: Option<String>,
    endpoint: Option<String>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    since: Option<OffsetDateTime>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    until: Option<OffsetDateTime>,
    after: Option<Uuid>,
    limit: Option<i64>,
}

async fn list_deliveries(
    State(api): State<AdminApi>,
    query: Result<Query<DeliveryQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query?;
    let filter = deliveries::Filter {
        status: q.status,
        target: q.target,
        sink: q.sink,
        endpoint: q.endpoint,
        since: q.since,
        until: q.until,
    }
    .checked()?;
    let page =
        deliveries::list(&api.pool, &filter, q.after, q.limit.unwrap_or(DEFAULT_PAGE)).await?;
    let note = page.remainder_note();
    let mut body = serde_json::to_value(&page).expect("serialisable");
    body["truncated"] = json!(page.next_after.is_some());
    body["total_is_lower_bound"] = json!(page.total > MAX_COUNTED);
    body["note"] = json!(note);
    Ok(Json(body).into_response())
}

async fn show_delivery(
    State(api): State<AdminApi>,
    id: Result<Path<Uuid>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(id) = id?;
    match deliveries::show(&api.pool, id).await? {
        Some(d) => Ok(Json(d).into_response()),
        None => Err(ApiError::NotFound(format!("no delivery {id}"))),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DeliveryReplayBody {
    #[serde(default)]
    ids: Vec<Uuid>,
    status: Option<String>,
    target: Option<String>,
    sink: Option<String>,
    endpoint: Option<String>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    since: Option<OffsetDateTime>,
    #[serde(default, with = "time::serde::rfc3339::option")]
    until: Option<OffsetDateTime>,
    limit: Option<i64>,
    #[serde(default)]
    resend: bool,
    #[serde(default)]
    dry_run: bool,
}

async fn replay_deliveries(
    State(api): State<AdminApi>,
    client: Option<Extension<ClientInfo>>,
    body: Result<Json<DeliveryReplayBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(b) = body?;
    let request = ReplayRequest {
        ids: b.ids,
        filter: deliveries::Filter {
            status: b.status,
            target: b.target,
            sink: b.sink,
            endpoint: b.endpoint,
            since: b.since,
            until: b.until,
        }
        .checked()?,
        limit: b.limit.unwrap_or(DEFAULT_REPLAY_LIMIT),
        resend: b.resend,
        dry_run: b.dry_run,
    };
    let replayed = deliveries::replay(&api.pool, &request).await?;
    if !replayed.dry_run {
        let detail = json!({"requeued": replayed.requeued.len(), "resend": request.resend});
        audited(&api, &client, "deliveries replayed", detail).await?;
    }
    let mut body = serde_json::to_value(&replayed).expect("serialisable");
    body["summary"] = json!(replayed.summary(request.limit));
    Ok(Json(body).into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventQuery {
    status: Option<String>,
    endpoint: Option<String>,
    limit: Option<i64>,
}

/// Newest first, at most `limit`, and how many matched in all.
async fn list_events(
    State(api): State<AdminApi>,
    query: Result<Query<EventQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query?;
    let limit = check_limit(q.limit.unwrap_or(DEFAULT_PAGE))?;
    let filter = events::Filter {
        status: q.status,
        endpoint: q.endpoint,
        limit,
    }
    .checked()?;
    let page = events::list(&api.pool, &filter).await?;
    let note = page.remainder_note("limit", limit);
    Ok(Json(json!({
        "events": page.events,
        "total": page.total,
        "total_is_lower_bound": page.total > MAX_COUNTED,
        "limit": limit,
        "truncated": note.is_some(),
        "note": note,
    }))
    .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShowQuery {
    endpoint: Option<String>,
}

/// One event without its payload: the API never sends one (`wharf events show --payload`
/// on the host does, and logs that it did). `{id}` is the inbox id or the provider's event id
/// (`?endpoint=` picks among endpoints); several matches are 409 with each one listed.
async fn show_event(
    State(api): State<AdminApi>,
    id: Result<Path<String>, PathRejection>,
    query: Result<Query<ShowQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Path(id) = id?;
    let Query(q) = query?;
    let found = lookup::named(&api.pool, &id, q.endpoint.as_deref()).await?;
    let inbox_id = match found.as_slice() {
        [one] => one.inbox_id,
        [] => return Err(ApiError::NotFound(format!("no event {id}"))),
        several => {
            let body = json!({
                "error": "ambiguous",
                "message": format!("{id} names {} events: name one by its inbox id, or \
                                    its endpoint with ?endpoint=", several.len()),
                "events": several,
            });
            return Ok((StatusCode::CONFLICT, Json(body)).into_response());
        }
    };
    match events::show(&api.pool, inbox_id, None).await? {
        Some(e) => Ok(Json(e).into_response()),
        None => Err(ApiError::NotFound(format!("no event {id}"))),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventReplayBody {
    #[serde(default)]
    ids: Vec<Uuid>,
    status: Option<String>,
    endpoint: Option<String>,
    /// The most events the filter selects, oldest first (checked even without a filter).
    limit: Option<i64>,
    #[serde(default)]
    resend: bool,
    #[serde(default)]
    dry_run: bool,
}

async fn replay_events(
    State(api): State<AdminApi>,
    client: Option<Extension<ClientInfo>>,
    body: Result<Json<EventReplayBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(b) = body?;
    let filtered = b.status.is_some() || b.endpoint.is_some();
    if b.ids.is_empty() && !filtered {
        return Err(ApiError::BadRequest(
            "name event ids, or select with status or endpoint".into(),
        ));
    }
    let filter = events::Filter {
        status: b.status,
        endpoint: b.endpoint,
        limit: check_limit(b.limit.unwrap_or(DEFAULT_REPLAY_LIMIT))?,
    }
    .checked()?;
    let selected = events::selection(&api.pool, b.ids, filtered.then_some(&filter)).await?;
    let replayed = events::replay_or_count(&api.pool, &selected.ids, b.resend, b.dry_run).await?;
    if !b.dry_run {
        let detail = json!({"events": replayed.events, "deliveries": replayed.deliveries,
            "resend": b.resend});
        audited(&api, &client, "events replayed", detail).await?;
    }
    Ok(Json(json!({
        "dry_run": b.dry_run,
        "matched": selected.matched,
        "selected": selected.ids.len(),
        "events": replayed.events,
        "deliveries": replayed.deliveries,
    }))
    .into_response())
}
