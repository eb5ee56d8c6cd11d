//! The events the test sent appear (newest first, counted), narrow by type glob, provider event
//! id, object id, endpoint and status, and open on a page that says what was verified, never
//! a secret or signature.

use crate::support::app::TestApp;
use crate::support::browser::Browser;
use crate::support::http::refs;
use crate::support::signing::*;

use super::session::*;

/// POSTs a signed request to the stripe endpoint and gives the inbox id it was accepted as.
pub async fn accept(app: &TestApp, (headers, body): (Vec<(String, String)>, String)) -> String {
    let answer = app.post("stripe", &refs(&headers), body).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.json["inbox_id"]
        .as_str()
        .expect("an inbox id")
        .to_owned()
}

/// The inbox ids of the event rows on the page, in page order.
pub async fn listed(browser: &Browser) -> Vec<String> {
    browser.find("table#events").await;
    let mut ids = Vec::new();
    for row in browser.find_all("table#events tr.event").await {
        ids.push(
            row.attr("data-inbox-id")
                .await
                .expect("attribute")
                .expect("data-inbox-id on every row"),
        );
    }
    ids
}

/// Sends two Stripe events of one type and one of another about `cus_console_42`: their
/// inbox ids, oldest first.
async fn send_three(app: &TestApp) -> [String; 3] {
    [
        accept(app, signed_stripe_event("evt_console_pi_1")).await,
        accept(app, signed_stripe_event("evt_console_pi_2")).await,
        accept(
            app,
            signed_stripe_object_event("evt_console_cu_1", "cus_console_42", now()),
        )
        .await,
    ]
}

/// Submits the event filter with `field` set to `value` (other fields as they are).
async fn filter_by(browser: &Browser, field: &str, value: &str) {
    browser
        .fill(&format!("form#event-filter input[name={field}]"), value)
        .await;
    browser
        .click("form#event-filter button, form#event-filter input[type=submit]")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_events_sent_appear_filter_and_open() {
    let app = console_app().start().await;
    let [first, second, customer] = send_three(&app).await;
    // Processed by the default workers: statuses stay put while the test reads them.
    crate::support::wait::wait_until_converged(&app.db).await;
    let status: String = sqlx::query_scalar("SELECT DISTINCT status::text FROM webhook_inbox")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let browser = admin_browser(&app).await;

    browser.click("#nav-events").await;
    assert_eq!(
        listed(&browser).await,
        [customer.clone(), second.clone(), first.clone()],
        "every event, newest first"
    );
    assert!(browser.text("#total").await.contains('3'));
    let row = format!("table#events tr.event[data-inbox-id='{customer}']");
    assert_eq!(
        browser.text(&format!("{row} td.event-type")).await,
        "customer.updated"
    );
    assert_eq!(
        browser.text(&format!("{row} td.provider-event-id")).await,
        "evt_console_cu_1"
    );
    assert_eq!(browser.text(&format!("{row} td.endpoint")).await, "stripe");
    assert!(!browser.text(&format!("{row} td.status")).await.is_empty());
    browser.screenshot("events-all").await;

    // The filter form, then each filter by its query parameter.
    filter_by(&browser, "endpoint", "github").await;
    assert_eq!(listed(&browser).await, Vec::<String>::new());
    assert!(browser.text("#total").await.contains('0'));
    filter_by(&browser, "endpoint", "stripe").await;
    assert_eq!(listed(&browser).await.len(), 3);
    for (query, expected) in [
        (format!("status={status}"), 3),
        ("status=FAILED".to_owned(), 0),
        (format!("endpoint=stripe&status={status}"), 3),
    ] {
        browser
            .goto(&console_url(&app, &format!("/events?{query}")))
            .await;
        assert_eq!(listed(&browser).await.len(), expected, "{query}");
    }
    browser.screenshot("events-filtered").await;

    // Open one: what was verified, never a secret.
    browser.goto(&console_url(&app, "/events")).await;
    browser.click(&format!("{row} a.open")).await;
    assert_eq!(browser.path().await, format!("/console/events/{customer}"));
    assert_eq!(browser.text("#event-type").await, "customer.updated");
    assert_eq!(browser.text("#provider-event-id").await, "evt_console_cu_1");
    assert!(!browser.text("#event-status").await.is_empty());
    let verified = browser.text("section#verified").await;
    assert!(
        verified.contains("stripe") && verified.contains("2026-11"),
        "adapter and matched secret version: {verified}"
    );
    browser.find("section#processing").await;
    let source = browser.source().await;
    assert!(!source.contains(STRIPE_SECRET) && !source.contains("v1="));
    assert!(
        !browser.has("pre#payload").await,
        "the payload only on reveal"
    );
    browser.screenshot("event").await;

    browser.close().await;
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_narrow_by_type_glob_provider_event_id_and_object_id() {
    let app = console_app().start().await;
    let [first, second, customer] = send_three(&app).await;
    let browser = admin_browser(&app).await;
    browser.goto(&console_url(&app, "/events")).await;

    filter_by(&browser, "type", "customer.*").await;
    assert_eq!(
        listed(&browser).await,
        vec![customer.clone()],
        "type customer.*"
    );
    assert!(browser.text("#total").await.contains('1'));
    filter_by(&browser, "type", "payment_intent.*").await;
    assert_eq!(
        listed(&browser).await,
        [second.clone(), first.clone()],
        "type payment_intent.*"
    );
    browser.screenshot("events-by-type").await;
    for (query, expected) in [
        ("provider_event_id=evt_console_pi_2", vec![second.clone()]),
        ("object_id=cus_console_42", vec![customer.clone()]),
        (
            "type=*.updated&object_id=cus_console_42",
            vec![customer.clone()],
        ),
        ("type=customer.*&provider_event_id=evt_console_pi_1", vec![]),
    ] {
        browser
            .goto(&console_url(&app, &format!("/events?{query}")))
            .await;
        assert_eq!(listed(&browser).await, expected, "{query}");
    }
    // A provider event id finds its event too.
    browser
        .goto(&console_url(&app, "/events/evt_console_pi_1"))
        .await;
    if browser.path().await == format!("/console/events/{first}") {
        assert_eq!(browser.text("#provider-event-id").await, "evt_console_pi_1");
    } else {
        assert_eq!(listed(&browser).await, vec![first.clone()]);
    }
    browser.close().await;
    app.shutdown().await;
}
