//! What every page shares: the frame around it (`Chrome`: role, CSRF token, which section),
//! rendering a template, and `ConsoleError`, the one way a page fails, answered as HTML.

use askama::Template;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::session::{Role, Session};
use crate::ingest::redact_db;
use crate::operator::OperatorError;

/// The frame of a signed-in page.
pub struct Chrome {
    pub role: &'static str,
    pub admin: bool,
    pub csrf: String,
    /// The nav entry to mark: `overview`, `events`, `deliveries`, `adapters`, `endpoints`.
    pub section: &'static str,
    pub title: String,
}

impl Chrome {
    pub fn new(session: &Session, section: &'static str, title: impl Into<String>) -> Self {
        Self {
            role: session.role.as_str(),
            admin: session.role == Role::Admin,
            csrf: session.csrf.clone(),
            section,
            title: title.into(),
        }
    }
}

/// A rendered page; a template that fails to render is a 500 (its cause logged).
pub fn html(page: &impl Template) -> Response {
    html_with(StatusCode::OK, page)
}

pub fn html_with(status: StatusCode, page: &impl Template) -> Response {
    match page.render() {
        Ok(body) => (
            status,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            body,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "console: a page did not render");
            (StatusCode::INTERNAL_SERVER_ERROR, "the page did not render").into_response()
        }
    }
}

/// A form field's text, trimmed; `None` when empty (a form's empty input filters nothing).
pub fn some(text: &str) -> Option<String> {
    let t = text.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// A time typed in a form: RFC 3339, or a browser's `datetime-local` (taken as UTC).
pub fn form_time(name: &str, text: &str) -> Result<Option<OffsetDateTime>, ConsoleError> {
    let Some(text) = some(text) else {
        return Ok(None);
    };
    if let Ok(at) = OffsetDateTime::parse(&text, &Rfc3339) {
        return Ok(Some(at));
    }
    let local = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]");
    let local_secs =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    time::PrimitiveDateTime::parse(&text, &local)
        .or_else(|_| time::PrimitiveDateTime::parse(&text, &local_secs))
        .map(|at| Some(at.assume_utc()))
        .map_err(|_| {
            ConsoleError::BadRequest(format!(
                "{name}: {text:?} is not a time (2026-12-05T10:00:00Z, or 2026-12-05T10:00 in UTC)"
            ))
        })
}

/// A time as pages show it: RFC 3339, UTC, to the second.
pub fn when(at: OffsetDateTime) -> String {
    at.replace_nanosecond(0)
        .unwrap_or(at)
        .to_offset(time::UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_default()
}

pub fn when_opt(at: Option<OffsetDateTime>) -> String {
    at.map(when).unwrap_or_default()
}

#[derive(Template)]
#[template(path = "console/error.html")]
struct ErrorPage<'a> {
    status: u16,
    reason: &'a str,
    message: &'a str,
}

/// Every way a console request fails.
#[derive(Debug)]
pub enum ConsoleError {
    BadRequest(String),
    NotFound(String),
    /// A viewer asked for an admin's action, or a form came without its CSRF token.
    Forbidden(String),
    TooManySignIns {
        retry_after_secs: u64,
    },
    /// The database failed or ran past the admin statement timeout; the cause is logged.
    Database,
    /// The token sets cannot be read now: nobody can be let in.
    TokensUnavailable,
    BodyTimeout,
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let (status, message) = match &self {
            Self::BadRequest(m) => (StatusCode::BAD_REQUEST, m.clone()),
            Self::NotFound(m) => (StatusCode::NOT_FOUND, m.clone()),
            Self::Forbidden(m) => (StatusCode::FORBIDDEN, m.clone()),
            Self::TooManySignIns { retry_after_secs } => (
                StatusCode::TOO_MANY_REQUESTS,
                format!(
                    "too many failed sign-ins from this address; try again in {retry_after_secs} s"
                ),
            ),
            Self::Database => (
                StatusCode::SERVICE_UNAVAILABLE,
                "the database did not answer in time; see the log".to_owned(),
            ),
            Self::TokensUnavailable => (
                StatusCode::SERVICE_UNAVAILABLE,
                "the console's tokens cannot be read; see the log".to_owned(),
            ),
            Self::BodyTimeout => (
                StatusCode::REQUEST_TIMEOUT,
                "the form did not arrive in time".to_owned(),
            ),
        };
        let page = ErrorPage {
            status: status.as_u16(),
            reason: status.canonical_reason().unwrap_or(""),
            message: &message,
        };
        let mut response = html_with(status, &page);
        if let Self::TooManySignIns { retry_after_secs } = self {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from(retry_after_secs.max(1)),
            );
        }
        response
    }
}

/// The request's fault is a 400 with its message; the database's is logged and a 503.
impl From<OperatorError> for ConsoleError {
    fn from(e: OperatorError) -> Self {
        if e.is_invalid() {
            return Self::BadRequest(e.to_string());
        }
        if let OperatorError::Database(db) = &e {
            tracing::warn!(error = %redact_db(db), "console: database");
        }
        Self::Database
    }
}

impl From<sqlx::Error> for ConsoleError {
    fn from(e: sqlx::Error) -> Self {
        OperatorError::from(e).into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_times_are_rfc3339_or_a_browsers_local_time_taken_as_utc() {
        let at = |t| form_time("since", t).unwrap().map(|t| t.unix_timestamp());
        assert_eq!(at(""), None);
        assert_eq!(at("2026-12-05T10:00:00Z"), Some(1_796_464_800));
        assert_eq!(at("2026-12-05T11:00:00+01:00"), Some(1_796_464_800));
        assert_eq!(at("2026-12-05T10:00"), Some(1_796_464_800));
        assert_eq!(at("2026-12-05T10:00:30"), Some(1_796_464_830));
        let error = form_time("until", "yesterday").unwrap_err();
        assert!(matches!(error, ConsoleError::BadRequest(m) if m.starts_with("until:")));
    }
}
