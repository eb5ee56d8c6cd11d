//! HTTP: the public webhook route and the admin routes.
//!
//! - `public`: `POST /webhooks/{id}`: bounds, the exact raw bytes, the answer and its log line
//! - `admin`: `/healthz`, `/readyz`, `/metrics`, `/admin/adapters`, and `wharf worker`'s admin

mod admin;
mod public;

pub use admin::{METRICS_CONTENT_TYPE, admin_router, processing_admin_router};
pub use public::{HttpState, public_router};
