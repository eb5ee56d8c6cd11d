//! The console's one stylesheet, compiled into the binary.

use axum::http::header;
use axum::response::IntoResponse;

const CSS: &str = include_str!("../../assets/console.css");

pub async fn css() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        CSS,
    )
}
