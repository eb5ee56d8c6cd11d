//! What stands in front of every console page: the response headers that keep it from being
//! framed or scripted, the session check (a missing, expired or revoked session goes back to
//! sign-in), the CSRF token on every form that changes something, and the admin-only actions.

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::page::ConsoleError;
use super::session::{Role, Session};
use super::state::Console;
use crate::http::token_versions;

pub const COOKIE: &str = "wharf_console";
/// Console forms are a few fields: anything larger is not one of ours.
const MAX_FORM_BYTES: usize = 64 << 10;

/// No script at all (the pages need none), styles from our own stylesheet, forms only to us,
/// never in a frame, no referrer leaving with an event id in the URL, and nothing cached: a
/// page can hold a decrypted payload.
pub async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    for (name, value) in [
        (
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
             frame-ancestors 'none'; base-uri 'none'",
        ),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::CACHE_CONTROL, "no-store"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

/// The signed-in session a page runs under (an extension the guard sets).
#[derive(Clone)]
pub struct Signed {
    pub session: Session,
    pub cookie: String,
}

/// The console cookie's value, if the request carries one.
pub fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// Lets the request through with its `Signed` session, or sends it to sign-in: no cookie, an
/// unknown or expired session, or one whose token version has expired or left the set.
pub async fn signed_in(
    State(console): State<Console>,
    mut request: Request,
    next: Next,
) -> Response {
    let c = &console.0;
    let now = c.clock.now();
    let Some(cookie) = session_cookie(request.headers()) else {
        return to_sign_in();
    };
    let Some(session) = c.sessions.get(&cookie, now) else {
        return to_sign_in();
    };
    let set = match session.role {
        Role::Admin => Some(c.admin_set.as_str()),
        Role::Viewer => c.viewer_set.as_deref(),
    };
    let still_valid = set
        .and_then(|set| token_versions(c.keys(), set, now).ok())
        .is_some_and(|keys| {
            keys.iter().any(|k| {
                k.version == session.version
                    && bool::from(Sha256::digest(&k.key).ct_eq(&session.token_digest))
            })
        });
    if !still_valid {
        tracing::info!(role = session.role.as_str(), version = %session.version,
            "console: session ended, its token version expired or was removed");
        c.sessions.end(&cookie);
        return to_sign_in();
    }
    request.extensions_mut().insert(Signed { session, cookie });
    next.run(request).await
}

fn to_sign_in() -> Response {
    Redirect::to("/console/signin").into_response()
}

/// Every console body (sign-in and the forms) is read whole, within the body deadline and a
/// small size, before any handler runs: a slow or endless body cannot hold the connection, or
/// a pool connection behind it.
pub async fn whole_form(State(console): State<Console>, request: Request, next: Next) -> Response {
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, MAX_FORM_BYTES);
    match tokio::time::timeout(console.0.body_deadline, read).await {
        Ok(Ok(bytes)) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
        Ok(Err(_)) => ConsoleError::BadRequest("the form is too large".into()).into_response(),
        Err(_) => ConsoleError::BodyTimeout.into_response(),
    }
}

/// Every POST carries the session's CSRF token in its form (`csrf`), checked before any
/// handler (the body is already whole: `whole_form` stands in front).
pub async fn posts_carry_csrf(request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let Some(signed) = request.extensions().get::<Signed>().cloned() else {
        return to_sign_in();
    };
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_FORM_BYTES).await else {
        return ConsoleError::BadRequest("the form is too large".into()).into_response();
    };
    let fields: Vec<(String, String)> = serde_urlencoded::from_bytes(&bytes).unwrap_or_default();
    let presented = fields
        .iter()
        .find(|(k, _)| k == "csrf")
        .map(|(_, v)| v.as_bytes());
    let valid = presented.is_some_and(|p| bool::from(p.ct_eq(signed.session.csrf.as_bytes())));
    if !valid {
        tracing::warn!(path = %parts.uri.path(), role = signed.session.role.as_str(),
            "console: a form without its CSRF token was refused");
        return ConsoleError::Forbidden(
            "this form is not from this session (missing or wrong CSRF token): reload the page"
                .into(),
        )
        .into_response();
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Admin actions (reveal, replay): a viewer is refused.
pub async fn admin_only(request: Request, next: Next) -> Response {
    match request.extensions().get::<Signed>() {
        Some(s) if s.session.role == Role::Admin => next.run(request).await,
        Some(s) => {
            tracing::warn!(path = %request.uri().path(), version = %s.session.version,
                "console: a viewer asked for an admin action");
            ConsoleError::Forbidden("viewers cannot reveal payloads or replay".into())
                .into_response()
        }
        None => to_sign_in(),
    }
}
