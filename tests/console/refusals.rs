//! State changes refused without the session's CSRF token or from a viewer (raw form posts
//! with the browser's session cookie), and sessions that end: a token version expired or
//! removed from the secrets file, a forged or deleted cookie, all sent back to sign-in.

use std::time::Duration;

use crate::support::app::{TestApp, http_route_toml};
use crate::support::browser::Browser;
use crate::support::database::{one_row, scalar_i64};
use crate::support::receiver::{Receiver, always};

use super::session::*;

/// Asserts a 403 page with `#error`.
fn assert_refused(answer: &crate::support::http::Answer, what: &str) {
    assert_eq!(answer.status, 403, "{what}: {answer:?}");
    assert!(has_id(&answer.body, "error"), "{what}: {}", answer.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_change_without_the_csrf_token_or_from_a_viewer_is_refused() {
    let receiver = Receiver::start(always(500, Duration::ZERO)).await;
    let app = console_app()
        .append_toml(&http_route_toml(&receiver.url, "max_attempts = 1"))
        .start()
        .await;
    let inbox_id = app.accept_stripe("evt_console_csrf").await;
    app.wait_count("deliveries", "status = 'FAILED'", 1).await;
    let delivery: String = sqlx::query_scalar("SELECT delivery_id::text FROM deliveries")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let reveal = format!("/events/{inbox_id}/reveal");
    let replay = format!("/deliveries/{delivery}/replay");
    let audited = "SELECT count(*) FROM operator_audit";

    let admin = admin_browser(&app).await;
    let (cookie, csrf) = (session_cookie(&admin).await, csrf_token(&admin).await);
    assert_refused(
        &raw_post(&app, &reveal, &cookie, &[]).await,
        "reveal, no csrf",
    );
    assert_refused(
        &raw_post(&app, &reveal, &cookie, &[("csrf", "forged")]).await,
        "reveal, forged csrf",
    );
    assert_refused(
        &raw_post(&app, &replay, &cookie, &[]).await,
        "replay, no csrf",
    );
    assert_refused(
        &raw_post(&app, "/deliveries/replay", &cookie, &[("status", "FAILED")]).await,
        "bulk replay, no csrf",
    );

    let viewer = viewer_browser(&app).await;
    let (viewer_cookie, viewer_csrf) = (session_cookie(&viewer).await, csrf_token(&viewer).await);
    assert_refused(
        &raw_post(&app, &replay, &viewer_cookie, &[("csrf", &viewer_csrf)]).await,
        "replay by a viewer",
    );
    assert_refused(
        &raw_post(&app, &replay, &viewer_cookie, &[("csrf", &csrf)]).await,
        "a viewer's session with the admin's csrf token",
    );
    assert_refused(
        &raw_post(&app, &reveal, &viewer_cookie, &[("csrf", &viewer_csrf)]).await,
        "reveal by a viewer",
    );
    viewer.close().await;

    // Nothing changed: no audit row, the delivery still FAILED and not sent again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(scalar_i64(&app.db, audited).await, 0);
    let (status, attempts): (String, i32) =
        one_row(&app.db, "SELECT status, attempt_count FROM deliveries").await;
    assert_eq!((status.as_str(), attempts), ("FAILED", 1));
    assert_eq!(receiver.arrived(), 1);

    // The same request with the session's token is served: the token made the difference.
    let revealed = raw_post(&app, &reveal, &cookie, &[("csrf", &csrf)]).await;
    assert_eq!(revealed.status, 200, "{revealed:?}");
    assert!(
        revealed.body.contains("evt_console_csrf"),
        "{}",
        revealed.body
    );
    assert_eq!(scalar_i64(&app.db, audited).await, 1);
    admin.close().await;
    app.shutdown().await;
}

/// Asserts that `browser`, opening the events page, lands on sign-in.
async fn assert_sent_to_sign_in(browser: &Browser, app: &TestApp, why: &str) {
    browser.goto(&console_url(app, "/events")).await;
    assert_eq!(browser.path().await, "/console/signin", "{why}");
    browser.find("form#signin").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_session_is_sent_back_to_sign_in() {
    const SHORT_TOKEN: &str = "test-viewer-short-lived-token-0123456789ab";
    const LIFETIME: Duration = Duration::from_secs(8);
    // The browser first: waiting for a free slot must not eat the token's short life.
    let browser = Browser::start().await;
    let expires = time::OffsetDateTime::now_utc() + LIFETIME;
    let expires_at = expires
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let app = console_app_with(&format!(
        "\n[[{VIEWER_SET}]]\nversion = \"short\"\nvalue = \"{SHORT_TOKEN}\"\nexpires_at = \"{expires_at}\"\n"
    ))
    .start()
    .await;

    // A token version that expires ends the sessions it opened.
    sign_in(&browser, &app, SHORT_TOKEN, "viewer").await;
    browser.goto(&console_url(&app, "/events")).await;
    assert_eq!(browser.path().await, "/console/events");
    let until = expires - time::OffsetDateTime::now_utc() + time::Duration::seconds(1);
    tokio::time::sleep(until.try_into().unwrap_or(Duration::ZERO)).await;
    assert_sent_to_sign_in(&browser, &app, "the token version expired").await;
    browser.screenshot("signin-expired").await;
    submit_token(&browser, &app, SHORT_TOKEN).await;
    assert_eq!(
        browser.path().await,
        "/console/signin",
        "an expired token signs nobody in"
    );

    // A token version removed from the secrets file (a rotation to v2) ends its sessions.
    sign_in(&browser, &app, VIEWER_TOKEN, "viewer").await;
    let secrets = std::fs::read_to_string(&app.config.secrets_path).unwrap();
    let rotated = secrets.replace(
        &viewer_secrets(),
        &format!("\n[[{VIEWER_SET}]]\nversion = \"v2\"\nvalue = \"{VIEWER_TOKEN}-v2\"\n"),
    );
    assert_ne!(secrets, rotated);
    std::fs::write(&app.config.secrets_path, rotated).unwrap();
    reload_until_signed_out(&browser, &app).await;
    sign_in(&browser, &app, &format!("{VIEWER_TOKEN}-v2"), "viewer").await;

    // A forged cookie in place of the session's, then none at all.
    browser.delete_cookie(COOKIE).await;
    browser
        .set_cookie(COOKIE, "forged-session", "/console")
        .await;
    assert_sent_to_sign_in(&browser, &app, "a forged session cookie").await;
    sign_in(&browser, &app, &format!("{VIEWER_TOKEN}-v2"), "viewer").await;
    browser.delete_cookie(COOKIE).await;
    assert_sent_to_sign_in(&browser, &app, "no session cookie").await;
    browser.close().await;
    app.shutdown().await;
}

/// Reopens the events page until it sends the browser to sign-in (the secrets file is
/// watched: the change applies within moments, not at once).
async fn reload_until_signed_out(browser: &Browser, app: &TestApp) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        browser.goto(&console_url(app, "/events")).await;
        if browser.path().await == "/console/signin" {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the removed token version's session still served after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
