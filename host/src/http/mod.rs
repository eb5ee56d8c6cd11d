//! HTTP: the public webhook route and the admin routes, and what the public listener needs
//! below them.
//!
//! - `public`: `POST /webhooks/{id}`: bounds, the exact raw bytes, the answer and its log line
//! - `body_budget`: the bytes bodies hold together, reserved as they arrive; slow ones give way
//! - `admin`: `/healthz`, `/readyz`, `/metrics`, and `wharf worker`'s admin
//! - `admin_api`: `/admin/*` (events, deliveries, adapters) behind the admin bearer token
//! - `listener`: accept, bound and serve connections; at the cap, make room or shed
//! - `connections`: the open connections, so that at the cap an idle one makes room
//! - `client`: who sent a request (`ClientInfo`): the peer, or what a trusted proxy reports
//! - `tls`: HTTPS from certificate and key files, swapped when they change (`CertStore`)

mod admin;
mod admin_api;
mod body_budget;
mod client;
mod connections;
mod listener;
mod public;
mod tls;

pub use admin::{METRICS_CONTENT_TYPE, admin_router, processing_admin_router};
pub use admin_api::{
    AdminApi, AdminTokenError, MIN_TOKEN_BYTES, UnusableTokens, admin_tokens, client_token,
    token_versions,
};
pub use body_budget::BodyBudget;
pub use client::{ClientInfo, TrustedProxies};
pub use listener::{ConnLimits, Listener, SHED_WITHIN, serve_on};
pub use public::{HttpState, public_router};
pub use tls::CertStore;
