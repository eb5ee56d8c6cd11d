//! Signing in with a token of the admin set or the viewer set, and signing out. Failed
//! attempts are limited per client address and logged without the token; the session cookie
//! is `HttpOnly`, `SameSite=Strict`, scoped to `/console`, and `Secure` over HTTPS.

use askama::Template;
use axum::Form;
use axum::extract::{Extension, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

use super::guard::{COOKIE, Signed, session_cookie};
use super::page::{ConsoleError, html, html_with};
use super::session::Role;
use super::state::Console;
use crate::http::{ClientInfo, token_versions};

#[derive(Template)]
#[template(path = "console/signin.html")]
struct SignInPage {
    error: Option<String>,
}

pub async fn page(State(console): State<Console>, headers: axum::http::HeaderMap) -> Response {
    let now = console.0.clock.now();
    if session_cookie(&headers).is_some_and(|c| console.0.sessions.get(&c, now).is_some()) {
        return Redirect::to("/console/").into_response();
    }
    html(&SignInPage { error: None })
}

#[derive(Deserialize)]
pub struct SignInForm {
    #[serde(default)]
    token: String,
}

/// Which role and version a token belongs to, every version of both sets compared.
fn role_of(console: &Console, token: &[u8]) -> Result<Option<(Role, String)>, ConsoleError> {
    let c = &console.0;
    let now = c.clock.now();
    let digest = Sha256::digest(token);
    let mut found = None;
    let sets = [
        (Role::Admin, Some(&c.admin_set)),
        (Role::Viewer, c.viewer_set.as_ref()),
    ];
    for (role, set) in sets {
        let Some(set) = set else { continue };
        let keys = match token_versions(c.keys(), set, now) {
            Ok(keys) => keys,
            Err(e) if role == Role::Admin => {
                tracing::error!(error = %e, "console sign-in refused: no usable admin token");
                return Err(ConsoleError::TokensUnavailable);
            }
            Err(e) => {
                tracing::error!(error = %e, "console: the viewer token set cannot be used");
                continue;
            }
        };
        for k in keys {
            let same = bool::from(Sha256::digest(&k.key).ct_eq(&digest));
            if same && found.is_none() {
                found = Some((role, k.version));
            }
        }
    }
    Ok(found)
}

pub async fn sign_in(
    State(console): State<Console>,
    client: Option<Extension<ClientInfo>>,
    Form(form): Form<SignInForm>,
) -> Result<Response, ConsoleError> {
    let c = &console.0;
    let addr = client.as_ref().map(|c| c.0.addr);
    if let Some(addr) = addr
        && let Err(limited) = c
            .signin_limits
            .check(addr, "(console)", c.http.ingest.metrics())
    {
        tracing::warn!(client = %addr, "console sign-in refused: too many failed attempts");
        return Err(ConsoleError::TooManySignIns {
            retry_after_secs: limited.retry_after_secs(),
        });
    }
    let token = form.token.trim().as_bytes();
    let Some((role, version)) = role_of(&console, token)? else {
        if let Some(addr) = addr {
            c.signin_limits.charge(addr);
        }
        tracing::warn!(client = ?addr, "console sign-in refused: wrong token");
        let page = SignInPage {
            error: Some("That token is not valid.".into()),
        };
        return Ok(html_with(StatusCode::UNAUTHORIZED, &page));
    };
    let digest: [u8; 32] = Sha256::digest(token).into();
    let (cookie, session) = c.sessions.start(role, version, digest, c.clock.now());
    tracing::info!(target: "wharf::audit", client = ?addr, role = role.as_str(),
        version = %session.version, "console: signed in");
    let mut response = Redirect::to("/console/").into_response();
    let secure = if c.tls { "; Secure" } else { "" };
    let value = format!(
        "{COOKIE}={cookie}; Path=/console; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
        c.sessions.lifetime().as_secs()
    );
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&value).expect("cookie text is ASCII"),
    );
    Ok(response)
}

pub async fn sign_out(
    State(console): State<Console>,
    Extension(signed): Extension<Signed>,
) -> Response {
    console.0.sessions.end(&signed.cookie);
    tracing::info!(target: "wharf::audit", role = signed.session.role.as_str(),
        version = %signed.session.version, "console: signed out");
    let mut response = Redirect::to("/console/signin").into_response();
    let secure = if console.0.tls { "; Secure" } else { "" };
    let value = format!("{COOKIE}=; Path=/console; HttpOnly; SameSite=Strict; Max-Age=0{secure}");
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_str(&value).expect("cookie text is ASCII"),
    );
    response
}
