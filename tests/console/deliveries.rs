//! Replays from the deliveries pages: one FAILED delivery replayed by a click reaches the
//! test target with the same idempotency key and shows as SENT; a bulk replay's dry run
//! counts what it would requeue and changes nothing until confirmed.

use std::time::Duration;

use crate::support::app::http_route_toml;
use crate::support::browser::Browser;
use crate::support::database::scalar_i64;
use crate::support::receiver::{Behaviour, Receiver};
use crate::support::wait::eventually;

use super::session::*;

/// The delivery ids of the rows on the page, in page order.
async fn listed(browser: &Browser) -> Vec<String> {
    browser.find("table#deliveries").await;
    let mut ids = Vec::new();
    for row in browser.find_all("table#deliveries tr.delivery").await {
        ids.push(
            row.attr("data-delivery-id")
                .await
                .expect("attribute")
                .expect("data-delivery-id on every row"),
        );
    }
    ids
}

/// The first whole number in `text`.
fn first_number(text: &str) -> Option<u64> {
    text.split(|c: char| !c.is_ascii_digit())
        .find(|part| !part.is_empty())
        .and_then(|n| n.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_delivery_replayed_from_the_page_reaches_the_target_and_shows_as_sent() {
    let receiver = Receiver::start(Behaviour::fails_once()).await;
    let app = console_app()
        .append_toml(&http_route_toml(&receiver.url, "max_attempts = 1"))
        .start()
        .await;
    let inbox_id = app.accept_stripe("evt_console_replay").await;
    app.wait_count("deliveries", "status = 'FAILED'", 1).await;
    let id: String = sqlx::query_scalar("SELECT delivery_id::text FROM deliveries")
        .fetch_one(&app.db)
        .await
        .unwrap();
    let browser = admin_browser(&app).await;

    browser.click("#nav-deliveries").await;
    assert_eq!(listed(&browser).await, vec![id.clone()]);
    let row = format!("table#deliveries tr.delivery[data-delivery-id='{id}']");
    assert!(
        browser
            .text(&format!("{row} td.status"))
            .await
            .contains("FAILED")
    );
    assert!(
        browser
            .text(&format!("{row} td.target"))
            .await
            .contains(&receiver.url)
    );
    assert!(
        !browser
            .text(&format!("{row} td.last-error"))
            .await
            .is_empty()
    );
    browser.screenshot("deliveries-failed").await;

    browser.click(&format!("{row} a.open")).await;
    assert_eq!(browser.path().await, format!("/console/deliveries/{id}"));
    assert!(browser.text("#delivery-status").await.contains("FAILED"));
    assert!(
        browser
            .text("#delivery-target")
            .await
            .contains(&receiver.url)
    );
    assert!(!browser.text("#delivery-last-error").await.is_empty());
    browser.screenshot("delivery-failed").await;

    browser.click("form.replay button.replay-submit").await;
    app.wait_count("deliveries", "status = 'SENT'", 1).await;
    let page = console_url(&app, &format!("/deliveries/{id}"));
    reload_until(&browser, &page, "#delivery-status", "shown as SENT", |s| {
        s.contains("SENT")
    })
    .await;
    browser.screenshot("delivery-sent").await;
    let received = receiver.received();
    assert_eq!(received.len(), 2, "the failed try, then the replay");
    for delivery in &received {
        assert_eq!(delivery.idempotency_key, inbox_id.to_string());
    }
    browser.goto(&console_url(&app, "/deliveries")).await;
    assert!(
        browser
            .text(&format!("{row} td.status"))
            .await
            .contains("SENT")
    );
    browser.close().await;
    app.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_replays_dry_run_shows_the_count_and_changes_nothing() {
    // Three failures (one try each), then every answer a 200.
    let receiver = Receiver::start(Behaviour {
        script: [(500, Duration::ZERO); 3].into(),
        ..Behaviour::ok()
    })
    .await;
    let app = console_app()
        .append_toml(&http_route_toml(&receiver.url, "max_attempts = 1"))
        .start()
        .await;
    let mut failed_events = Vec::new();
    for n in 0..3 {
        failed_events.push(app.accept_stripe(&format!("evt_console_bulk_{n}")).await);
        app.wait_count("deliveries", "status = 'FAILED'", n + 1)
            .await;
    }
    // One more, delivered at once: the filter leaves it out.
    app.accept_stripe("evt_console_bulk_sent").await;
    app.wait_count("deliveries", "status = 'SENT'", 1).await;
    let browser = admin_browser(&app).await;

    browser
        .goto(&console_url(&app, "/deliveries?status=FAILED"))
        .await;
    assert_eq!(listed(&browser).await.len(), 3, "the FAILED ones only");
    browser
        .click("form#bulk-replay button#bulk-replay-submit")
        .await;
    let count = browser.text("#replay-count").await;
    assert_eq!(first_number(&count), Some(3), "{count}");
    browser.find("form#replay-confirm").await;
    browser.screenshot("replay-dry-run").await;

    // The dry run changed nothing.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let unchanged = "SELECT count(*) FROM deliveries WHERE status = 'FAILED' AND attempt_count = 1";
    assert_eq!(scalar_i64(&app.db, unchanged).await, 3);
    assert_eq!(receiver.arrived(), 4);

    browser
        .click("form#replay-confirm button#replay-confirm-submit")
        .await;
    let result = browser.text("#replay-result").await;
    assert_eq!(first_number(&result), Some(3), "{result}");
    browser.screenshot("replay-result").await;
    app.wait_count("deliveries", "status = 'SENT'", 4).await;
    eventually("the three replays arrive", || async {
        receiver.received().len() == 7
    })
    .await;
    let keys: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.idempotency_key.clone())
        .collect();
    for inbox_id in &failed_events {
        let sent = keys.iter().filter(|k| **k == inbox_id.to_string()).count();
        assert_eq!(
            sent, 2,
            "{inbox_id}: the failed try and the replay, same key"
        );
    }
    browser.close().await;
    app.shutdown().await;
}
