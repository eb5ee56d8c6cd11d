//! The accepted-event notice (`webhook_outbox`) is committed with its inbox row either way;
//! without `[nats]` nothing would publish it, so it is written already published instead of
//! costing the relay a read and an update per event.

use wharf::processing::OutboxRelay;

use crate::support::{app::*, database::*, nats::*};

/// (outbox rows, of which published at their event's `received_at`, still unpublished).
async fn notices(app: &TestApp) -> (i64, i64, i64) {
    one_row(
        &app.db,
        "SELECT count(*), count(*) FILTER (WHERE o.published_at = i.received_at),
                count(*) FILTER (WHERE o.published_at IS NULL)
         FROM webhook_outbox o JOIN webhook_inbox i ON i.inbox_id = o.inbox_id",
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_nats_the_notice_is_committed_published_and_the_relay_has_nothing_to_do() {
    // No workers or relays in the server: the test drives the relay.
    let app = TestApp::builder().workers(0).start().await;
    for id in ["evt_notice_1", "evt_notice_2", "evt_notice_1"] {
        app.post_stripe(id).await.assert_status(200);
    }
    assert_eq!(
        notices(&app).await,
        (2, 2, 0),
        "one notice per event, published"
    );
    let relay = OutboxRelay::new(app.processing());
    assert_eq!(relay.try_execute().await.unwrap(), 0);
    assert_eq!(
        scalar_i64(&app.db, "SELECT count(*) FROM webhook_inbox").await,
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_nats_the_notice_waits_for_the_relay_and_is_published_once() {
    let scope = NatsScope::new();
    let app = TestApp::builder()
        .workers(1)
        .append_toml(&scope.toml())
        .start()
        .await;
    for id in ["evt_notice_nats"; 2] {
        app.post_stripe(id).await.assert_status(200);
    }
    app.wait_count("webhook_outbox", "published_at IS NOT NULL", 1)
        .await;
    // Marked by the relay after it published, not at acceptance.
    let (rows, published_on_arrival, unpublished) = notices(&app).await;
    assert_eq!((rows, published_on_arrival, unpublished), (1, 0, 0));
    assert_eq!(scope.accepted_messages().await, 1);
    scope.cleanup().await;
}
