//! The admin listener: liveness, readiness and metrics, open to whoever reaches it; with an
//! admin token configured, the admin API and the adapter files' status behind it
//! (`admin_api`). Any other path is a JSON 404.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::admin_api::{AdminApi, not_found};
use super::public::HttpState;
use crate::processing::Processing;
use crate::support::metrics::Metrics;

/// The OpenMetrics text that `Metrics::render` writes (typed counters, `_total`, `# EOF`).
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `console` (its own routes and guards, under `/console/`) joins the listener when given.
pub fn admin_router(state: HttpState, api: Option<AdminApi>, console: Option<Router>) -> Router {
    let open = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(metrics))
        .with_state(state.clone());
    let Some(api) = api else {
        return open.fallback(not_found);
    };
    let adapters = Router::new()
        .route("/admin/adapters", get(adapter_status))
        .with_state(state);
    let routes = open.merge(api.protect(adapters));
    match console {
        Some(console) => routes.merge(console),
        None => routes,
    }
    .fallback(not_found)
}

/// Every adapter file and what became of it (`wharf adapter status` reads this).
async fn adapter_status(State(state): State<HttpState>) -> Response {
    let adapters = state.ingest.adapters();
    let files: Vec<_> = adapters.files().values().collect();
    axum::Json(files).into_response()
}

async fn metrics(State(state): State<HttpState>) -> Response {
    metrics_text(state.ingest.metrics())
}

fn metrics_text(metrics: &Metrics) -> Response {
    let content_type = [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)];
    (content_type, metrics.render()).into_response()
}

/// The admin listener of `wharf worker`: liveness, readiness (its database pool answers) and
/// its own metrics; with an admin token, the admin API too.
pub fn processing_admin_router(processing: Arc<Processing>, api: Option<AdminApi>) -> Router {
    let open = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(p): State<Arc<Processing>>| async move {
                match p.ping().await {
                    Ok(()) => (StatusCode::OK, "ready").into_response(),
                    Err(e) => {
                        tracing::warn!(error = %e, "not ready: database");
                        (StatusCode::SERVICE_UNAVAILABLE, "database unavailable").into_response()
                    }
                }
            }),
        )
        .route(
            "/metrics",
            get(|State(p): State<Arc<Processing>>| async move { metrics_text(&p.metrics) }),
        )
        .with_state(processing);
    match api {
        Some(api) => open.merge(api.protect(Router::new())),
        None => open,
    }
    .fallback(not_found)
}

/// Ready when the database answers and the secrets file is readable.
async fn ready(State(state): State<HttpState>) -> Response {
    if let Err(e) = state.ingest.store().ping().await {
        tracing::warn!(error = %e, "not ready: database");
        return (StatusCode::SERVICE_UNAVAILABLE, "database unavailable").into_response();
    }
    if state.ingest.secrets_readable().is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "secrets file unreadable").into_response();
    }
    (StatusCode::OK, "ready").into_response()
}
