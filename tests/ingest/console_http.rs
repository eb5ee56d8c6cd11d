//! The console from raw HTTP (the browser tests drive it in Chromium): its guards, headers,
//! cookies and roles, which a browser would hide or enforce on its own.

use reqwest::StatusCode;
use reqwest::redirect::Policy;

use crate::support::app::{TEST_ADMIN_TOKEN, TEST_VIEWER_TOKEN, TestApp};

/// A client that shows redirects instead of following them, and keeps no cookies.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap()
}

struct Signed {
    cookie: String,
    csrf: String,
}

async fn sign_in(app: &TestApp, token: &str) -> Signed {
    let answer = client()
        .post(format!("{}/console/signin", app.admin))
        .form(&[("token", token)])
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    let set_cookie = answer.headers()["set-cookie"].to_str().unwrap().to_owned();
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    let page = get(app, "/console/events", &cookie).await.1;
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF field on every page")
        .to_owned();
    Signed { cookie, csrf }
}

async fn get(app: &TestApp, path: &str, cookie: &str) -> (StatusCode, String) {
    let answer = client()
        .get(format!("{}{path}", app.admin))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    (answer.status(), answer.text().await.unwrap())
}

async fn post(
    app: &TestApp,
    path: &str,
    cookie: &str,
    form: &[(&str, &str)],
) -> (StatusCode, String) {
    let answer = client()
        .post(format!("{}{path}", app.admin))
        .header("cookie", cookie)
        .form(form)
        .send()
        .await
        .unwrap();
    (answer.status(), answer.text().await.unwrap())
}

#[tokio::test]
async fn the_console_signs_in_with_a_token_and_its_pages_forbid_framing_and_script() {
    let app = TestApp::builder().with_admin().start().await;
    let anonymous = client()
        .get(format!("{}/console/events", app.admin))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::SEE_OTHER);
    assert_eq!(anonymous.headers()["location"], "/console/signin");

    let page = client()
        .get(format!("{}/console/signin", app.admin))
        .send()
        .await
        .unwrap();
    let h = page.headers();
    assert_eq!(
        h["content-security-policy"],
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
         frame-ancestors 'none'; base-uri 'none'"
    );
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["referrer-policy"], "no-referrer");
    assert_eq!(h["cache-control"], "no-store");

    let wrong = client()
        .post(format!("{}/console/signin", app.admin))
        .form(&[("token", "not-the-token-0123456789abcdef0123456789")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(wrong.headers().get("set-cookie").is_none());
    assert!(wrong.text().await.unwrap().contains("id=\"signin-error\""));

    let right = client()
        .post(format!("{}/console/signin", app.admin))
        .form(&[("token", TEST_ADMIN_TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), StatusCode::SEE_OTHER);
    assert_eq!(right.headers()["location"], "/console/");
    let cookie = right.headers()["set-cookie"].to_str().unwrap();
    for flag in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/console",
        "Max-Age=28800",
    ] {
        assert!(cookie.contains(flag), "{flag} in {cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");

    let signed = sign_in(&app, TEST_ADMIN_TOKEN).await;
    for path in [
        "/console/",
        "/console/events",
        "/console/deliveries",
        "/console/adapters",
        "/console/endpoints",
    ] {
        let (status, body) = get(&app, path, &signed.cookie).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        assert!(body.contains("<span id=\"whoami\">admin</span>"), "{path}");
        assert!(!body.contains("<script"), "{path} holds no script");
    }
    // The endpoints page names secret versions, never values.
    let (_, endpoints) = get(&app, "/console/endpoints", &signed.cookie).await;
    assert!(endpoints.contains("/webhooks/stripe"), "{endpoints}");
    assert!(!endpoints.contains(TEST_ADMIN_TOKEN));

    // Signing out ends the session: its cookie no longer opens a page.
    let (status, _) = post(
        &app,
        "/console/signout",
        &signed.cookie,
        &[("csrf", &signed.csrf)],
    )
    .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    let (status, _) = get(&app, "/console/events", &signed.cookie).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    app.shutdown().await;
}

#[tokio::test]
async fn reveal_is_audited_needs_the_csrf_token_and_is_refused_to_a_viewer() {
    let app = TestApp::builder().with_viewer().start().await;
    let inbox_id = app.accept_stripe("evt_console_reveal").await;
    let admin = sign_in(&app, TEST_ADMIN_TOKEN).await;
    let viewer = sign_in(&app, TEST_VIEWER_TOKEN).await;
    let reveal = format!("/console/events/{inbox_id}/reveal");

    let (status, body) = post(&app, &reveal, &admin.cookie, &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = post(&app, &reveal, &admin.cookie, &[("csrf", &viewer.csrf)]).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "another session's token");
    assert_eq!(app.count("operator_audit").await, 0);

    let (status, page) = get(&app, &format!("/console/events/{inbox_id}"), &viewer.cookie).await;
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("evt_console_reveal"));
    assert!(
        !page.contains("id=\"reveal\""),
        "no reveal form for a viewer"
    );
    let (status, _) = post(&app, &reveal, &viewer.cookie, &[("csrf", &viewer.csrf)]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(app.count("operator_audit").await, 0);

    let (status, page) = post(&app, &reveal, &admin.cookie, &[("csrf", &admin.csrf)]).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains("id=\"payload\""));
    let payload = page.split("id=\"payload\">").nth(1).unwrap_or_default();
    assert!(
        payload.contains("\n  &#34;id&#34;: &#34;evt_console_reveal&#34;,"),
        "pretty JSON, escaped: {payload}"
    );
    let (action, actor): (String, String) =
        sqlx::query_as("SELECT action, actor FROM operator_audit")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(action, "payload read");
    assert!(
        actor.starts_with("console admin (token version 1)"),
        "{actor}"
    );

    // A provider event id finds the event too.
    let (status, _) = get(&app, "/console/events/evt_console_reveal", &admin.cookie).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    app.shutdown().await;
}

#[tokio::test]
async fn failed_sign_ins_are_limited_per_address() {
    let app = TestApp::builder().with_admin().start().await;
    let mut statuses = Vec::new();
    for _ in 0..12 {
        let answer = client()
            .post(format!("{}/console/signin", app.admin))
            .form(&[("token", "wrong")])
            .send()
            .await
            .unwrap();
        statuses.push((
            answer.status(),
            answer.headers().get("retry-after").cloned(),
        ));
    }
    assert!(
        statuses[..10]
            .iter()
            .all(|(s, _)| *s == StatusCode::UNAUTHORIZED),
        "{statuses:?}"
    );
    let (status, retry_after) = &statuses[10];
    assert_eq!(*status, StatusCode::TOO_MANY_REQUESTS);
    assert!(retry_after.is_some());
    // Even the right token waits: the address has used its attempts.
    let right = client()
        .post(format!("{}/console/signin", app.admin))
        .form(&[("token", TEST_ADMIN_TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), StatusCode::TOO_MANY_REQUESTS);
    app.shutdown().await;
}

#[tokio::test]
async fn a_session_ends_when_its_token_version_leaves_the_secrets_file() {
    let app = TestApp::builder().with_admin().start().await;
    let signed = sign_in(&app, TEST_ADMIN_TOKEN).await;
    assert_eq!(
        get(&app, "/console/", &signed.cookie).await.0,
        StatusCode::OK
    );
    // The operator rotates: version 1 goes, version 2 (another token) comes.
    let path = &app.config.secrets_path;
    let text = std::fs::read_to_string(path).unwrap().replace(
        &format!("version = \"1\"\nvalue = \"{TEST_ADMIN_TOKEN}\""),
        "version = \"2\"\nvalue = \"rotated-admin-token-0123456789abcdef0123456789\"",
    );
    crate::support::files::install_atomically(path, text.as_bytes());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (status, _) = get(&app, "/console/", &signed.cookie).await;
        if status == StatusCode::SEE_OTHER {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the session outlived its token"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let rotated = sign_in(&app, "rotated-admin-token-0123456789abcdef0123456789").await;
    assert_eq!(
        get(&app, "/console/", &rotated.cookie).await.0,
        StatusCode::OK
    );
    app.shutdown().await;
}

#[tokio::test]
async fn send_again_on_the_event_page_delivers_the_event_once_more_with_the_same_key() {
    use crate::support::app::{http_route_toml, worker_toml};
    use crate::support::receiver::{Behaviour, Receiver};
    let receiver = Receiver::start(Behaviour::ok()).await;
    let app = TestApp::builder()
        .with_admin()
        .append_toml(&worker_toml(2))
        .append_toml(&http_route_toml(&receiver.url, ""))
        .start()
        .await;
    let inbox_id = app.accept_stripe("evt_console_again").await;
    app.wait_count("deliveries", "status = 'SENT'", 1).await;
    let admin = sign_in(&app, TEST_ADMIN_TOKEN).await;
    // The question an operator asks: did evt_console_again arrive, and what became of it.
    let (status, list) = get(
        &app,
        "/console/events?provider_event_id=evt_console_again",
        &admin.cookie,
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        list.contains(&format!("data-inbox-id=\"{inbox_id}\"")),
        "{list}"
    );
    let (_, page) = get(&app, &format!("/console/events/{inbox_id}"), &admin.cookie).await;
    let action = page
        .split("class=\"replay\" method=\"post\" action=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a Send again form per delivery")
        .to_owned();
    assert!(page.contains("SENT"), "{page}");
    let (status, answer) = post(
        &app,
        &action,
        &admin.cookie,
        &[("csrf", &admin.csrf), ("resend", "1")],
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(answer.contains("requeued 1 of 1 selected"), "{answer}");
    crate::support::wait::eventually("the event is delivered again", || async {
        receiver.received().len() == 2
    })
    .await;
    let received = receiver.received();
    assert_eq!(received[0].idempotency_key, inbox_id.to_string());
    assert_eq!(received[1].idempotency_key, inbox_id.to_string());
    let (action_logged,): (String,) = sqlx::query_as("SELECT action FROM operator_audit")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(action_logged, "deliveries replayed");
    app.shutdown().await;
}

#[tokio::test]
async fn a_sign_in_whose_body_never_arrives_is_cut_at_the_body_deadline() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let app = TestApp::builder()
        .with_admin()
        .server_toml("body_timeout_ms = 300\n")
        .start()
        .await;
    let addr = app.admin.trim_start_matches("http://").to_owned();
    let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /console/signin HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\ntoken="
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut answer))
        .await
        .expect("an answer before the test gives up")
        .unwrap();
    let text = String::from_utf8_lossy(&answer[..n]);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    app.shutdown().await;
}
