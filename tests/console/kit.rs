//! The browser kit itself, against a tiny page served by the test: it types, submits a form,
//! follows a link, reads and changes cookies, takes a screenshot, runs no script the page's
//! CSP forbids, and leaves no Chromium behind.

use axum::extract::Query;
use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;

use crate::support::browser::Browser;
use crate::support::receiver::serve_on_port_0;

const CSP: &str = "default-src 'none'; script-src 'none'; form-action 'self'";

async fn page(Query(query): Query<std::collections::HashMap<String, String>>) -> impl IntoResponse {
    let q = query.get("q").cloned().unwrap_or_default();
    // The query is put back unescaped on purpose: the CSP alone must stop the script.
    let body = format!(
        "<!doctype html><title>kit</title>\
         <form id=\"search\" method=\"get\" action=\"/\"><input id=\"q\" name=\"q\">\
         <button id=\"go\">go</button></form>\
         <p id=\"echo\">{q}</p><a id=\"next\" href=\"/other\">next</a>"
    );
    (
        [
            (header::CONTENT_SECURITY_POLICY, CSP),
            (
                header::SET_COOKIE,
                "kit=1; Path=/; HttpOnly; SameSite=Strict",
            ),
        ],
        Html(body),
    )
}

async fn other() -> impl IntoResponse {
    (
        [(header::CONTENT_SECURITY_POLICY, CSP)],
        Html("<!doctype html><title>other</title><h1 id=\"other\">the other page</h1>"),
    )
}

/// Processes whose command line names this profile folder.
fn processes_using(profile_marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|cmdline| String::from_utf8_lossy(cmdline).contains(profile_marker))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kit_types_submits_follows_reads_cookies_and_screenshots_and_leaves_nothing_behind() {
    let app = axum::Router::new()
        .route("/", get(page))
        .route("/other", get(other));
    let (addr, _server) = serve_on_port_0(app).await;
    let base = format!("http://{addr}");

    let browser = Browser::start().await;
    let profile = browser.profile_marker();
    assert!(
        processes_using(&profile) > 0,
        "Chromium runs on its own profile"
    );
    browser.goto(&format!("{base}/")).await;
    assert_eq!(browser.title().await, "kit");

    // A GET form submitted by a click: the next page has loaded when click returns.
    let typed = "<script>document.title='ran'</script>";
    browser.fill("#q", typed).await;
    browser.click("#go").await;
    assert!(
        browser.url().await.contains("q=%3Cscript%3E"),
        "{}",
        browser.url().await
    );
    assert_eq!(browser.path().await, "/");
    assert_eq!(browser.title().await, "kit", "the CSP stopped the script");
    assert!(
        browser.has("#echo script").await,
        "the page did put it back"
    );

    // Cookies as the server set them, then changed by the test.
    let cookie = browser.cookie("kit").await.expect("the page's cookie");
    assert_eq!((cookie.value(), cookie.http_only()), ("1", Some(true)));
    browser.delete_cookie("kit").await;
    assert!(browser.cookie("kit").await.is_none());
    browser.set_cookie("kit", "2", "/").await;
    assert_eq!(browser.cookie("kit").await.unwrap().value(), "2");

    browser.click("#next").await;
    assert_eq!(browser.path().await, "/other");
    assert_eq!(browser.text("#other").await, "the other page");
    let shot = browser.screenshot("kit-other").await;
    assert!(std::fs::metadata(&shot).unwrap().len() > 1000, "{shot:?}");

    browser.close().await;
    crate::support::wait::eventually("no Chromium left on the profile", || async {
        processes_using(&profile) == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_dropped_without_closing_leaves_no_chromium_behind() {
    let browser = Browser::start().await;
    browser.goto("about:blank").await;
    let profile = browser.profile_marker();
    assert!(processes_using(&profile) > 0);
    drop(browser);
    crate::support::wait::eventually("no Chromium left on the profile", || async {
        processes_using(&profile) == 0
    })
    .await;
}
