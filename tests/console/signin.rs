//! Sign-in refused with a wrong token and accepted with the right one; the session cookie's
//! attributes; every page of the navigation (screenshots); sign-out ends the session; the
//! security headers.

use crate::support::app::TEST_ADMIN_TOKEN;
use crate::support::browser::Browser;
use crate::support::signing::{STRIPE_OLD_SECRET, STRIPE_SECRET};

use super::session::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_in_is_refused_with_a_wrong_token_and_accepted_with_the_right_one() {
    let app = console_app().start().await;
    let browser = Browser::start().await;

    // Signed out, any page sends the browser to sign-in.
    browser.goto(&console_url(&app, "/events")).await;
    assert_eq!(browser.path().await, "/console/signin");
    assert_eq!(
        browser.attr("#token", "type").await.as_deref(),
        Some("password")
    );
    browser.screenshot("signin").await;

    submit_token(&browser, &app, "not-the-admin-token").await;
    assert_eq!(browser.path().await, "/console/signin");
    assert!(!browser.text("#signin-error").await.is_empty());
    assert!(
        browser.cookie(COOKIE).await.is_none(),
        "no session for a wrong token"
    );
    assert!(!browser.source().await.contains("not-the-admin-token"));
    browser.screenshot("signin-refused").await;
    let refused = raw_post(&app, "/signin", "", &[("token", "not-the-admin-token")]).await;
    assert_eq!(refused.status, 401, "{refused:?}");
    assert!(refused.body.contains("signin-error"), "{}", refused.body);
    assert!(refused.headers.get("set-cookie").is_none(), "{refused:?}");

    sign_in(&browser, &app, TEST_ADMIN_TOKEN, "admin").await;
    let cookie = browser.cookie(COOKIE).await.expect("the session cookie");
    assert_eq!(cookie.http_only(), Some(true));
    assert_eq!(cookie.path(), Some("/console"));
    assert_eq!(
        cookie.same_site().map(|s| s.to_string()).as_deref(),
        Some("Strict")
    );
    assert!(!cookie.value().contains(TEST_ADMIN_TOKEN));
    let session = cookie.value().to_owned();

    visit_every_page(&browser).await;
    assert_security_headers(&raw_get(&app, "/signin", None).await, "/signin");
    let events = raw_get(&app, "/events", Some(&session)).await;
    assert_eq!(events.status, 200, "{events:?}");
    assert_security_headers(&events, "/events");

    // Sign-out ends the session in the browser and on the server.
    browser.click("#signout-submit").await;
    assert_eq!(browser.path().await, "/console/signin");
    browser.goto(&console_url(&app, "/")).await;
    assert_eq!(browser.path().await, "/console/signin");
    let stale = raw_get(&app, "/", Some(&session)).await;
    assert_eq!(stale.status, 303, "{stale:?}");
    assert!(
        stale.header("location").ends_with("/console/signin"),
        "{stale:?}"
    );
    browser.close().await;
}

/// Each page of the navigation, its table, and a screenshot of it.
async fn visit_every_page(browser: &Browser) {
    let pages = [
        (
            "#nav-overview",
            "/console/",
            "table#overview-endpoints",
            "overview",
        ),
        ("#nav-events", "/console/events", "table#events", "events"),
        (
            "#nav-deliveries",
            "/console/deliveries",
            "table#deliveries",
            "deliveries",
        ),
        (
            "#nav-adapters",
            "/console/adapters",
            "table#adapters",
            "adapters",
        ),
        (
            "#nav-endpoints",
            "/console/endpoints",
            "table#endpoints",
            "endpoints",
        ),
    ];
    for (link, path, table, name) in pages {
        browser.click(&format!("nav#nav a{link}")).await;
        assert_eq!(browser.path().await, path);
        browser.find(table).await;
        assert_eq!(browser.text("#whoami").await, "admin");
        browser.screenshot(name).await;
    }
    // Still on the endpoints page: adapters, URLs and secret versions, never a secret value.
    for endpoint in ["std", "stripe", "github"] {
        browser
            .find(&format!(
                "table#endpoints tr.endpoint[data-endpoint={endpoint}]"
            ))
            .await;
    }
    let stripe = "table#endpoints tr.endpoint[data-endpoint=stripe]";
    assert_eq!(
        browser.text(&format!("{stripe} td.adapter")).await,
        "stripe"
    );
    assert!(
        browser
            .text(&format!("{stripe} td.url"))
            .await
            .ends_with("/webhooks/stripe")
    );
    let row = browser.text(stripe).await;
    assert!(row.contains("2026-11") && row.contains("2026-10"), "{row}");
    let source = browser.source().await;
    for secret in [
        STRIPE_SECRET,
        STRIPE_OLD_SECRET,
        TEST_ADMIN_TOKEN,
        VIEWER_TOKEN,
    ] {
        assert!(
            !source.contains(secret),
            "a secret value on the endpoints page"
        );
    }
    browser.click("#nav-overview").await;
    browser
        .find("table#overview-endpoints tr.endpoint[data-endpoint=stripe]")
        .await;
}

/// No script at all, no framing, no referrer: on every page.
fn assert_security_headers(answer: &crate::support::http::Answer, page: &str) {
    let csp = answer.header("content-security-policy");
    let directive = |name: &str| {
        csp.split(';')
            .map(str::trim)
            .find_map(|d| d.strip_prefix(name)?.strip_prefix(' '))
            .map(str::trim)
    };
    // Scripts fall back on default-src when script-src is absent.
    let scripts = directive("script-src").or_else(|| directive("default-src"));
    assert_eq!(scripts, Some("'none'"), "{page}: no script at all: {csp}");
    assert_eq!(answer.header("x-frame-options"), "DENY", "{page}");
    assert_eq!(answer.header("referrer-policy"), "no-referrer", "{page}");
}
