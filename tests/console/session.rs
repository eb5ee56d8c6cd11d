//! What every console test starts from: an app whose admin listener serves the console, with
//! the admin token and a viewer token set (`console_viewer`), a browser signed in as one of
//! them, and raw form posts carrying the browser's session cookie.

use crate::support::app::{TEST_ADMIN_TOKEN, TestApp, TestAppBuilder};
use crate::support::browser::Browser;
use crate::support::http::Answer;

/// The console's session cookie (console-dom.md).
pub const COOKIE: &str = "wharf_console";
/// The read-only role's secret set and token (`TestAppBuilder::with_viewer`).
pub use crate::support::app::{TEST_VIEWER_SET as VIEWER_SET, TEST_VIEWER_TOKEN as VIEWER_TOKEN};

/// The viewer set's entry as `with_viewer` writes it (version `1`, no expiry).
pub fn viewer_secrets() -> String {
    format!("\n[[{VIEWER_SET}]]\nversion = \"1\"\nvalue = \"{VIEWER_TOKEN}\"\n")
}

/// The default app with the admin token and the viewer set (`extra_secrets`: more secrets
/// file text, such as more versions of the viewer set).
pub fn console_app_with(extra_secrets: &str) -> TestAppBuilder {
    TestApp::builder()
        .with_admin()
        .with_viewer()
        .add_secrets(extra_secrets)
}

/// The default app with the admin token and the viewer set.
pub fn console_app() -> TestAppBuilder {
    console_app_with("")
}

/// `path` under the console (`/` is the overview).
pub fn console_url(app: &TestApp, path: &str) -> String {
    format!("{}/console{path}", app.admin)
}

/// Fills the sign-in form with `token` and submits it.
pub async fn submit_token(browser: &Browser, app: &TestApp, token: &str) {
    browser.goto(&console_url(app, "/signin")).await;
    browser.fill("#token", token).await;
    browser.click("#signin-submit").await;
}

/// Signs in with `token` and asserts the overview greets the expected role.
pub async fn sign_in(browser: &Browser, app: &TestApp, token: &str, role: &str) {
    submit_token(browser, app, token).await;
    assert_eq!(browser.path().await, "/console/", "signed in as {role}");
    assert_eq!(browser.text("#whoami").await, role);
}

/// A browser signed in as the admin.
pub async fn admin_browser(app: &TestApp) -> Browser {
    let browser = Browser::start().await;
    sign_in(&browser, app, TEST_ADMIN_TOKEN, "admin").await;
    browser
}

/// A browser signed in as a viewer.
pub async fn viewer_browser(app: &TestApp) -> Browser {
    let browser = Browser::start().await;
    sign_in(&browser, app, VIEWER_TOKEN, "viewer").await;
    browser
}

/// The session cookie's value in `browser`.
pub async fn session_cookie(browser: &Browser) -> String {
    match browser.cookie(COOKIE).await {
        Some(cookie) => cookie.value().to_owned(),
        None => panic!("no {COOKIE} cookie on {}", browser.url().await),
    }
}

/// The page's CSRF token, from the sign-out form every signed-in page has.
pub async fn csrf_token(browser: &Browser) -> String {
    browser
        .attr("form#signout input[name=csrf]", "value")
        .await
        .expect("a csrf value")
}

/// POSTs `form` (urlencoded) to the console `path` with `cookie` as the session, following
/// no redirect.
pub async fn raw_post(app: &TestApp, path: &str, cookie: &str, form: &[(&str, &str)]) -> Answer {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let body = form
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    let response = client
        .post(console_url(app, path))
        .header("cookie", format!("{COOKIE}={cookie}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .expect("the console answers");
    Answer::read(response).await
}

/// GETs the console `path` with `cookie` as the session (none: no cookie), following no
/// redirect.
pub async fn raw_get(app: &TestApp, path: &str, cookie: Option<&str>) -> Answer {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut request = client.get(console_url(app, path));
    if let Some(cookie) = cookie {
        request = request.header("cookie", format!("{COOKIE}={cookie}"));
    }
    Answer::read(request.send().await.expect("the console answers")).await
}

/// Percent-encodes a form value (everything but unreserved characters).
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Reloads `path` until `done` holds for the text of `css` (30 s at most).
pub async fn reload_until(
    browser: &Browser,
    url: &str,
    css: &str,
    what: &str,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        browser.goto(url).await;
        let found = browser.find_all(css).await;
        if let Some(element) = found.first() {
            let text = element.text().await.unwrap_or_default();
            if done(&text) {
                return text;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within 30 s: {what} (`{css}` on {url}):\n{}",
            browser.source().await
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
}

/// Whether the HTML `body` has an element with this id (however the attribute is quoted).
pub fn has_id(body: &str, id: &str) -> bool {
    [
        format!("id=\"{id}\""),
        format!("id='{id}'"),
        format!("id={id}"),
    ]
    .iter()
    .any(|attribute| body.contains(attribute.as_str()))
}
