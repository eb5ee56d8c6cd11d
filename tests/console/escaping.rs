//! What a provider controls is text: an event type holding `<script>`, an `onerror` image and
//! both kinds of quotes, signed as Stripe signs it, shows verbatim in the list, the filter
//! field, the event page and the revealed payload, and adds no element and runs nothing.

use crate::support::browser::Browser;
use crate::support::http::refs;
use crate::support::signing::{STRIPE_SECRET, now, stripe_header};

use super::session::*;

const HOSTILE_TYPE: &str =
    r#"<script>document.title="owned"</script><img src=x onerror="document.title='img'">"' &amp;"#;

/// Nothing the type carried became an element, and no script ran.
async fn assert_inert(browser: &Browser, inside: &str) {
    for tag in ["script", "img"] {
        assert!(
            !browser.has(&format!("{inside} {tag}")).await,
            "a <{tag}> element inside {inside}:\n{}",
            browser.source().await
        );
    }
    let title = browser.title().await;
    assert!(
        title != "owned" && title != "img",
        "a script set the title: {title}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_type_holding_script_and_quotes_renders_as_text_and_runs_nothing() {
    let app = console_app().start().await;
    let body = serde_json::json!({
        "id": "evt_console_hostile",
        "object": "event",
        "type": HOSTILE_TYPE,
        "created": 1764480000,
        "data": {"object": {"id": "pi_hostile", "object": "payment_intent"}},
    })
    .to_string();
    let headers = vec![
        (
            "stripe-signature".to_owned(),
            stripe_header(STRIPE_SECRET, now(), body.as_bytes()),
        ),
        ("content-type".to_owned(), "application/json".to_owned()),
    ];
    let answer = app.post("stripe", &refs(&headers), body).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let inbox_id = answer.json["inbox_id"].as_str().unwrap().to_owned();
    let stored: String = sqlx::query_scalar("SELECT event_type FROM webhook_inbox")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(stored, HOSTILE_TYPE, "the adapter kept the type as sent");
    let browser = admin_browser(&app).await;

    browser.click("#nav-events").await;
    let row = format!("table#events tr.event[data-inbox-id='{inbox_id}']");
    assert_eq!(
        browser.text(&format!("{row} td.event-type")).await,
        HOSTILE_TYPE
    );
    assert_inert(&browser, "table#events").await;

    // Searched for as typed: the field keeps the value whole (an attribute, quotes and all).
    let field = "form#event-filter input[name=type]";
    browser.fill(field, HOSTILE_TYPE).await;
    browser
        .click("form#event-filter button, form#event-filter input[type=submit]")
        .await;
    assert_eq!(
        browser.attr(field, "value").await.as_deref(),
        Some(HOSTILE_TYPE)
    );
    assert_eq!(browser.find_all("table#events tr.event").await.len(), 1);
    assert_inert(&browser, "body").await;

    browser.click(&format!("{row} a.open")).await;
    assert_eq!(browser.text("#event-type").await, HOSTILE_TYPE);
    assert_inert(&browser, "body").await;
    browser.click("form#reveal button#reveal-submit").await;
    let payload = browser.text("pre#payload").await;
    assert!(payload.contains("<script>document.title="), "{payload}");
    assert_inert(&browser, "body").await;
    browser.screenshot("event-hostile-type").await;
    browser.close().await;
    app.shutdown().await;
}
